/* Records built by the C accelerators: tuple subclasses (NamedTuples), and classes whose fields
 * are slots, such as the frozen, slotted dataclass ProfilingTask (see RecordKind below).
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

/* How to build the records of one class, either kind:
 * - a tuple subclass: record_new() above;
 * - a class whose n fields are __slots__ (a frozen, slotted dataclass): the object from the
 *   class's tp_alloc (all slots NULL), each field stored through its slot's member descriptor's
 *   own setter (tp_descr_set), which is what object.__setattr__ ends in, without the attribute
 *   lookup and without the class's __setattr__ (a frozen dataclass's refuses every write). Only
 *   the limited API is used: no assumption about where a slot lies in the object.
 * Neither kind may have a __dict__: the callers untrack records that hold only atomic values. */
#define RECORD_MAX_FIELDS 8

typedef struct {
    PyTypeObject *cls; /* borrowed: the caller holds the class for as long as it builds */
    allocfunc alloc;
    Py_ssize_t n;
    int slotted;
    PyObject *descr[RECORD_MAX_FIELDS]; /* new references (slotted only) */
    descrsetfunc set[RECORD_MAX_FIELDS];
} RecordKind;

static inline void
record_kind_clear(RecordKind *kind)
{
    for (Py_ssize_t j = 0; j < RECORD_MAX_FIELDS; j++) {
        Py_CLEAR(kind->descr[j]);
    }
}

/* Fill *kind* for class *cls* with *n* fields; *what* names the argument in errors. */
static inline int
record_kind_init(RecordKind *kind, PyObject *cls, Py_ssize_t n, const char *what)
{
    memset(kind, 0, sizeof *kind);
    if (!PyType_Check(cls) || n > RECORD_MAX_FIELDS) {
        PyErr_Format(PyExc_TypeError, "%s must be a record class", what);
        return -1;
    }
    PyObject *offset = PyObject_GetAttrString(cls, "__dictoffset__");
    if (offset == NULL) {
        return -1;
    }
    Py_ssize_t dictoffset = PyLong_AsSsize_t(offset);
    Py_DECREF(offset);
    if (dictoffset == -1 && PyErr_Occurred()) {
        return -1;
    }
    if (dictoffset != 0) {
        PyErr_Format(PyExc_TypeError, "%s must not have a __dict__", what);
        return -1;
    }
    kind->cls = (PyTypeObject *)cls;
    kind->n = n;
    kind->alloc = (allocfunc)PyType_GetSlot(kind->cls, Py_tp_alloc);
    if (kind->alloc == NULL) {
        if (!PyErr_Occurred()) {
            PyErr_Format(PyExc_TypeError, "%s has no tp_alloc", what);
        }
        return -1;
    }
    if (PyType_IsSubtype(kind->cls, &PyTuple_Type)) {
        return 0;
    }
    kind->slotted = 1;
    PyObject *names = PyObject_GetAttrString(cls, "__slots__");
    if (names == NULL && PyErr_ExceptionMatches(PyExc_AttributeError)) {
        PyErr_Clear();
    }
    else if (names == NULL) {
        return -1;
    }
    if (names == NULL || !PyTuple_Check(names) || PyTuple_Size(names) != n) {
        Py_XDECREF(names);
        PyErr_Format(PyExc_TypeError, "%s must be a tuple subclass or have %zd fields in __slots__", what, n);
        return -1;
    }
    for (Py_ssize_t j = 0; j < n; j++) {
        PyObject *descr = PyObject_GetAttr(cls, PyTuple_GetItem(names, j));
        descrsetfunc set = descr == NULL ? NULL : (descrsetfunc)PyType_GetSlot(Py_TYPE(descr), Py_tp_descr_set);
        if (set == NULL) {
            if (!PyErr_Occurred()) {
                PyErr_Format(PyExc_TypeError, "%s: slot %zd has no setter", what, j);
            }
            Py_XDECREF(descr);
            Py_DECREF(names);
            record_kind_clear(kind);
            return -1;
        }
        kind->descr[j] = descr;
        kind->set[j] = set;
    }
    Py_DECREF(names);
    return 0;
}

/* A record of *kind* holding the n new references *items*, which it steals (also on failure). */
static inline PyObject *
record_kind_new(RecordKind *kind, PyObject **items)
{
    if (!kind->slotted) {
        return record_new(kind->cls, kind->alloc, items, kind->n);
    }
    PyObject *record = kind->alloc(kind->cls, 0);
    int failed = record == NULL;
    for (Py_ssize_t j = 0; j < kind->n; j++) {
        if (!failed && kind->set[j](kind->descr[j], record, items[j]) < 0) {
            failed = 1;
        }
        Py_DECREF(items[j]); /* the slot took its own reference */
    }
    if (failed) {
        Py_XDECREF(record);
        return NULL;
    }
    return record;
}

#endif /* ASC_APROF_RECORD_NEW_H */
