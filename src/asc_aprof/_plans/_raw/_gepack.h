/* GE tasks packed by _chost's lean walk (lean_finish) for _cdevice.packed_device: per device, 12
 * bytes a task, its stream and task ids and the index of a template in a list of GE task records
 * (every task of one template shares its op name, GE type and block dims, items 5-8; the
 * template's own ids are its first task's). Their context is the invalid one and their batch 0. */
#ifndef ASC_APROF_GEPACK_H
#define ASC_APROF_GEPACK_H

#include <Python.h>
#include <stdint.h>

typedef struct {
    uint32_t stream, task, tmpl;
} GePacked;

typedef struct {
    GePacked *v;
    Py_ssize_t n, cap;
} GeVec;

#define GE_CAPSULE "asc_aprof._plans._raw.packed_ge"

#endif
