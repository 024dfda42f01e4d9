/* Records (tuple subclasses such as NamedTuples) built by the C accelerators.
 *
 * The fast way is the class's tp_alloc and PyTuple_SetItem. From CPython 3.14 on, a tuple keeps
 * its hash in the object, and only tuple's own constructors mark it "not computed yet"; an object
 * from tp_alloc would hash to 0 forever (equal records, one hash for all: sets and dicts of
 * records degrade, and hash() differs from the pure code's records). There, records are built
 * through tuple.__new__(cls, items) instead, which costs two more small allocations each.
 *
 * Included by each extension's source; call record_new_init() once when the module loads.
 * ASC_APROF_RECORDS_VIA_NEW=1 takes the constructor path on any version (tests compare both). */
#ifndef ASC_APROF_RECORD_NEW_H
#define ASC_APROF_RECORD_NEW_H

#include <Python.h>
#include <stdlib.h>
#include <string.h>

static int record_via_new;  /* set once by record_new_init(), read-only afterwards */
static newfunc record_tuple_new;

static int
record_new_init(void)
{
    record_tuple_new = (newfunc)PyType_GetSlot(&PyTuple_Type, Py_tp_new);
    if (record_tuple_new == NULL) {
        if (!PyErr_Occurred()) {
            PyErr_SetString(PyExc_SystemError, "tuple has no tp_new");
        }
        return -1;
    }
    PyObject *info = PySys_GetObject("version_info"); /* borrowed */
    if (info == NULL) {
        PyErr_SetString(PyExc_SystemError, "sys.version_info is missing");
        return -1;
    }
    PyObject *major = PySequence_GetItem(info, 0);
    PyObject *minor = major ? PySequence_GetItem(info, 1) : NULL;
    long ma = major ? PyLong_AsLong(major) : -1;
    long mi = minor ? PyLong_AsLong(minor) : -1;
    Py_XDECREF(major);
    Py_XDECREF(minor);
    if (PyErr_Occurred()) {
        return -1;
    }
    const char *forced = getenv("ASC_APROF_RECORDS_VIA_NEW");
    record_via_new = (ma > 3 || (ma == 3 && mi >= 14)) || (forced != NULL && strcmp(forced, "1") == 0);
    return 0;
}

/* A record of class *cls* holding *n* new references, which it steals (also on failure); *alloc*
 * is the class's tp_alloc. NULL with an exception set on failure. */
static PyObject *
record_new(PyTypeObject *cls, allocfunc alloc, PyObject **items, Py_ssize_t n)
{
    PyObject *record = record_via_new ? PyTuple_New(n) : alloc(cls, n);
    if (record == NULL) {
        for (Py_ssize_t k = 0; k < n; k++) {
            Py_DECREF(items[k]);
        }
        return NULL;
    }
    for (Py_ssize_t j = 0; j < n; j++) {
        if (PyTuple_SetItem(record, j, items[j]) < 0) { /* it stole items[j] even so */
            while (++j < n) {
                Py_DECREF(items[j]);
            }
            Py_DECREF(record);
            return NULL;
        }
    }
    if (!record_via_new) {
        return record;
    }
    PyObject *args = PyTuple_Pack(1, record);
    Py_DECREF(record);
    if (args == NULL) {
        return NULL;
    }
    PyObject *made = record_tuple_new(cls, args, NULL);
    Py_DECREF(args);
    return made;
}

#endif /* ASC_APROF_RECORD_NEW_H */
