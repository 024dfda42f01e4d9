/* asc_aprof._plans._raw._cdevice: the device side of the raw reader's hot loops in C (an optional
 * accelerator for asc_aprof._plans._raw._run, whose pure-Python code is the reference).
 *
 * paired_stars() pairs the stars_soc start and end records, read in place from the file's bytes,
 * into device tasks (paired_tasks() the same from decoded columns); of_device() and ge_index()
 * pick a device's host and GE tasks; top_down() joins device and host tasks; op_summary() joins
 * those with the GE tasks and prints, filters and builds the op_summary rows; printed_all() and
 * round3() are the printing and rounding they share with task_time; public_tasks() makes the
 * result's ProfilingTask records; empty() and tuple_of() take big lists and dicts apart and make
 * big tuples in steps (see _release.h).
 *
 * The contract with _run.py: every result is the pure code's, object for object equal (the
 * same floats from the same IEEE operations, no contraction into fused multiply-adds; the
 * same integers and strings). Where this code cannot give that result cheaply or exactly
 * (a value outside its integer ranges, a tie, a duplicate id, anything the pure code declines)
 * it returns None and the caller runs the pure code, which then also raises the decline with
 * its own reason and message. Single values it cannot print or round exactly in integers
 * (printed starts of the Decimal path, durations out of range) are handed to a Python callable
 * or to float.__round__.
 *
 * Every loop over a run's records or tasks passes release points (_release.h), and sorting
 * runs with the GIL released, so that an event loop in another thread keeps running while a
 * decode does.
 *
 * Only the stable ABI (Python >= 3.10) is used, so one build serves every later version.
 */
#ifndef Py_LIMITED_API
#define Py_LIMITED_API 0x030A0000
#endif
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../_record_new.h"
#include "_gepack.h"
#include "_rawdata.h"
#include "_release.h"

#include <float.h>

/* Floating-point expressions must round to double after every operation, as Python's do: no
 * wider evaluation (x87), no fused multiply-adds. Where the compiler evaluates wider, the
 * extension is not built (it is optional) and the pure code runs. */
#if !defined(FLT_EVAL_METHOD) || FLT_EVAL_METHOD != 0
#error "asc_aprof._plans._raw._cdevice needs double expressions evaluated in double (FLT_EVAL_METHOD 0)"
#endif
#if defined(__clang__)
#pragma clang fp contract(off)
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

#define MAX_PLACES 17 /* decimals of repr(ns) handled in integers (10**17 fits in 63 bits) */

static const uint64_t TEN[20] = {
    1ULL,
    10ULL,
    100ULL,
    1000ULL,
    10000ULL,
    100000ULL,
    1000000ULL,
    10000000ULL,
    100000000ULL,
    1000000000ULL,
    10000000000ULL,
    100000000000ULL,
    1000000000000ULL,
    10000000000000ULL,
    100000000000000ULL,
    1000000000000000ULL,
    10000000000000000ULL,
    100000000000000000ULL,
    1000000000000000000ULL,
    10000000000000000000ULL,
};

/* -- record building ----------------------------------------------------------------------- */

/* Whether a record holding *items* can be left out of the cyclic GC: it holds only atoms or
 * tuples that are themselves untracked, so it can never be part of a reference cycle. */
static int
atomic_items(PyObject **items, Py_ssize_t n)
{
    for (Py_ssize_t j = 0; j < n; j++) {
        PyObject *item = items[j];
        if (item == Py_None || PyLong_CheckExact(item) || PyFloat_CheckExact(item)
            || PyUnicode_CheckExact(item)) {
            continue;
        }
        if (PyTuple_Check(item) && !PyObject_GC_IsTracked(item)) {
            continue;
        }
        return 0;
    }
    return 1;
}

/* A new record of class *cls* (a tuple subclass without __dict__) from *n* new references,
 * which it steals (also on failure; a NULL item means its creation failed). Built as
 * _record_new.h says, so that it hashes as the pure code's records do. */
static PyObject *
make_record(PyObject *cls, allocfunc alloc, PyObject **items, Py_ssize_t n)
{
    for (Py_ssize_t j = 0; j < n; j++) {
        if (items[j] == NULL) {
            for (Py_ssize_t k = 0; k < n; k++) {
                Py_XDECREF(items[k]);
            }
            return NULL;
        }
    }
    int untrack = atomic_items(items, n);
    PyObject *record = record_new((PyTypeObject *)cls, alloc, items, n);
    if (record != NULL && untrack) {
        PyObject_GC_UnTrack(record);
    }
    return record;
}

/* The tp_alloc of a record class, after checking that it is a tuple subclass without __dict__. */
static allocfunc
record_alloc(PyObject *cls, const char *what)
{
    if (!PyType_Check(cls) || !PyType_IsSubtype((PyTypeObject *)cls, &PyTuple_Type)) {
        PyErr_Format(PyExc_TypeError, "%s must be a tuple subclass", what);
        return NULL;
    }
    PyObject *offset = PyObject_GetAttrString(cls, "__dictoffset__");
    if (offset == NULL) {
        return NULL;
    }
    Py_ssize_t dictoffset = PyLong_AsSsize_t(offset);
    Py_DECREF(offset);
    if (dictoffset == -1 && PyErr_Occurred()) {
        return NULL;
    }
    if (dictoffset != 0) {
        PyErr_Format(PyExc_TypeError, "%s must not have a __dict__", what);
        return NULL;
    }
    allocfunc alloc = (allocfunc)PyType_GetSlot((PyTypeObject *)cls, Py_tp_alloc);
    if (alloc == NULL && !PyErr_Occurred()) {
        PyErr_Format(PyExc_TypeError, "%s has no tp_alloc", what);
    }
    return alloc;
}

static PyObject *
new_ref(PyObject *obj)
{
    Py_INCREF(obj);
    return obj;
}

/* -- sorting --------------------------------------------------------------------------------- */

typedef struct {
    double key;
    Py_ssize_t index; /* ties keep index order: a stable sort */
} Keyed;

static int
keyed_cmp(const void *pa, const void *pb)
{
    const Keyed *a = pa, *b = pb;
    if (a->key < b->key) {
        return -1;
    }
    if (a->key > b->key) {
        return 1;
    }
    return (a->index > b->index) - (a->index < b->index);
}

/* A stable sort by key (no NaN keys): the records come mostly in time order, so first a check. */
static void
stable_sort(Keyed *items, Py_ssize_t n)
{
    for (Py_ssize_t i = 1; i < n; i++) {
        if (keyed_cmp(&items[i - 1], &items[i]) > 0) {
            qsort(items, (size_t)n, sizeof(Keyed), keyed_cmp);
            return;
        }
    }
}

/* -- round(x, 3) ------------------------------------------------------------------------------ */

/* round(x, 3) of a finite x >= 0, exactly as Python rounds (the exact binary value rounded half
 * even to 3 decimals, then the nearest double): x = mant * 2**e, so x * 1000 = mant * 125 * 2**e
 * is an integer of at most 60 bits shifted, rounded here in integers; the result q / 1000 is
 * one correctly rounded division of exact doubles. Returns 0 where that does not apply (the
 * caller asks Python). */
static int
round3_fast(double x, double *out)
{
    if (!(x >= 0.0) || !isfinite(x)) {
        return 0;
    }
    if (x == 0.0) {
        if (signbit(x)) {
            return 0;
        }
        *out = 0.0;
        return 1;
    }
    int e;
    double m = frexp(x, &e); /* x = m * 2**e, 0.5 <= m < 1 */
    uint64_t mant = (uint64_t)ldexp(m, 53);
    int shift = e - 53 + 3; /* x * 1000 = mant * 125 * 2**shift */
    uint64_t n = mant * 125U; /* < 2**60 */
    uint64_t q;
    if (shift >= 0) {
        if (shift > 3 || (n << shift) >> shift != n) {
            return 0;
        }
        q = n << shift;
    }
    else if (-shift > 61) {
        q = 0; /* below 2**-1 */
    }
    else {
        int s = -shift;
        q = n >> s;
        uint64_t rest = n & ((1ULL << s) - 1), half = 1ULL << (s - 1);
        if (rest > half || (rest == half && (q & 1))) {
            q++;
        }
    }
    if (q >= (1ULL << 53)) {
        return 0;
    }
    *out = (double)q / 1000.0;
    return 1;
}

/* A new float: round(x, 3), through float.__round__ where the integers do not reach. */
static PyObject *
round3_obj(double x)
{
    double r;
    if (round3_fast(x, &r)) {
        return PyFloat_FromDouble(r);
    }
    PyObject *value = PyFloat_FromDouble(x);
    if (value == NULL) {
        return NULL;
    }
    PyObject *result = PyObject_CallMethod(value, "__round__", "i", 3);
    Py_DECREF(value);
    return result;
}

PyDoc_STRVAR(round3_doc,
"round3(x, /)\n--\n\n"
"round(x, 3) of the float x (integer arithmetic where exact, else float.__round__).");

static PyObject *
round3(PyObject *Py_UNUSED(module), PyObject *arg)
{
    double x = PyFloat_AsDouble(arg);
    if (x == -1.0 && PyErr_Occurred()) {
        return NULL;
    }
    return round3_obj(x);
}

/* -- printed starts ----------------------------------------------------------------------------- */

/* DeviceClock.printed_all's integer arithmetic, per number of decimals in repr(ns): the start's
 * ns as integer is a + (digits + b1) // 10**places (rounded half even on the rest, with b0
 * against factor for the digits below), valid while below limit (the Decimal context's 28
 * digits). See DeviceClock._c_terms for how they are derived. */
typedef struct {
    int ok;
    int64_t a;
    uint64_t b1, b0, factor, limit;
} Term;

typedef struct {
    Term terms[MAX_PLACES + 1];
    int has_bounds; /* kept_ns's shortcut: lo <= whole < hi and whole >= begin */
    /* the offset as whole ns (it has at most 3 decimals, in repr), and its decimals; -1: not */
    int64_t offset_ns;
    int offset_places;
    int64_t lo, hi, begin;
    PyObject *slow; /* (ns, text) -> (text or None, ns as int): the pure code for one value */
    PyObject *kept; /* (start_ns, text or None, duration) -> bool: DeviceClock.kept_ns */
} Printer;

static int
u64_item(PyObject *tuple, Py_ssize_t i, uint64_t *out)
{
    PyObject *item = PyTuple_GetItem(tuple, i);
    if (item == NULL) {
        return -1;
    }
    *out = PyLong_AsUnsignedLongLong(item);
    if (*out == (uint64_t)-1 && PyErr_Occurred()) {
        return -1;
    }
    return 0;
}

/* printer = (terms, bounds, slow, kept): terms a tuple of MAX_PLACES + 1 entries, each None or
 * (a, b1, b0, factor, limit); bounds None or (lo, hi, begin). */
static int
printer_init(Printer *p, PyObject *printer)
{
    memset(p, 0, sizeof *p);
    if (!PyTuple_Check(printer) || PyTuple_Size(printer) != 5) {
        PyErr_SetString(PyExc_TypeError, "printer must be a 5-tuple");
        return -1;
    }
    PyObject *terms = PyTuple_GetItem(printer, 0), *bounds = PyTuple_GetItem(printer, 1);
    p->slow = PyTuple_GetItem(printer, 2);
    p->kept = PyTuple_GetItem(printer, 3);
    PyObject *whole = PyTuple_GetItem(printer, 4);
    p->offset_ns = -1;
    if (whole != Py_None) {
        if (!PyTuple_Check(whole) || PyTuple_Size(whole) != 2) {
            PyErr_SetString(PyExc_TypeError, "printer offset must be None or (ns, places)");
            return -1;
        }
        p->offset_ns = PyLong_AsLongLong(PyTuple_GetItem(whole, 0));
        p->offset_places = (int)PyLong_AsLong(PyTuple_GetItem(whole, 1));
        if (PyErr_Occurred()) {
            return -1;
        }
        if (p->offset_ns < 0 || p->offset_ns >= ((int64_t)1 << 62) || p->offset_places < 0
            || p->offset_places > 3) {
            p->offset_ns = -1;
        }
    }
    if (!PyTuple_Check(terms) || PyTuple_Size(terms) != MAX_PLACES + 1) {
        PyErr_SetString(PyExc_TypeError, "printer terms must be a tuple of MAX_PLACES + 1");
        return -1;
    }
    for (Py_ssize_t i = 0; i <= MAX_PLACES; i++) {
        PyObject *t = PyTuple_GetItem(terms, i);
        if (t == Py_None) {
            continue;
        }
        Term *term = &p->terms[i];
        if (PyTuple_Check(t) && PyTuple_Size(t) == 5) {
            term->a = PyLong_AsLongLong(PyTuple_GetItem(t, 0));
            if (term->a == -1 && PyErr_Occurred()) {
                return -1;
            }
        }
        if (!PyTuple_Check(t) || PyTuple_Size(t) != 5 || u64_item(t, 1, &term->b1) < 0 || u64_item(t, 2, &term->b0) < 0
            || u64_item(t, 3, &term->factor) < 0 || u64_item(t, 4, &term->limit) < 0) {
            if (!PyErr_Occurred()) {
                PyErr_SetString(PyExc_TypeError, "printer term must be a 5-tuple of ints");
            }
            return -1;
        }
        /* the ranges the arithmetic below relies on */
        if (term->a < ((int64_t)1 << 62) && term->a > -((int64_t)1 << 62) && term->b1 < TEN[i] && term->factor > 0 && term->factor < (1ULL << 62)
            && term->b0 < term->factor) {
            term->ok = 1;
        }
    }
    if (bounds != Py_None) {
        if (!PyTuple_Check(bounds) || PyTuple_Size(bounds) != 3) {
            PyErr_SetString(PyExc_TypeError, "printer bounds must be None or a 3-tuple");
            return -1;
        }
        p->lo = PyLong_AsLongLong(PyTuple_GetItem(bounds, 0));
        p->hi = PyLong_AsLongLong(PyTuple_GetItem(bounds, 1));
        p->begin = PyLong_AsLongLong(PyTuple_GetItem(bounds, 2));
        if (PyErr_Occurred()) {
            return -1;
        }
        p->has_bounds = 1;
    }
    if (!PyCallable_Check(p->slow) || !PyCallable_Check(p->kept)) {
        PyErr_SetString(PyExc_TypeError, "printer needs two callables");
        return -1;
    }
    return 0;
}

/* The printed start of ns as integer ns, in integers: 1, or 0 where the pure code must (a
 * subset of where its own integer path applies, with the same result). */
static int
printed_fast(const Printer *p, double ns, uint64_t *out)
{
    char *text = PyOS_double_to_string(ns, 'r', 0, Py_DTSF_ADD_DOT_0, NULL);
    if (text == NULL) {
        PyErr_Clear();
        return 0;
    }
    uint64_t digits = 0;
    int places = -1, count = 0, ok = 1;
    const char *c = text;
    int negative = *c == '-';
    for (c += negative; *c; c++) {
        if (*c == '.') {
            places = 0;
            continue;
        }
        if (*c < '0' || *c > '9' || ++count > 18) { /* an exponent, or too many digits */
            ok = 0;
            break;
        }
        digits = digits * 10 + (uint64_t)(*c - '0');
        if (places >= 0) {
            places++;
        }
    }
    PyMem_Free(text);
    if (!ok || places < 0 || places > MAX_PLACES || !p->terms[places].ok) {
        return 0;
    }
    const Term *t = &p->terms[places];
    /* |digits + b1| < 10**18 + 10**17; floor division and modulo, as Python's divmod */
    int64_t scaled = (negative ? -(int64_t)digits : (int64_t)digits) + (int64_t)t->b1;
    int64_t unit = (int64_t)TEN[places], whole = scaled / unit, rest = scaled % unit;
    if (rest < 0) {
        rest += unit;
        whole--;
    }
    int64_t sum = t->a + whole;
    if (sum < 999) {
        return 0; /* below 1 us even rounded up (or a sum <= 0) */
    }
    uint64_t q = (uint64_t)sum;
    if (q >= t->limit) {
        return 0; /* the sum reaches the Decimal context's 28 digits */
    }
    int64_t d = 2 * rest - unit;
    int up = 0;
    if (d >= 1 || (d == 0 && t->b0 > 0) || (d == -1 && 2 * t->b0 > t->factor)) {
        up = 1;
    }
    else if ((d == 0 && t->b0 == 0) || (d == -1 && 2 * t->b0 == t->factor)) {
        up = (int)(q & 1); /* a tie: half even */
    }
    q += (uint64_t)up;
    if (q < 1000) {
        return 0;
    }
    *out = q;
    return 1;
}

/* printed_fast without repr(ns), where the offset is whole ns: the printed ns is
 * round_half_even(D + offset) for the digits D of repr(ns), which lie within half a unit in the
 * last place of ns. With ns = m / 2**k, unless ns is exactly halfway between two integers (then
 * this gives up), every such D rounds as ns does. Taken only where printed_fast's conditions are
 * sure to hold: ns from 1 to 1e15 (repr has no exponent), and a sum below 10**28 for any number of
 * decimals repr can print (17 digits in all). */
static int
printed_shortcut(const Printer *p, double ns, uint64_t *out)
{
    if (p->offset_ns < 0 || !(ns >= 1.0 && ns < 1e15)) {
        return 0;
    }
    int e;
    double m = frexp(ns, &e); /* ns = m * 2**e, 0.5 <= m < 1, 1 <= e <= 50 */
    uint64_t mant = (uint64_t)ldexp(m, 53);
    int k = 53 - e; /* ns = mant / 2**k, 3 <= k <= 52 */
    uint64_t whole = mant >> k, rest = mant & ((1ULL << k) - 1), half = 1ULL << (k - 1);
    if (rest == half) {
        return 0;
    }
    uint64_t q = (uint64_t)p->offset_ns + whole + (rest > half);
    if (q < 1000) {
        return 0;
    }
    int digits = 1; /* of whole */
    for (uint64_t w = whole; w >= 10; w /= 10) {
        digits++;
    }
    /* repr's decimals are at most 17 - its integer digits (whole's, or one less) */
    int places = 18 - digits > 1 ? 18 - digits : 1;
    int scale = places + 3;
    if (p->offset_places > scale) {
        scale = p->offset_places;
    }
    if (scale < 4) {
        scale = 4;
    }
    /* the sum is (D + offset) ns over 10**(scale - 3) units, below (q + 1) * 10**(scale - 3) */
    if (31 - scale > 19 ? 0 : q + 1 >= TEN[31 - scale]) {
        return 0;
    }
    *out = q;
    return 1;
}

static PyObject *
ns_text(uint64_t q)
{
    char buf[32];
    snprintf(buf, sizeof buf, "%llu.%03llu", (unsigned long long)(q / 1000), (unsigned long long)(q % 1000));
    return PyUnicode_FromString(buf);
}

/* The printed start of the float *start*: sets *text* (a new str, or None where it is
 * ns_text(*value) and want_text is false) and *value* (a new int), as the pure code does. -1
 * on error. */
static int
printed_one(const Printer *p, PyObject *start, int want_text, PyObject **text, PyObject **value)
{
    double ns = PyFloat_AsDouble(start);
    if (ns == -1.0 && PyErr_Occurred()) {
        return -1;
    }
    uint64_t q;
    if (printed_shortcut(p, ns, &q) || printed_fast(p, ns, &q)) {
        *value = PyLong_FromUnsignedLongLong(q);
        *text = want_text ? ns_text(q) : new_ref(Py_None);
        if (*value == NULL || *text == NULL) {
            Py_XDECREF(*value);
            Py_XDECREF(*text);
            return -1;
        }
        return 0;
    }
    PyObject *pair = PyObject_CallFunctionObjArgs(p->slow, start, want_text ? Py_True : Py_False, NULL);
    if (pair == NULL) {
        return -1;
    }
    if (!PyTuple_Check(pair) || PyTuple_Size(pair) != 2) {
        Py_DECREF(pair);
        PyErr_SetString(PyExc_TypeError, "the slow printer must return (text, ns)");
        return -1;
    }
    *text = new_ref(PyTuple_GetItem(pair, 0));
    *value = new_ref(PyTuple_GetItem(pair, 1));
    Py_DECREF(pair);
    return 0;
}

/* DeviceClock.kept_ns: 1 kept, 0 dropped, -1 error. */
static int
kept_one(const Printer *p, PyObject *start_ns, PyObject *text, PyObject *duration)
{
    if (text == Py_None && p->has_bounds) {
        long long value = PyLong_AsLongLong(start_ns);
        if (value == -1 && PyErr_Occurred()) {
            PyErr_Clear();
        }
        else if (value >= 0) {
            long long whole = value / 1000;
            if (p->lo <= whole && whole < p->hi && whole >= p->begin) {
                return 1;
            }
        }
    }
    PyObject *result = PyObject_CallFunctionObjArgs(p->kept, start_ns, text, duration, NULL);
    if (result == NULL) {
        return -1;
    }
    int kept = PyObject_IsTrue(result);
    Py_DECREF(result);
    return kept;
}

PyDoc_STRVAR(printed_all_doc,
"printed_all(values, text, printer, /)\n--\n\n"
"DeviceClock.printed_all: (the printed starts, or None where text is false and a start is its\n"
"integer's plain form; the starts as integer ns) of the floats values.");

static PyObject *
printed_all(PyObject *Py_UNUSED(module), PyObject *args)
{
    PyObject *values, *printer_obj;
    int want_text;
    if (!PyArg_ParseTuple(args, "O!pO!:printed_all", &PyList_Type, &values, &want_text, &PyTuple_Type,
                          &printer_obj)) {
        return NULL;
    }
    Printer p;
    if (printer_init(&p, printer_obj) < 0) {
        return NULL;
    }
    Py_ssize_t n = PyList_Size(values);
    PyObject *texts = PyList_New(n), *ints = PyList_New(n);
    if (texts == NULL || ints == NULL) {
        goto error;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        RELEASE_POINT(i, RELEASE_OBJECTS);
        PyObject *text, *value;
        if (printed_one(&p, PyList_GetItem(values, i), want_text, &text, &value) < 0) {
            goto error;
        }
        PyList_SetItem(texts, i, text);
        PyList_SetItem(ints, i, value);
    }
    PyObject *result = PyTuple_Pack(2, texts, ints);
    Py_DECREF(texts);
    Py_DECREF(ints);
    return result;
error:
    Py_XDECREF(texts);
    Py_XDECREF(ints);
    return NULL;
}

/* -- pairing ------------------------------------------------------------------------------------ */

typedef struct {
    uint32_t key;
    int32_t group; /* -1: empty slot */
} Slot;

static size_t
table_size(Py_ssize_t n)
{
    size_t size = 16;
    while (size < (size_t)n * 2) {
        size *= 2;
    }
    return size;
}

static uint64_t
mix64(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ULL;
    x ^= x >> 33;
    return x;
}

/* One list of ints below *limit* as C values; 0 where one is not (the caller falls back). */
static int
small_ints(PyObject *list, Py_ssize_t n, long limit, uint32_t *out)
{
    for (Py_ssize_t i = 0; i < n; i++) {
        RELEASE_POINT(i, RELEASE_READS);
        PyObject *item = PyList_GetItem(list, i);
        if (!PyLong_Check(item)) {
            return 0;
        }
        long value = PyLong_AsLong(item);
        if (value == -1 && PyErr_Occurred()) {
            PyErr_Clear();
            return 0;
        }
        if (value < 0 || value >= limit) {
            return 0;
        }
        out[i] = (uint32_t)value;
    }
    return 1;
}

/* The task-log records of one device, as C arrays. */
typedef struct {
    Py_ssize_t n;
    uint32_t *head, *stream, *task; /* header (function, SQE type), unpacked ids below 65536 */
    double *times;                  /* ns, the exporter's float arithmetic; no NaN */
    PyObject *counter_list;         /* the counters as Python ints, or NULL: */
    uint64_t *counters;             /* ... as read from the file */
} Records;

static PyObject *
counter_obj(const Records *r, Py_ssize_t i)
{
    if (r->counter_list != NULL) {
        return new_ref(PyList_GetItem(r->counter_list, i));
    }
    return PyLong_FromUnsignedLongLong(r->counters[i]);
}

#define PAIRED_MAX (INT32_MAX / 2)

/* The scratch arrays of pair_records, for n records (n < PAIRED_MAX: int32 indexes, half the
 * memory of Py_ssize_t ones). */
typedef struct {
    Keyed *order; /* the records by time, where they do not come so (else NULL: in file order) */
    int32_t *group_of, *first, *members;
    Keyed *pairs; /* key: start, index: pair # */
    int32_t *pair_end, *pair_start;
    size_t size; /* of table: a power of two, grown to stay at most half full */
    Slot *table;
} PairWork;

/* An empty table of size slots (a power of two); NULL when out of memory. */
static Slot *
slots_new(size_t size)
{
    Slot *table = scratch_malloc(sizeof(Slot) * size);
    if (table != NULL) {
        for (size_t s = 0; s < size; s++) {
            table[s].group = -1;
        }
    }
    return table;
}

/* The slot of key in table (its own, or the empty one it would take). */
static size_t
slot_of(const Slot *table, size_t size, uint32_t key)
{
    size_t s = (size_t)mix64(key) & (size - 1);
    while (table[s].group >= 0 && table[s].key != key) {
        s = (s + 1) & (size - 1);
    }
    return s;
}

/* w's table at twice its size, its keys moved over: 0, or -1 out of memory (w unchanged). */
static int
slots_grow(PairWork *w)
{
    size_t size = w->size * 2;
    Slot *table = slots_new(size);
    if (table == NULL) {
        return -1;
    }
    for (size_t s = 0; s < w->size; s++) {
        if (w->table[s].group >= 0) {
            table[slot_of(table, size, w->table[s].key)] = w->table[s];
        }
    }
    scratch_free(w->table);
    w->table = table;
    w->size = size;
    return 0;
}

/* The next record of kind start (or end) among a group's members[k..hi), or hi. */
static Py_ssize_t
next_member(const Records *r, const int32_t *members, Py_ssize_t k, Py_ssize_t hi, int start)
{
    while (k < hi && ((r->head[members[k]] & 63) == 0) != start) {
        k++;
    }
    return k;
}

/* The pairing of pair_records in C arrays only (no Python object, no Python API: it runs with
 * the GIL released): w->pairs in start order, each pair's records in w->pair_start and
 * w->pair_end. Returns the number of pairs, or -1 out of memory (the caller raises). */
static Py_ssize_t
pair_indices(const Records *r, PairWork *w)
{
    Py_ssize_t n = r->n;
    Keyed *order = NULL, *pairs = w->pairs;
    int32_t *group_of = w->group_of, *first = w->first, *members = w->members;
    int32_t *pair_end = w->pair_end, *pair_start = w->pair_start;
    int in_order = 1;
    for (Py_ssize_t i = 1; i < n && in_order; i++) {
        in_order = !(r->times[i] < r->times[i - 1]);
    }
    if (!in_order) {
        order = w->order = scratch_malloc(sizeof(Keyed) * (size_t)(n + 1));
        if (order == NULL) {
            return -1;
        }
        for (Py_ssize_t i = 0; i < n; i++) {
            order[i].key = r->times[i];
            order[i].index = i;
        }
        stable_sort(order, n);
    }
    /* groups, numbered in order of their first record in time order (dict insertion order) */
    int32_t ngroups = 0;
    for (Py_ssize_t k = 0; k < n; k++) {
        Py_ssize_t i = order != NULL ? order[k].index : k;
        uint32_t key = r->task[i] << 16 | r->stream[i];
        size_t s = slot_of(w->table, w->size, key);
        if (w->table[s].group < 0) {
            if ((size_t)(ngroups + 1) * 2 > w->size) {
                if (slots_grow(w) < 0) {
                    return -1;
                }
                s = slot_of(w->table, w->size, key);
            }
            w->table[s].key = key;
            w->table[s].group = ngroups++;
        }
        group_of[k] = w->table[s].group;
    }
    /* each group's records in time order: a counting sort of the ranks by group */
    memset(first, 0, sizeof(int32_t) * (size_t)(ngroups + 1));
    for (Py_ssize_t k = 0; k < n; k++) {
        first[group_of[k] + 1]++;
    }
    for (int32_t g = 0; g < ngroups; g++) {
        first[g + 1] += first[g];
    }
    int32_t *fill = pair_end; /* scratch: the next free place of each group */
    memcpy(fill, first, sizeof(int32_t) * (size_t)ngroups);
    for (Py_ssize_t k = 0; k < n; k++) {
        members[fill[group_of[k]]++] = order != NULL ? (int32_t)order[k].index : (int32_t)k;
    }
    /* _pairs per group, in group order: an end before its start dropped, a start followed by
     * another start before its end dropped (a cursor on the group's starts, one on its ends) */
    Py_ssize_t npairs = 0;
    const double *times = r->times;
    for (int32_t g = 0; g < ngroups; g++) {
        Py_ssize_t hi = first[g + 1];
        Py_ssize_t a = next_member(r, members, first[g], hi, 1), b = next_member(r, members, first[g], hi, 0);
        while (a < hi && b < hi) {
            double s_time = times[members[a]], e_time = times[members[b]];
            if (e_time < s_time) {
                b = next_member(r, members, b + 1, hi, 0);
                continue;
            }
            Py_ssize_t next = next_member(r, members, a + 1, hi, 1);
            if (next == hi || e_time < times[members[next]]) {
                pairs[npairs].key = s_time;
                pairs[npairs].index = npairs;
                pair_start[npairs] = members[a];
                pair_end[npairs] = members[b];
                npairs++;
                b = next_member(r, members, b + 1, hi, 0);
            }
            a = next;
        }
    }
    stable_sort(pairs, npairs);
    return npairs;
}

/* The scratch arrays of w (NULL allowed), freed with the GIL released. */
static void
pair_work_free(PairWork *w)
{
    FREE_RELEASED(w->order, w->group_of, w->first, w->members, w->pairs, w->pair_end, w->pair_start, w->table);
    memset(w, 0, sizeof *w);
}

/* r's records paired (pair_indices, the GIL released where big) in w's scratch, made here: the
 * number of pairs, or -1 with an exception. w is to be freed (pair_work_free) either way. The
 * records are sorted by time only where they do not come so (a task log is written in time
 * order: every real run here), and the table of groups starts small (a task id wraps at 65536). */
static Py_ssize_t
paired(const Records *r, PairWork *w)
{
    Py_ssize_t n = r->n;
    memset(w, 0, sizeof *w);
    if (n >= PAIRED_MAX) {
        PyErr_SetString(PyExc_OverflowError, "too many task-log records for one device");
        return -1;
    }
    w->group_of = scratch_malloc(sizeof(int32_t) * (size_t)(n + 1));
    w->first = scratch_malloc(sizeof(int32_t) * (size_t)(n + 2));
    w->members = scratch_malloc(sizeof(int32_t) * (size_t)(n + 1));
    w->pairs = scratch_malloc(sizeof(Keyed) * (size_t)(n + 1));
    w->pair_end = scratch_malloc(sizeof(int32_t) * (size_t)(n + 1));
    w->pair_start = scratch_malloc(sizeof(int32_t) * (size_t)(n + 1));
    w->size = table_size(n < 4096 ? n : 4096);
    w->table = slots_new(w->size);
    if (!w->group_of || !w->first || !w->members || !w->pairs || !w->pair_end
        || !w->pair_start || !w->table) {
        PyErr_NoMemory();
        return -1;
    }
    Py_ssize_t npairs;
    RELEASED_IF(n > RELEASE_SECTION, npairs = pair_indices(r, w));
    if (npairs < 0) {
        PyErr_NoMemory();
    }
    return npairs;
}

/* _paired_tasks on checked records: a new list of cls records, NULL on error. */
static PyObject *
pair_records(const Records *r, PyObject *names, PyObject *context, PyObject *cls, allocfunc alloc)
{
    PyObject *result = NULL;
    PairWork w;
    Py_ssize_t npairs = paired(r, &w);
    if (npairs < 0) {
        goto done;
    }
    result = PyList_New(npairs);
    if (result == NULL) {
        goto done;
    }
    const double *times = r->times;
    for (Py_ssize_t k = 0; k < npairs; k++) {
        RELEASE_POINT(k, RELEASE_OBJECTS);
        Py_ssize_t pair = w.pairs[k].index, s = w.pair_start[pair], e = w.pair_end[pair];
        double s_time = times[s];
        PyObject *items[8] = {
            PyLong_FromUnsignedLong(r->stream[s]),
            PyLong_FromUnsignedLong(r->task[s]),
            new_ref(context),
            new_ref(PyTuple_GetItem(names, (Py_ssize_t)(r->head[s] >> 10))),
            PyFloat_FromDouble(s_time),
            PyFloat_FromDouble(times[e] - s_time),
            counter_obj(r, s),
            counter_obj(r, e),
        };
        PyObject *record = make_record(cls, alloc, items, 8);
        if (record == NULL) {
            Py_CLEAR(result);
            goto done;
        }
        PyList_SetItem(result, k, record);
    }
done:
    pair_work_free(&w);
    return result;
}

/* Allocates the arrays of r for n records (counters too where with_counters). */
static int
records_alloc(Records *r, Py_ssize_t n, int with_counters)
{
    memset(r, 0, sizeof *r);
    r->n = n;
    r->head = scratch_malloc(sizeof(uint32_t) * (size_t)(n + 1));
    r->stream = scratch_malloc(sizeof(uint32_t) * (size_t)(n + 1));
    r->task = scratch_malloc(sizeof(uint32_t) * (size_t)(n + 1));
    r->times = scratch_malloc(sizeof(double) * (size_t)(n + 1));
    if (with_counters) {
        r->counters = scratch_malloc(sizeof(uint64_t) * (size_t)(n + 1));
    }
    if (!r->head || !r->stream || !r->task || !r->times || (with_counters && !r->counters)) {
        PyErr_NoMemory();
        return -1;
    }
    return 0;
}

static void
records_free(Records *r)
{
    FREE_RELEASED(r->head, r->stream, r->task, r->times, r->counters);
}

/* Whether a header is one the pairing takes: a task start or end with a known SQE type. */
static int
known_header(uint32_t head, Py_ssize_t nnames)
{
    return (head & 63) <= 1 && (Py_ssize_t)(head >> 10) < nnames;
}

PyDoc_STRVAR(paired_tasks_doc,
"paired_tasks(headers, streams, tasks, counters, base, hertz, offset, sqe_names, context, cls, /)\n"
"--\n\n"
"_run._paired_tasks after its checks: the start and end records (lists of ints, stream and task\n"
"ids below 65536, unpacked) paired per (task, stream) in time order, as cls records\n"
"(stream, task, context, SQE name, start ns, duration ns, start counter, end counter) in start\n"
"order; None where the pure code must decide.");

static PyObject *
paired_tasks(PyObject *Py_UNUSED(module), PyObject *args)
{
    PyObject *headers, *streams, *tasks, *counters, *names, *context, *cls;
    double base, hertz, offset;
    if (!PyArg_ParseTuple(args, "O!O!O!O!dddO!OO:paired_tasks", &PyList_Type, &headers, &PyList_Type,
                          &streams, &PyList_Type, &tasks, &PyList_Type, &counters, &base, &hertz, &offset,
                          &PyTuple_Type, &names, &context, &cls)) {
        return NULL;
    }
    allocfunc alloc = record_alloc(cls, "paired_tasks: cls");
    if (alloc == NULL) {
        return NULL;
    }
    Py_ssize_t n = PyList_Size(headers);
    if (PyList_Size(streams) != n || PyList_Size(tasks) != n || PyList_Size(counters) != n) {
        PyErr_SetString(PyExc_ValueError, "paired_tasks: columns differ in length");
        return NULL;
    }
    Py_ssize_t nnames = PyTuple_Size(names);
    PyObject *result = NULL;
    Records r;
    if (records_alloc(&r, n, 0) < 0) {
        goto done;
    }
    r.counter_list = counters;
    if (!small_ints(headers, n, 65536, r.head) || !small_ints(streams, n, 65536, r.stream)
        || !small_ints(tasks, n, 65536, r.task)) {
        result = new_ref(Py_None);
        goto done;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        RELEASE_POINT(i, RELEASE_READS);
        PyObject *counter = PyList_GetItem(counters, i);
        if (!known_header(r.head[i], nnames) || !PyLong_Check(counter)) {
            result = new_ref(Py_None); /* declined by the pure code */
            goto done;
        }
        double c = PyLong_AsDouble(counter); /* int - float: the int rounded to a float first */
        if (c == -1.0 && PyErr_Occurred()) {
            goto done;
        }
        double t = (c - base) / hertz * 1e9 + offset;
        if (isnan(t)) {
            result = new_ref(Py_None); /* the pure sort is not a total order then */
            goto done;
        }
        r.times[i] = t;
    }
    result = pair_records(&r, names, context, cls, alloc);
done:
    records_free(&r);
    return result;
}

static uint32_t
le16(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8;
}

static uint64_t
le64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int j = 7; j >= 0; j--) {
        v = v << 8 | p[j];
    }
    return v;
}

#define STARS_SIZE 64
#define OTHER_BITS 0x3C0 /* header bits 6-9: neither the function nor the SQE type */

/* Records at..at+n of r from n whole stars_soc records at data: 1, 0 or -1 as stars_records. */
static int
stars_parse(const unsigned char *data, Py_ssize_t n, Py_ssize_t at, unsigned int magic, double base, double hertz,
            double offset, Py_ssize_t nnames, Records *r)
{
    for (Py_ssize_t i = 0; i < n; i++) {
        RELEASE_POINT(i, RELEASE_PLAIN);
        const unsigned char *rec = data + i * STARS_SIZE;
        uint32_t head = le16(rec) & ~(uint32_t)OTHER_BITS;
        uint32_t stream = le16(rec + 4);
        uint64_t counter = le64(rec + 8);
        if (le16(rec + 2) != magic || !known_header(head, nnames) || stream >= 2048) {
            return 0;
        }
        double c;
        if (counter < (1ULL << 53)) {
            c = (double)counter; /* exact */
        }
        else { /* Python's correctly rounded int to float */
            PyObject *big = PyLong_FromUnsignedLongLong(counter);
            if (big == NULL) {
                return -1;
            }
            c = PyLong_AsDouble(big);
            Py_DECREF(big);
            if (c == -1.0 && PyErr_Occurred()) {
                return -1;
            }
        }
        double t = (c - base) / hertz * 1e9 + offset;
        if (isnan(t)) {
            return 0;
        }
        r->head[at + i] = head;
        r->stream[at + i] = stream;
        r->task[at + i] = le16(rec + 6);
        r->counters[at + i] = counter;
        r->times[at + i] = t;
    }
    return 1;
}

/* Room in r's arrays (with counters) for n records: 0, or -1 with MemoryError. */
static int
records_room(Records *r, Py_ssize_t n, Py_ssize_t *cap)
{
    if (n <= *cap) {
        return 0;
    }
    Py_ssize_t want = *cap * 2 > n ? *cap * 2 : n;
    void **arrays[] = {(void **)&r->head, (void **)&r->stream, (void **)&r->task, (void **)&r->times,
                       (void **)&r->counters};
    const size_t sizes[] = {sizeof(uint32_t), sizeof(uint32_t), sizeof(uint32_t), sizeof(double), sizeof(uint64_t)};
    for (int j = 0; j < 5; j++) {
        void *grown;
        RELEASED_IF(1, grown = scratch_realloc(*arrays[j], sizes[j] * (size_t)(want + 1)));
        if (grown == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        *arrays[j] = grown;
    }
    *cap = want;
    return 0;
}

/* The task-log records of a stars_soc file's contents in r, with their counters: 1; 0 unless
 * every record has the magic, is a task start or end with one of nnames SQE types and a stream
 * id below 2048, and a time that is a number (the pure decoder and pairing decide then); -1 on
 * error. r is to be freed (records_free) either way. The contents: bytes or a memory map (a
 * torn head of len % 64 bytes skipped, little-endian words), or an iterator of such pieces,
 * each of whole records (else 0), read one after the other. */
static int
stars_records(PyObject *bytes, unsigned int magic, double base, double hertz, double offset, Py_ssize_t nnames,
              Records *r)
{
    memset(r, 0, sizeof *r);
    const unsigned char *buf;
    Py_ssize_t len;
    if (PyIter_Check(bytes)) {
        Py_ssize_t cap = 0;
        PyObject *piece;
        while ((piece = PyIter_Next(bytes)) != NULL) {
            int got; /* 1 parsed, 0 declined, -1 error */
            if (raw_data(piece, &buf, &len) < 0) {
                got = -1;
            }
            else if (len % STARS_SIZE != 0) {
                got = 0;
            }
            else if (records_room(r, r->n + len / STARS_SIZE, &cap) < 0) {
                got = -1;
            }
            else {
                got = stars_parse(buf, len / STARS_SIZE, r->n, magic, base, hertz, offset, nnames, r);
                r->n += len / STARS_SIZE;
            }
            Py_DECREF(piece);
            if (got <= 0) {
                return got;
            }
        }
        return PyErr_Occurred() ? -1 : 1;
    }
    if (raw_data(bytes, &buf, &len) < 0) {
        return -1;
    }
    Py_ssize_t n = len / STARS_SIZE;
    if (records_alloc(r, n, 1) < 0) {
        return -1;
    }
    return stars_parse(buf + len % STARS_SIZE, n, 0, magic, base, hertz, offset, nnames, r);
}

PyDoc_STRVAR(paired_stars_doc,
"paired_stars(data, magic, base, hertz, offset, sqe_names, context, cls, /)\n--\n\n"
"paired_tasks straight from the stars_soc bytes (or memory map; a torn head of len(data) % 64 bytes skipped,\n"
"little-endian words): None unless every record has the magic, is a task start or end with a\n"
"known SQE type and a stream id below 2048 (the pure decoder and pairing decide the rest).");

static PyObject *
paired_stars(PyObject *Py_UNUSED(module), PyObject *args)
{
    PyObject *bytes;
    unsigned int magic;
    PyObject *names, *context, *cls;
    double base, hertz, offset;
    if (!PyArg_ParseTuple(args, "OIdddO!OO:paired_stars", &bytes, &magic, &base, &hertz, &offset, &PyTuple_Type,
                          &names, &context, &cls)) {
        return NULL;
    }
    PyObject *result = NULL;
    Records r;
    memset(&r, 0, sizeof r);
    allocfunc alloc = record_alloc(cls, "paired_stars: cls");
    if (alloc == NULL) {
        goto done;
    }
    int read = stars_records(bytes, magic, base, hertz, offset, PyTuple_Size(names), &r);
    if (read <= 0) {
        result = read == 0 ? new_ref(Py_None) : NULL;
        goto done;
    }
    result = pair_records(&r, names, context, cls, alloc);
done:
    records_free(&r);
    return result;
}

/* -- top-down join ------------------------------------------------------------------------------ */

/* An open-addressing table of 4-int keys: small slots (the high hash bits and an index into the
 * key array), so the table stays in cache. */
typedef struct {
    uint32_t tag;
    int32_t index; /* -1: empty slot */
} Slot4;

typedef struct {
    Slot4 *slots;
    size_t size;
    int64_t (*keys)[4]; /* by index */
} Table4;

static uint64_t
hash4(const int64_t *k)
{
    uint64_t h = 0;
    for (int j = 0; j < 4; j++) {
        h = mix64(h ^ (uint64_t)k[j]);
    }
    return h;
}

/* The slot of key k (of hash h): its own, or the empty one where it would go. */
static Slot4 *
find4(const Table4 *t, const int64_t *k, uint64_t h)
{
    size_t s = (size_t)h & (t->size - 1);
    uint32_t tag = (uint32_t)(h >> 32);
    while (t->slots[s].index >= 0
           && (t->slots[s].tag != tag || memcmp(t->keys[t->slots[s].index], k, sizeof(int64_t) * 4) != 0)) {
        s = (s + 1) & (t->size - 1);
    }
    return &t->slots[s];
}

static int
table4_init(Table4 *t, Py_ssize_t n)
{
    t->size = table_size(n);
    t->slots = scratch_malloc(sizeof(Slot4) * t->size);
    t->keys = scratch_malloc(sizeof(int64_t[4]) * (size_t)(n + 1));
    if (t->slots == NULL || t->keys == NULL) {
        return -1;
    }
    for (size_t s = 0; s < t->size; s++) {
        RELEASE_POINT(s, RELEASE_PLAIN);
        t->slots[s].index = -1;
    }
    return 0;
}

/* Adds key k (of hash h) as index i at slot (from find4). */
static void
table4_put(Table4 *t, Slot4 *slot, const int64_t *k, uint64_t h, Py_ssize_t i)
{
    memcpy(t->keys[i], k, sizeof(int64_t) * 4);
    slot->tag = (uint32_t)(h >> 32);
    slot->index = (int32_t)i;
}

/* Items first..first+3 of a tuple as int64; 0 where one is not an int of that range. */
static int
key4(PyObject *record, const Py_ssize_t *at, int64_t *k)
{
    for (int j = 0; j < 4; j++) {
        PyObject *item = PyTuple_GetItem(record, at[j]);
        if (item == NULL || !PyLong_Check(item)) {
            PyErr_Clear();
            return 0;
        }
        int overflow;
        k[j] = PyLong_AsLongLongAndOverflow(item, &overflow);
        if (overflow || (k[j] == -1 && PyErr_Occurred())) {
            PyErr_Clear();
            return 0;
        }
    }
    return 1;
}

PyDoc_STRVAR(top_down_doc,
"top_down(host, device, unknown, cls, /)\n--\n\n"
"_run._top_down: device tasks matched with host tasks on (stream, task, context, batch), in\n"
"start order, as cls records; None where the pure code must decide (a duplicate id, an id out\n"
"of range).");

static PyObject *
top_down(PyObject *Py_UNUSED(module), PyObject *args)
{
    PyObject *host, *device, *unknown, *cls;
    if (!PyArg_ParseTuple(args, "O!O!OO:top_down", &PyList_Type, &host, &PyList_Type, &device, &unknown,
                          &cls)) {
        return NULL;
    }
    allocfunc alloc = record_alloc(cls, "top_down: cls");
    if (alloc == NULL) {
        return NULL;
    }
    Py_ssize_t nh = PyList_Size(host), nd = PyList_Size(device), n = nh + nd;
    if (nh >= INT32_MAX || nd >= INT32_MAX) {
        Py_RETURN_NONE;
    }
    PyObject *result = NULL, *minus_one = NULL, *zero = NULL;
    Table4 hosts = {NULL, 0, NULL}, devices = {NULL, 0, NULL};
    char *matched = scratch_calloc((size_t)nh + 1, 1);
    Py_ssize_t *host_of = scratch_malloc(sizeof(Py_ssize_t) * (size_t)(nd + 1));
    Keyed *order = scratch_malloc(sizeof(Keyed) * (size_t)(n + 1));
    if (table4_init(&hosts, nh) < 0 || table4_init(&devices, nd) < 0 || !matched || !host_of || !order) {
        PyErr_NoMemory();
        goto done;
    }
    static const Py_ssize_t HOST_KEY[4] = {1, 2, 3, 4}, DEVICE_KEY[4] = {0, 1, 2, 0};
    for (Py_ssize_t i = 0; i < nh; i++) {
        RELEASE_POINT(i, RELEASE_READS);
        PyObject *h = PyList_GetItem(host, i);
        int64_t k[4];
        if (!PyTuple_Check(h) || PyTuple_Size(h) < 6 || !key4(h, HOST_KEY, k)) {
            result = new_ref(Py_None);
            goto done;
        }
        uint64_t hash = hash4(k);
        Slot4 *slot = find4(&hosts, k, hash);
        if (slot->index >= 0) {
            result = new_ref(Py_None); /* two host tasks of one id: declined by the pure code */
            goto done;
        }
        table4_put(&hosts, slot, k, hash, i);
    }
    for (Py_ssize_t i = 0; i < nd; i++) {
        RELEASE_POINT(i, RELEASE_READS);
        PyObject *t = PyList_GetItem(device, i);
        int64_t k[4];
        if (!PyTuple_Check(t) || PyTuple_Size(t) != 8 || !key4(t, DEVICE_KEY, k)) {
            result = new_ref(Py_None);
            goto done;
        }
        k[3] = 0; /* batch 0 */
        uint64_t hash = hash4(k);
        Slot4 *slot = find4(&devices, k, hash);
        if (slot->index >= 0) {
            result = new_ref(Py_None);
            goto done;
        }
        table4_put(&devices, slot, k, hash, i);
        Slot4 *found = find4(&hosts, k, hash);
        host_of[i] = found->index;
        if (found->index >= 0) {
            matched[found->index] = 1;
        }
        double start = PyFloat_AsDouble(PyTuple_GetItem(t, 4));
        if ((start == -1.0 && PyErr_Occurred()) || isnan(start)) {
            PyErr_Clear();
            result = new_ref(Py_None);
            goto done;
        }
        order[i].key = start;
        order[i].index = i;
    }
    Py_ssize_t m = nd;
    for (Py_ssize_t i = 0; i < nh; i++) {
        RELEASE_POINT(i, RELEASE_PLAIN);
        if (!matched[i]) {
            order[m].key = -1.0; /* start -1: the device never ran it */
            order[m].index = nd + i;
            m++;
        }
    }
    RELEASED_IF(m > RELEASE_SECTION, stable_sort(order, m));
    minus_one = PyLong_FromLong(-1);
    zero = PyLong_FromLong(0);
    result = PyList_New(m);
    if (minus_one == NULL || zero == NULL || result == NULL) {
        Py_CLEAR(result);
        goto done;
    }
    for (Py_ssize_t r = 0; r < m; r++) {
        RELEASE_POINT(r, RELEASE_OBJECTS);
        Py_ssize_t index = order[r].index;
        PyObject *items[10];
        if (index < nd) {
            PyObject *t = PyList_GetItem(device, index);
            PyObject *host_type = host_of[index] >= 0
                ? PyTuple_GetItem(PyList_GetItem(host, host_of[index]), 5)
                : unknown;
            items[0] = new_ref(PyTuple_GetItem(t, 0));
            items[1] = new_ref(PyTuple_GetItem(t, 1));
            items[2] = new_ref(PyTuple_GetItem(t, 2));
            items[3] = new_ref(zero);
            items[4] = new_ref(PyTuple_GetItem(t, 4));
            items[5] = new_ref(PyTuple_GetItem(t, 5));
            items[6] = new_ref(host_type);
            items[7] = new_ref(PyTuple_GetItem(t, 3));
            items[8] = new_ref(PyTuple_GetItem(t, 6));
            items[9] = new_ref(PyTuple_GetItem(t, 7));
        }
        else {
            PyObject *h = PyList_GetItem(host, index - nd);
            for (int j = 0; j < 4; j++) {
                items[j] = new_ref(PyTuple_GetItem(h, j + 1));
            }
            items[4] = new_ref(minus_one);
            items[5] = new_ref(minus_one);
            items[6] = new_ref(PyTuple_GetItem(h, 5));
            items[7] = new_ref(unknown);
            items[8] = new_ref(zero);
            items[9] = new_ref(zero);
        }
        PyObject *record = make_record(cls, alloc, items, 10);
        if (record == NULL) {
            Py_CLEAR(result);
            goto done;
        }
        PyList_SetItem(result, r, record);
    }
done:
    Py_XDECREF(minus_one);
    Py_XDECREF(zero);
    FREE_RELEASED(hosts.slots, hosts.keys, devices.slots, devices.keys, matched, host_of, order);
    return result;
}

/* -- op_summary --------------------------------------------------------------------------------- */

static PyObject *seq_item(PyObject *seq, Py_ssize_t i);

/* Items of a list or tuple. */
static Py_ssize_t
seq_size(PyObject *seq)
{
    return PyList_Check(seq) ? PyList_Size(seq) : PyTuple_Size(seq);
}

/* A device's GE tasks by (stream, task, batch, context), each key's in their order, as
 * _run._ge_index gives them: a Table4 of the keys (a key's slot holds its first task) and
 * chains of the later ones (next, last). */
typedef struct {
    Table4 keys;
    Py_ssize_t *next, *last; /* by task index; -1: the end */
} GeIndex;

/* 1: indexed; 0: a task not of the expected shape (the pure code decides); -1: error. */
static int
ge_index_build(GeIndex *x, PyObject *ge, PyObject *device)
{
    Py_ssize_t n = seq_size(ge);
    x->next = scratch_malloc(sizeof(Py_ssize_t) * (size_t)(n + 1));
    x->last = scratch_malloc(sizeof(Py_ssize_t) * (size_t)(n + 1));
    if (table4_init(&x->keys, n) < 0 || x->next == NULL || x->last == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    static const Py_ssize_t GE_KEY[4] = {1, 2, 4, 3}; /* (stream, task, batch, context) */
    for (Py_ssize_t i = 0; i < n; i++) {
        RELEASE_POINT(i, RELEASE_READS);
        PyObject *g = seq_item(ge, i);
        if (!PyTuple_Check(g) || PyTuple_Size(g) < 9) {
            return 0;
        }
        int mine = PyObject_RichCompareBool(PyTuple_GetItem(g, 0), device, Py_EQ);
        if (mine < 0) {
            return -1;
        }
        if (!mine) {
            continue;
        }
        int64_t k[4];
        if (!key4(g, GE_KEY, k)) {
            return 0;
        }
        uint64_t hash = hash4(k);
        Slot4 *slot = find4(&x->keys, k, hash);
        x->next[i] = -1;
        if (slot->index < 0) {
            table4_put(&x->keys, slot, k, hash, i);
            x->last[i] = i;
        }
        else {
            Py_ssize_t first = slot->index;
            x->next[x->last[first]] = i;
            x->last[first] = i;
        }
    }
    return 1;
}

PyDoc_STRVAR(op_summary_doc,
"op_summary(ascend, ge_tasks, hashes, device, level0, printer, raw_cls, row_cls, mode=0, /)\n"
"--\n\n"
"_Device._op_summary: (the join of the top-down tasks with their GE tasks as (a, g) pairs,\n"
"the op_summary rows as row_cls(raw_cls(...), a)); None where the pure code must decide\n"
"(two rows starting at the same time, a record not of the expected shape). ge_tasks: a list\n"
"or tuple of GE tasks, indexed here as _run._ge_index indexes device's. mode 1: (None, the\n"
"rows as bare raw_cls records): neither the pairs nor a wrapper per row is made; mode 2: (None,\n"
"(capsule, count, strings)), the rows packed (see packed_rows), or None also where a value has\n"
"no packed form.");

/* -- packed rows -------------------------------------------------------------------------------
 * A device's op_summary rows as plain C values (64 bytes a row, where a RawTask record and its
 * fields take some 400): op_summary(..., mode=2) makes them, packed_rows() makes records of a
 * slice of them. Strings (names, types) are indexes into a list the rows come with. A row is
 * made as a Row, then packed where its ids and block dims fit the narrower fields (stream and
 * batch ids below 65536, task ids and block dims below 2**32: a device's are); else the rows
 * have no packed form. */

typedef struct {
    int64_t stream, task, batch, start_ns, block, mix;
    uint64_t start_cycles, end_cycles;
    double duration, a_duration;
    uint32_t name, type;
} Row;

typedef struct {
    int64_t start_ns;
    uint64_t start_cycles, end_cycles;
    double duration, a_duration;
    uint32_t task, block, mix, name, type;
    uint16_t stream, batch;
} Packed;

typedef struct {
    Packed *rows;
    Py_ssize_t n, cap;
} PackedVec;

#define PACKED_CAPSULE "asc_aprof._cdevice.packed"

static void
packed_capsule_free(PyObject *capsule)
{
    PackedVec *v = PyCapsule_GetPointer(capsule, PACKED_CAPSULE);
    if (v != NULL) {
        FREE_RELEASED(v->rows, v); /* (a big block: unmapped with the GIL released) */
    }
}

/* The row's place at the end of v; NULL with an exception. */
static Packed *
packed_push(PackedVec *v)
{
    if (v->n == v->cap) {
        size_t cap = v->cap ? (size_t)v->cap * 2 : 1024;
        Packed *grown;
        RELEASED_IF(v->cap > RELEASE_SECTION, grown = scratch_realloc(v->rows, cap * sizeof(Packed)));
        if (grown == NULL) {
            PyErr_NoMemory();
            return NULL;
        }
        v->rows = grown;
        v->cap = (Py_ssize_t)cap;
    }
    return v->rows + v->n++;
}

/* An exact int as int64: 1, 0 where it is not one or does not fit (no exception left). */
static int
exact_i64(PyObject *obj, int64_t *out)
{
    if (!PyLong_CheckExact(obj)) {
        return 0;
    }
    int overflow;
    long long v = PyLong_AsLongLongAndOverflow(obj, &overflow);
    if (overflow || (v == -1 && PyErr_Occurred())) {
        PyErr_Clear();
        return 0;
    }
    *out = (int64_t)v;
    return 1;
}

static int
exact_u64(PyObject *obj, uint64_t *out)
{
    if (!PyLong_CheckExact(obj)) {
        return 0;
    }
    unsigned long long v = PyLong_AsUnsignedLongLong(obj);
    if (v == (unsigned long long)-1 && PyErr_Occurred()) {
        PyErr_Clear();
        return 0;
    }
    *out = (uint64_t)v;
    return 1;
}

static int
exact_f64(PyObject *obj, double *out)
{
    if (!PyFloat_CheckExact(obj)) {
        return 0;
    }
    *out = PyFloat_AsDouble(obj);
    return 1;
}

/* The index of string s in strings (added where new, index: str -> int): 1, 0 where it is not an
 * exact str, -1 on error. */
static int
string_index(PyObject *s, PyObject *strings, PyObject *index, uint32_t *out)
{
    if (!PyUnicode_CheckExact(s)) {
        return 0;
    }
    PyObject *found = PyDict_GetItemWithError(index, s);
    if (found != NULL) {
        *out = (uint32_t)PyLong_AsLong(found);
        return 1;
    }
    if (PyErr_Occurred()) {
        return -1;
    }
    Py_ssize_t at = PyList_Size(strings);
    if (at >= (Py_ssize_t)UINT32_MAX) {
        return 0;
    }
    PyObject *number = PyLong_FromSsize_t(at);
    if (number == NULL || PyDict_SetItem(index, s, number) < 0 || PyList_Append(strings, s) < 0) {
        Py_XDECREF(number);
        return -1;
    }
    Py_DECREF(number);
    *out = (uint32_t)at;
    return 1;
}

/* Where op_summary(mode=2) keeps its rows. */
typedef struct {
    PackedVec *vec;
    PyObject *strings, *index;
} PackedOut;

/* One row packed: 1, 0 where a value has no exact packed form (the caller falls back), -1 on
 * error. name and type borrowed; duration and start_ns new references (released here). */
static int pack_rest(PackedOut *out, Row *row, int ok, PyObject *g, PyObject *name, PyObject *type,
                     PyObject *duration, PyObject *start_ns, int level0);

static int
pack_row(PackedOut *out, PyObject *a, PyObject *g, PyObject *name, PyObject *type, PyObject *duration,
         PyObject *start_ns, int level0)
{
    Row row;
    int ok = exact_i64(PyTuple_GetItem(a, 0), &row.stream) && exact_i64(PyTuple_GetItem(a, 1), &row.task)
        && exact_i64(PyTuple_GetItem(a, 3), &row.batch) && exact_u64(PyTuple_GetItem(a, 8), &row.start_cycles)
        && exact_u64(PyTuple_GetItem(a, 9), &row.end_cycles) && exact_f64(PyTuple_GetItem(a, 5), &row.a_duration);
    return pack_rest(out, &row, ok, g, name, type, duration, start_ns, level0);
}

/* pack_row's rest, the row's device task fields set in *row (ok: all of them had a packed form). */
static int
pack_rest(PackedOut *out, Row *rowp, int ok, PyObject *g, PyObject *name, PyObject *type, PyObject *duration,
          PyObject *start_ns, int level0)
{
    Row row = *rowp;
    ok = ok && exact_i64(start_ns, &row.start_ns) && exact_f64(duration, &row.duration);
    if (ok && !level0) {
        ok = exact_i64(PyTuple_GetItem(g, 7), &row.block) && exact_i64(PyTuple_GetItem(g, 8), &row.mix);
    }
    else {
        row.block = row.mix = 0;
    }
    Py_DECREF(duration);
    Py_DECREF(start_ns);
    if (!ok || row.stream < 0 || row.stream > UINT16_MAX || row.batch < 0 || row.batch > UINT16_MAX || row.task < 0
        || row.task > UINT32_MAX || row.block < 0 || row.block > UINT32_MAX || row.mix < 0 || row.mix > UINT32_MAX) {
        return 0;
    }
    int got = string_index(name, out->strings, out->index, &row.name);
    if (got > 0) {
        got = string_index(type, out->strings, out->index, &row.type);
    }
    if (got <= 0) {
        return got;
    }
    Packed *at = packed_push(out->vec);
    if (at == NULL) {
        return -1;
    }
    *at = (Packed){row.start_ns, row.start_cycles, row.end_cycles, row.duration, row.a_duration,
                   (uint32_t)row.task, (uint32_t)row.block, (uint32_t)row.mix, row.name, row.type,
                   (uint16_t)row.stream, (uint16_t)row.batch};
    return 1;
}

PyDoc_STRVAR(packed_rows_doc,
"packed_rows(rows, strings, device, level0, start, stop, cls, kind, /)\n--\n\n"
"Records of the packed op_summary rows[start:stop] (rows: the capsule op_summary(..., 2) gave;\n"
"0 <= start <= stop <= their number): raw_cls records (cls(device, stream, task, batch, name,\n"
"type, type, duration, ns duration, start ns, start cycles, end cycles, block dims)) as the\n"
"unpacked op_summary makes them (kind 0); the ProfilingTask records RawResult.profiling_tasks\n"
"makes of those (kind 1: cls(task, name, type, duration, device)); or their start cycles\n"
"(kind 2: ints, cls unused).");

static PyObject *
packed_rows(PyObject *Py_UNUSED(module), PyObject *args)
{
    PyObject *capsule, *strings, *device, *cls;
    int level0, kind;
    Py_ssize_t start, stop;
    if (!PyArg_ParseTuple(args, "OO!OpnnOi:packed_rows", &capsule, &PyList_Type, &strings, &device, &level0,
                          &start, &stop, &cls, &kind)) {
        return NULL;
    }
    if (kind < 0 || kind > 2) {
        PyErr_SetString(PyExc_ValueError, "packed_rows: kind is 0, 1 or 2");
        return NULL;
    }
    int public = kind == 1;
    PackedVec *v = PyCapsule_GetPointer(capsule, PACKED_CAPSULE);
    if (v == NULL) {
        return NULL;
    }
    if (start < 0 || stop < start || stop > v->n) {
        PyErr_SetString(PyExc_ValueError, "packed_rows: needs 0 <= start <= stop <= the rows' number");
        return NULL;
    }
    RecordKind record;
    allocfunc alloc = NULL;
    if (public ? record_kind_init(&record, cls, 5, "packed_rows: cls") < 0
               : kind == 0 && (alloc = record_alloc(cls, "packed_rows: cls")) == NULL) {
        return NULL;
    }
    Py_ssize_t nstrings = PyList_Size(strings);
    PyObject *out = PyList_New(stop - start);
    if (out == NULL) {
        goto error;
    }
    for (Py_ssize_t i = start; i < stop; i++) {
        RELEASE_POINT(i - start, RELEASE_OBJECTS);
        const Packed *row = v->rows + i;
        if (kind == 2) {
            PyObject *cycles = PyLong_FromUnsignedLongLong(row->start_cycles);
            if (cycles == NULL) {
                goto error;
            }
            PyList_SetItem(out, i - start, cycles);
            continue;
        }
        if (row->name >= nstrings || row->type >= nstrings) {
            PyErr_SetString(PyExc_ValueError, "packed_rows: strings is not the rows' list");
            goto error;
        }
        PyObject *name = PyList_GetItem(strings, row->name), *type = PyList_GetItem(strings, row->type);
        PyObject *made;
        if (public) {
            PyObject *items[5] = {
                PyLong_FromLongLong(row->task), new_ref(name), new_ref(type), PyFloat_FromDouble(row->duration),
                new_ref(device),
            };
            for (int j = 0; j < 5; j++) {
                if (items[j] == NULL) {
                    for (int k = 0; k < 5; k++) {
                        Py_XDECREF(items[k]);
                    }
                    goto error;
                }
            }
            int untrack = atomic_items(items, 5);
            made = record_kind_new(&record, items);
            if (made != NULL && untrack) {
                PyObject_GC_UnTrack(made);
            }
        }
        else {
            PyObject *items[14] = {
                new_ref(device),
                PyLong_FromLongLong(row->stream),
                PyLong_FromLongLong(row->task),
                PyLong_FromLongLong(row->batch),
                new_ref(name),
                new_ref(type),
                new_ref(type),
                PyFloat_FromDouble(row->duration),
                PyFloat_FromDouble(row->a_duration),
                PyLong_FromLongLong(row->start_ns),
                PyLong_FromUnsignedLongLong(row->start_cycles),
                PyLong_FromUnsignedLongLong(row->end_cycles),
                level0 ? new_ref(Py_None) : PyLong_FromLongLong(row->block),
                level0 ? new_ref(Py_None) : PyLong_FromLongLong(row->mix),
            };
            made = make_record(cls, alloc, items, 14);
        }
        if (made == NULL) {
            goto error;
        }
        PyList_SetItem(out, i - start, made);
    }
    if (public) {
        record_kind_clear(&record);
    }
    return out;
error:
    Py_XDECREF(out);
    if (public) {
        record_kind_clear(&record);
    }
    return NULL;
}

/* One op_summary row of the pair (a, g) appended to rows (a row_cls(raw, a), or the raw record
 * alone with rows_only) or, given packed, packed there, unless the start filter drops it: 0; 1
 * where a packed row's value has no packed form; -1 on error. */
static int
op_row(PyObject *a, PyObject *g, PyObject *device, PyObject *hashes, int level0, const Printer *p,
       PyObject *raw_cls, allocfunc raw_alloc, PyObject *row_cls, allocfunc row_alloc, int rows_only,
       ObjVec *rows, PackedOut *packed)
{
    PyObject *a_duration = PyTuple_GetItem(a, 5);
    double dur_ns = PyFloat_AsDouble(a_duration);
    if (dur_ns == -1.0 && PyErr_Occurred()) {
        return -1;
    }
    PyObject *duration = round3_obj(dur_ns / 1000.0);
    if (duration == NULL) {
        return -1;
    }
    PyObject *text, *start_ns;
    if (printed_one(p, PyTuple_GetItem(a, 4), 0, &text, &start_ns) < 0) {
        Py_DECREF(duration);
        return -1;
    }
    int kept = kept_one(p, start_ns, text, duration);
    Py_DECREF(text);
    if (kept <= 0) {
        Py_DECREF(duration);
        Py_DECREF(start_ns);
        return kept;
    }
    PyObject *op_name = PyTuple_GetItem(g, 5);
    PyObject *name = PyDict_GetItemWithError(hashes, op_name);
    if (name == NULL) {
        if (PyErr_Occurred()) {
            Py_DECREF(duration);
            Py_DECREF(start_ns);
            return -1;
        }
        name = op_name;
    }
    PyObject *type = PyTuple_GetItem(g, 6);
    if (packed != NULL) {
        int got = pack_row(packed, a, g, name, type, duration, start_ns, level0);
        return got < 0 ? -1 : got == 0 ? 1 : 0; /* 1: not packable (the caller falls back) */
    }
    PyObject *items[14] = {
        new_ref(device),
        new_ref(PyTuple_GetItem(a, 0)),
        new_ref(PyTuple_GetItem(a, 1)),
        new_ref(PyTuple_GetItem(a, 3)),
        new_ref(name),
        new_ref(type),
        new_ref(type),
        duration,
        new_ref(a_duration),
        start_ns,
        new_ref(PyTuple_GetItem(a, 8)),
        new_ref(PyTuple_GetItem(a, 9)),
        new_ref(level0 ? Py_None : PyTuple_GetItem(g, 7)),
        new_ref(level0 ? Py_None : PyTuple_GetItem(g, 8)),
    };
    PyObject *raw = make_record(raw_cls, raw_alloc, items, 14);
    if (raw == NULL) {
        return -1;
    }
    if (rows_only) {
        return objvec_push(rows, raw);
    }
    PyObject *row_items[2] = {raw, new_ref(a)};
    return objvec_push(rows, make_record(row_cls, row_alloc, row_items, 2));
}

static PyObject *
op_summary(PyObject *Py_UNUSED(module), PyObject *args)
{
    PyObject *ascend, *ge, *hashes, *device, *printer_obj, *raw_cls, *row_cls;
    int level0, mode = 0;
    if (!PyArg_ParseTuple(args, "O!OO!OpO!OO|i:op_summary", &PyList_Type, &ascend, &ge, &PyDict_Type,
                          &hashes, &device, &level0, &PyTuple_Type, &printer_obj, &raw_cls, &row_cls, &mode)) {
        return NULL;
    }
    if (mode < 0 || mode > 2) {
        PyErr_SetString(PyExc_ValueError, "op_summary: mode is 0, 1 or 2");
        return NULL;
    }
    int rows_only = mode > 0;
    if (!PyList_Check(ge) && !PyTuple_Check(ge)) {
        PyErr_SetString(PyExc_TypeError, "op_summary: ge_tasks must be a list or tuple");
        return NULL;
    }
    Printer p;
    if (printer_init(&p, printer_obj) < 0) {
        return NULL;
    }
    allocfunc raw_alloc = record_alloc(raw_cls, "op_summary: raw_cls");
    if (raw_alloc == NULL) {
        return NULL;
    }
    allocfunc row_alloc = record_alloc(row_cls, "op_summary: row_cls");
    if (row_alloc == NULL) {
        return NULL;
    }
    PyObject *result = NULL, *joined_list = NULL, *rows_list = NULL;
    ObjVec joined = {NULL, 0, 0}, rows = {NULL, 0, 0};
    GeIndex index = {{NULL, 0, NULL}, NULL, NULL};
    PackedOut packed = {NULL, NULL, NULL};
    if (mode == 2) {
        packed.vec = scratch_calloc(1, sizeof(PackedVec));
        packed.strings = PyList_New(0);
        packed.index = PyDict_New();
        if (packed.vec == NULL || packed.strings == NULL || packed.index == NULL) {
            if (packed.vec == NULL) {
                PyErr_NoMemory();
            }
            goto error;
        }
    }
    int built = ge_index_build(&index, ge, device);
    if (built <= 0) {
        goto fallback_or_error;
    }
    Py_ssize_t n = PyList_Size(ascend);
    int have_last = 0;
    double last = 0.0;
    static const Py_ssize_t ASCEND_KEY[4] = {0, 1, 3, 2}; /* (stream, task, batch, context) */
    /* One pass: each pair is checked (its start after the last one's), kept (unless rows_only)
     * and made into its row at once; a tie found late sends the whole device to the pure code
     * (the rows made so far are dropped), which declines it. */
    for (Py_ssize_t i = 0; i < n; i++) {
        RELEASE_POINT(i, RELEASE_OBJECTS);
        PyObject *a = PyList_GetItem(ascend, i);
        if (!PyTuple_Check(a) || PyTuple_Size(a) != 10) {
            built = 0;
            goto fallback_or_error;
        }
        double start = PyFloat_AsDouble(PyTuple_GetItem(a, 4));
        if (start == -1.0) {
            if (PyErr_Occurred()) {
                PyErr_Clear();
                built = 0;
                goto fallback_or_error;
            }
            continue; /* the device never ran it */
        }
        int64_t k[4];
        if (!key4(a, ASCEND_KEY, k)) {
            built = 0;
            goto fallback_or_error;
        }
        Py_ssize_t at = find4(&index.keys, k, hash4(k))->index;
        for (; at >= 0; at = index.next[at]) {
            PyObject *g = seq_item(ge, at);
            PyObject *type = PyTuple_GetItem(g, 6);
            if (!PyUnicode_Check(type) || PyTuple_Size(g) < 9) {
                built = 0;
                goto fallback_or_error;
            }
            if (PyUnicode_CompareWithASCIIString(type, "WRITE_BACK") == 0
                || PyUnicode_CompareWithASCIIString(type, "INVALID") == 0) {
                continue;
            }
            /* Equal starts (or starts out of order, which the pure check would also see) go to
             * the pure code, which declines them. */
            if (isnan(start) || (have_last && !(start > last))) {
                built = 0;
                goto fallback_or_error;
            }
            have_last = 1;
            last = start;
            if (!rows_only && objvec_push(&joined, PyTuple_Pack(2, a, g)) < 0) {
                goto error;
            }
            int made = op_row(a, g, device, hashes, level0, &p, raw_cls, raw_alloc, row_cls, row_alloc, rows_only,
                              &rows, mode == 2 ? &packed : NULL);
            if (made < 0) {
                goto error;
            }
            if (made > 0) {
                built = 0; /* a value with no packed form: the caller asks for the records */
                goto fallback_or_error;
            }
        }
    }
    joined_list = rows_only ? new_ref(Py_None) : objvec_list(&joined);
    if (mode == 2 && joined_list != NULL) {
        PyObject *capsule = PyCapsule_New(packed.vec, PACKED_CAPSULE, packed_capsule_free);
        if (capsule != NULL) {
            Py_ssize_t count = packed.vec->n;
            packed.vec = NULL; /* the capsule's */
            rows_list = Py_BuildValue("(NnO)", capsule, count, packed.strings);
        }
    }
    else {
        rows_list = joined_list == NULL ? NULL : objvec_list(&rows);
    }
    if (rows_list != NULL) {
        result = PyTuple_Pack(2, joined_list, rows_list);
    }
    goto done;
fallback_or_error:
    if (built == 0) {
        result = new_ref(Py_None); /* the pure code decides */
    }
    goto done;
error:
    result = NULL;
done:
    objvec_clear(&joined);
    objvec_clear(&rows);
    Py_XDECREF(joined_list);
    Py_XDECREF(rows_list);
    Py_XDECREF(packed.strings);
    Py_XDECREF(packed.index);
    if (packed.vec != NULL) {
        FREE_RELEASED(packed.vec->rows, packed.vec);
    }
    FREE_RELEASED(index.keys.slots, index.keys.keys, index.next, index.last);
    return result;
}


/* -- one device's rows, packed, straight from its task log --------------------------------------- */

PyDoc_STRVAR(packed_device_doc,
"packed_device(data, magic, base, hertz, offset, sqe_names, ge_tasks, hashes, device, printer,\n"
"              limits, invalid, packed_ge=None, /)\n--\n\n"
"One device's op_summary rows at task time level 1, packed (op_summary(..., mode=2)'s (capsule,\n"
"count, strings)), made from its stars_soc contents (as paired_stars reads them) without a\n"
"Python object per task: the pairing, the top-down join's checks where no host task was made\n"
"(no two device tasks of one id) and the join with ge_tasks, in one call. limits: {stream: first\n"
"flip time} where task ids must not wrap (a task starting at or after it is declined), or\n"
"None. data may come in a list, [data], which is emptied once its records are read (a None\n"
"after that: the caller cannot take the steps from them). packed_ge: the device's GE tasks as _chost.lean_finish packs them (a capsule), ge_tasks\n"
"then their templates. None wherever any step would give None (the caller takes the steps one\n"
"by one then).");

/* The GE tasks packed by _chost's lean walk, by (stream, task): every one of the device, of
 * the invalid context and batch 0, and no two of one id (the walk checked the host tasks'), so
 * a slot holds an index into the pack and the key is read there: 4 bytes a slot, where the
 * general index (GeIndex) takes some 60 a task. */
typedef struct {
    const GeVec *ge;
    int32_t *slots; /* -1: empty */
    size_t size;
} GeMap;

static size_t
ge_slot(const GeMap *m, uint32_t stream, uint32_t task)
{
    size_t s = (size_t)mix64((uint64_t)stream << 32 | task) & (m->size - 1);
    while (m->slots[s] >= 0 && (m->ge->v[m->slots[s]].stream != stream || m->ge->v[m->slots[s]].task != task)) {
        s = (s + 1) & (m->size - 1);
    }
    return s;
}

/* 1 built; 0 two tasks of one id (the caller declines: the steps decide); -1 error. */
static int
ge_map_build(GeMap *m, const GeVec *ge)
{
    m->ge = ge;
    m->size = table_size(ge->n);
    m->slots = scratch_malloc(sizeof(int32_t) * m->size);
    if (m->slots == NULL || ge->n >= INT32_MAX) {
        PyErr_NoMemory();
        return -1;
    }
    for (size_t s = 0; s < m->size; s++) {
        RELEASE_POINT(s, RELEASE_PLAIN);
        m->slots[s] = -1;
    }
    for (Py_ssize_t i = 0; i < ge->n; i++) {
        RELEASE_POINT(i, RELEASE_PLAIN);
        size_t s = ge_slot(m, ge->v[i].stream, ge->v[i].task);
        if (m->slots[s] >= 0) {
            return 0;
        }
        m->slots[s] = (int32_t)i;
    }
    return 1;
}

static int
u32_cmp(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

static PyObject *
packed_device(PyObject *Py_UNUSED(module), PyObject *args)
{
    PyObject *bytes, *names, *ge, *hashes, *device, *printer_obj, *limits, *invalid, *packed_obj = Py_None;
    unsigned int magic;
    double base, hertz, offset;
    if (!PyArg_ParseTuple(args, "OIdddO!OO!OO!OO|O:packed_device", &bytes, &magic, &base, &hertz, &offset,
                          &PyTuple_Type, &names, &ge, &PyDict_Type, &hashes, &device, &PyTuple_Type,
                          &printer_obj, &limits, &invalid, &packed_obj)) {
        return NULL;
    }
    PyObject *let_go = NULL;
    if (PyList_Check(bytes)) {
        /* [data], its only holder: emptied once the records are read, so that the file's
         * contents go before the pairing's scratch and the rows take their place */
        if (PyList_Size(bytes) != 1) {
            PyErr_SetString(PyExc_TypeError, "packed_device: data is the contents or a list of them alone");
            return NULL;
        }
        let_go = bytes;
        bytes = PyList_GetItem(let_go, 0);
    }
    const GeVec *packed_ge = NULL;
    if (packed_obj != Py_None) {
        packed_ge = PyCapsule_GetPointer(packed_obj, GE_CAPSULE);
        if (packed_ge == NULL) {
            return NULL;
        }
        if (!PyList_Check(ge)) {
            PyErr_SetString(PyExc_TypeError, "packed_device: the templates of packed_ge must be a list");
            return NULL;
        }
    }
    if (!PyList_Check(ge) && !PyTuple_Check(ge)) {
        PyErr_SetString(PyExc_TypeError, "packed_device: ge_tasks must be a list or tuple");
        return NULL;
    }
    if (limits != Py_None && !PyDict_Check(limits)) {
        PyErr_SetString(PyExc_TypeError, "packed_device: limits must be a dict or None");
        return NULL;
    }
    Printer p;
    if (printer_init(&p, printer_obj) < 0) {
        return NULL;
    }
    PyObject *result = NULL;
    Records r;
    PairWork w;
    memset(&w, 0, sizeof w);
    uint32_t *keys = NULL;
    int32_t *s_of = NULL, *e_of = NULL; /* each pair's start and end record, in start order */
    double *limit_of = NULL;
    GeIndex index = {{NULL, 0, NULL}, NULL, NULL};
    GeMap map = {NULL, NULL, 0};
    PackedOut packed = {NULL, NULL, NULL};
    int read = stars_records(bytes, magic, base, hertz, offset, PyTuple_Size(names), &r);
    if (read <= 0) {
        result = read == 0 ? new_ref(Py_None) : NULL;
        goto done;
    }
    if (let_go != NULL && PyList_SetSlice(let_go, 0, 1, NULL) < 0) {
        goto done;
    }
    Py_ssize_t npairs = paired(&r, &w);
    if (npairs < 0) {
        goto done;
    }
    /* (the pairing's own scratch and the records' headers go: the pairs, in start order, are
     * what is read from here) */
    FREE_RELEASED(w.order, w.group_of, w.first, w.members, w.table, r.head);
    w.order = NULL, w.group_of = NULL, w.first = NULL, w.members = NULL, w.table = NULL, r.head = NULL;
    /* the pairs' records in start order, 8 bytes a pair where the pairing kept 24 */
    s_of = scratch_malloc(sizeof(int32_t) * (size_t)(npairs + 1));
    e_of = scratch_malloc(sizeof(int32_t) * (size_t)(npairs + 1));
    if (s_of == NULL || e_of == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t k = 0; k < npairs; k++) {
        RELEASE_POINT(k, RELEASE_PLAIN);
        Py_ssize_t pair = w.pairs[k].index;
        s_of[k] = w.pair_start[pair];
        e_of[k] = w.pair_end[pair];
    }
    FREE_RELEASED(w.pairs, w.pair_start, w.pair_end);
    w.pairs = NULL, w.pair_start = NULL, w.pair_end = NULL;
    /* _top_down: no two device tasks of one (stream, task) (context invalid, batch 0) */
    keys = scratch_malloc(sizeof(uint32_t) * (size_t)(npairs + 1));
    limit_of = scratch_malloc(sizeof(double) * 2048);
    if (keys == NULL || limit_of == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t k = 0; k < npairs; k++) {
        RELEASE_POINT(k, RELEASE_PLAIN);
        Py_ssize_t s = s_of[k];
        keys[k] = r.stream[s] << 16 | r.task[s];
    }
    int twice = 0;
    Py_BEGIN_ALLOW_THREADS
    qsort(keys, (size_t)npairs, sizeof(uint32_t), u32_cmp);
    for (Py_ssize_t k = 1; k < npairs && !twice; k++) {
        twice = keys[k] == keys[k - 1];
    }
    Py_END_ALLOW_THREADS
    FREE_RELEASED(keys);
    keys = NULL;
    if (twice) {
        result = new_ref(Py_None);
        goto done;
    }
    /* _device's check that task ids did not wrap: no task of a stream at or after its limit */
    for (int j = 0; j < 2048; j++) {
        limit_of[j] = INFINITY;
    }
    if (limits != Py_None) {
        PyObject *key, *value;
        Py_ssize_t at = 0;
        while (PyDict_Next(limits, &at, &key, &value)) {
            long stream = PyLong_Check(key) ? PyLong_AsLong(key) : -1;
            if (stream == -1 && PyErr_Occurred()) {
                PyErr_Clear();
            }
            if (!PyFloat_CheckExact(value)) {
                result = new_ref(Py_None);
                goto done;
            }
            if (stream >= 0 && stream < 2048) {
                limit_of[stream] = PyFloat_AsDouble(value); /* (other streams have no task here) */
            }
        }
    }
    int64_t context;
    if (!exact_i64(invalid, &context) ||
        (packed_ge != NULL ? ge_map_build(&map, packed_ge) : ge_index_build(&index, ge, device)) <= 0) {
        result = PyErr_Occurred() ? NULL : new_ref(Py_None);
        goto done;
    }
    packed.vec = scratch_calloc(1, sizeof(PackedVec));
    packed.strings = PyList_New(0);
    packed.index = PyDict_New();
    if (packed.vec == NULL || packed.strings == NULL || packed.index == NULL) {
        if (packed.vec == NULL) {
            PyErr_NoMemory();
        }
        goto done;
    }
    int have_last = 0;
    double last = 0.0;
    for (Py_ssize_t k = 0; k < npairs; k++) {
        RELEASE_POINT(k, RELEASE_OBJECTS);
        Py_ssize_t s = s_of[k], e = e_of[k];
        double start = r.times[s];
        if (start >= limit_of[r.stream[s]]) {
            result = new_ref(Py_None); /* declined by _device */
            goto done;
        }
        int64_t key[4] = {r.stream[s], r.task[s], 0, context}; /* (stream, task, batch, context) */
        Py_ssize_t at = packed_ge != NULL ? map.slots[ge_slot(&map, r.stream[s], r.task[s])]
                                          : find4(&index.keys, key, hash4(key))->index;
        for (; at >= 0; at = packed_ge != NULL ? -1 : index.next[at]) {
            /* (a packed task's name, type and block dims are its template's) */
            PyObject *g = packed_ge != NULL ? PyList_GetItem(ge, packed_ge->v[at].tmpl) : seq_item(ge, at);
            if (g == NULL || !PyTuple_Check(g) || PyTuple_Size(g) < 9) {
                result = PyErr_Occurred() ? NULL : new_ref(Py_None);
                goto done;
            }
            PyObject *type = PyTuple_GetItem(g, 6);
            if (!PyUnicode_Check(type)) {
                result = new_ref(Py_None);
                goto done;
            }
            if (PyUnicode_CompareWithASCIIString(type, "WRITE_BACK") == 0
                || PyUnicode_CompareWithASCIIString(type, "INVALID") == 0) {
                continue;
            }
            if (have_last && !(start > last)) {
                result = new_ref(Py_None); /* equal starts: declined by the pure code */
                goto done;
            }
            have_last = 1;
            last = start;
            double dur_ns = r.times[e] - start;
            PyObject *duration = round3_obj(dur_ns / 1000.0);
            PyObject *start_obj = duration == NULL ? NULL : PyFloat_FromDouble(start);
            if (start_obj == NULL) {
                Py_XDECREF(duration);
                goto done;
            }
            PyObject *text, *start_ns;
            int printed = printed_one(&p, start_obj, 0, &text, &start_ns);
            Py_DECREF(start_obj);
            if (printed < 0) {
                Py_DECREF(duration);
                goto done;
            }
            int kept = kept_one(&p, start_ns, text, duration);
            Py_DECREF(text);
            if (kept <= 0) {
                Py_DECREF(duration);
                Py_DECREF(start_ns);
                if (kept < 0) {
                    goto done;
                }
                continue;
            }
            PyObject *op_name = PyTuple_GetItem(g, 5);
            PyObject *name = PyDict_GetItemWithError(hashes, op_name);
            if (name == NULL) {
                if (PyErr_Occurred()) {
                    Py_DECREF(duration);
                    Py_DECREF(start_ns);
                    goto done;
                }
                name = op_name;
            }
            Row row;
            row.stream = r.stream[s];
            row.task = r.task[s];
            row.batch = 0;
            row.start_cycles = r.counters[s];
            row.end_cycles = r.counters[e];
            row.a_duration = dur_ns;
            int got = pack_rest(&packed, &row, 1, g, name, type, duration, start_ns, 0);
            if (got <= 0) {
                result = got == 0 ? new_ref(Py_None) : NULL;
                goto done;
            }
        }
    }
    {
        PyObject *capsule = PyCapsule_New(packed.vec, PACKED_CAPSULE, packed_capsule_free);
        if (capsule != NULL) {
            Py_ssize_t count = packed.vec->n;
            packed.vec = NULL; /* the capsule's */
            result = Py_BuildValue("(NnO)", capsule, count, packed.strings);
        }
    }
done:
    records_free(&r);
    pair_work_free(&w);
    FREE_RELEASED(keys, limit_of, s_of, e_of);
    FREE_RELEASED(index.keys.slots, index.keys.keys, index.next, index.last, map.slots);
    Py_XDECREF(packed.strings);
    Py_XDECREF(packed.index);
    if (packed.vec != NULL) {
        FREE_RELEASED(packed.vec->rows, packed.vec);
    }
    return result;
}


/* -- one device's host records ---------------------------------------------------------------- */

/* Item i of a list or tuple (borrowed). */
static PyObject *
seq_item(PyObject *seq, Py_ssize_t i)
{
    return PyList_Check(seq) ? PyList_GetItem(seq, i) : PyTuple_GetItem(seq, i);
}

/* Whether record (a tuple) belongs to device: 1, 0, -1 on error. */
static int
of_device_one(PyObject *record, PyObject *device)
{
    if (!PyTuple_Check(record) || PyTuple_Size(record) < 1) {
        PyErr_SetString(PyExc_TypeError, "host records must be tuples");
        return -1;
    }
    return PyObject_RichCompareBool(PyTuple_GetItem(record, 0), device, Py_EQ);
}

PyDoc_STRVAR(of_device_doc,
"of_device(records, device, /)\n--\n\n"
"[r for r in records if r[0] == device] of a list or tuple of tuples.");

static PyObject *
of_device(PyObject *Py_UNUSED(module), PyObject *args)
{
    PyObject *records, *device;
    if (!PyArg_ParseTuple(args, "OO:of_device", &records, &device)) {
        return NULL;
    }
    if (!PyList_Check(records) && !PyTuple_Check(records)) {
        PyErr_SetString(PyExc_TypeError, "of_device: records must be a list or tuple");
        return NULL;
    }
    Py_ssize_t n = seq_size(records);
    ObjVec out = {NULL, 0, 0};
    for (Py_ssize_t i = 0; i < n; i++) {
        RELEASE_POINT(i, RELEASE_READS);
        PyObject *record = seq_item(records, i);
        int found = of_device_one(record, device);
        if (found < 0 || (found && objvec_push(&out, new_ref(record)) < 0)) {
            objvec_clear(&out);
            return NULL;
        }
    }
    return objvec_list(&out);
}

PyDoc_STRVAR(ge_index_doc,
"ge_index(ge_tasks, device, /)\n--\n\n"
"The GE tasks g of device (g[0] == device) by (stream, task, batch, context), that is\n"
"(g[1], g[2], g[4], g[3]), each key's in their order.");

static PyObject *
ge_index(PyObject *Py_UNUSED(module), PyObject *args)
{
    PyObject *records, *device;
    if (!PyArg_ParseTuple(args, "OO:ge_index", &records, &device)) {
        return NULL;
    }
    if (!PyList_Check(records) && !PyTuple_Check(records)) {
        PyErr_SetString(PyExc_TypeError, "ge_index: records must be a list or tuple");
        return NULL;
    }
    Py_ssize_t n = PyList_Check(records) ? PyList_Size(records) : PyTuple_Size(records);
    PyObject *out = PyDict_New();
    if (out == NULL) {
        return NULL;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        RELEASE_POINT(i, RELEASE_OBJECTS);
        PyObject *g = seq_item(records, i);
        int found = of_device_one(g, device);
        if (found < 0) {
            goto error;
        }
        if (!found) {
            continue;
        }
        if (PyTuple_Size(g) < 5) {
            PyErr_SetString(PyExc_TypeError, "ge_index: GE tasks must have 5 ids");
            goto error;
        }
        PyObject *key = PyTuple_Pack(4, PyTuple_GetItem(g, 1), PyTuple_GetItem(g, 2), PyTuple_GetItem(g, 4),
                                     PyTuple_GetItem(g, 3));
        if (key == NULL) {
            goto error;
        }
        PyObject *group = PyDict_GetItemWithError(out, key);
        int rc;
        if (group != NULL) {
            rc = PyList_Append(group, g);
        }
        else if (PyErr_Occurred()) {
            rc = -1;
        }
        else {
            group = PyList_New(1);
            rc = group == NULL ? -1 : 0;
            if (group != NULL) {
                PyList_SetItem(group, 0, new_ref(g));
                rc = PyDict_SetItem(out, key, group);
                Py_DECREF(group);
            }
        }
        Py_DECREF(key);
        if (rc < 0) {
            goto error;
        }
    }
    return out;
error:
    Py_DECREF(out);
    return NULL;
}

/* -- the public records ---------------------------------------------------------------------- */

PyDoc_STRVAR(public_tasks_doc,
"public_tasks(tasks, cls, start=0, stop=len(tasks), /)\n--\n\n"
"RawResult.profiling_tasks: cls(task_id, name, type, duration, device) of every RawTask of the\n"
"tuple tasks[start:stop] (its fields 2, 4, 5, 7 and 0; 0 <= start <= stop <= len(tasks)).");

static PyObject *
public_tasks(PyObject *Py_UNUSED(module), PyObject *args)
{
    PyObject *tasks, *cls;
    Py_ssize_t start = 0, stop = -1;
    if (!PyArg_ParseTuple(args, "O!O|nn:public_tasks", &PyTuple_Type, &tasks, &cls, &start, &stop)) {
        return NULL;
    }
    Py_ssize_t size = PyTuple_Size(tasks);
    if (PyTuple_Size(args) < 4) {
        stop = size;
    }
    if (start < 0 || stop < start || stop > size) {
        PyErr_SetString(PyExc_ValueError, "public_tasks: needs 0 <= start <= stop <= len(tasks)");
        return NULL;
    }
    RecordKind kind; /* ProfilingTask: a frozen, slotted dataclass (_record_new.h) */
    if (record_kind_init(&kind, cls, 5, "public_tasks: cls") < 0) {
        return NULL;
    }
    Py_ssize_t n = stop - start;
    PyObject *out = PyList_New(n);
    if (out == NULL) {
        record_kind_clear(&kind);
        return NULL;
    }
    static const Py_ssize_t FIELDS[5] = {2, 4, 5, 7, 0};
    for (Py_ssize_t i = 0; i < n; i++) {
        RELEASE_POINT(i, RELEASE_OBJECTS);
        PyObject *raw = PyTuple_GetItem(tasks, start + i);
        if (!PyTuple_Check(raw) || PyTuple_Size(raw) < 8) {
            PyErr_SetString(PyExc_TypeError, "public_tasks: tasks must be RawTask records");
            Py_DECREF(out);
            record_kind_clear(&kind);
            return NULL;
        }
        PyObject *items[5];
        for (int j = 0; j < 5; j++) {
            items[j] = new_ref(PyTuple_GetItem(raw, FIELDS[j]));
        }
        int untrack = atomic_items(items, 5);
        PyObject *record = record_kind_new(&kind, items);
        if (record == NULL) {
            Py_DECREF(out);
            record_kind_clear(&kind);
            return NULL;
        }
        if (untrack) {
            PyObject_GC_UnTrack(record);
        }
        PyList_SetItem(out, i, record);
    }
    record_kind_clear(&kind);
    return out;
}

/* -- freeing ---------------------------------------------------------------------------------- */

/* Items freed between two release points: each may free a record and its fields. */
#define EMPTY_SLICE 64

PyDoc_STRVAR(empty_doc,
"empty(container, /)\n--\n\n"
"Empties a list or dict a few items at a time, letting the GIL go in between (freeing a big\n"
"container at once is one long operation); only for containers no other thread holds.");

static PyObject *
empty(PyObject *Py_UNUSED(module), PyObject *obj)
{
    if (PyList_Check(obj)) {
        for (Py_ssize_t n = PyList_Size(obj); n > 0; n = PyList_Size(obj)) {
            if (PyList_SetSlice(obj, n > EMPTY_SLICE ? n - EMPTY_SLICE : 0, n, NULL) < 0) {
                return NULL;
            }
            release_if_due();
        }
        Py_RETURN_NONE;
    }
    if (!PyDict_Check(obj)) {
        PyErr_SetString(PyExc_TypeError, "empty: a list or dict");
        return NULL;
    }
    /* popitem() until it is empty: the last entry each time, no key to hash or look up */
    PyObject *pop = PyObject_GetAttrString(obj, "popitem");
    if (pop == NULL) {
        return NULL;
    }
    for (Py_ssize_t i = 0, n = PyDict_Size(obj); i < n; i++) {
        RELEASE_POINT(i, EMPTY_SLICE);
        PyObject *item = PyObject_CallNoArgs(pop);
        if (item == NULL) {
            Py_DECREF(pop);
            return NULL;
        }
        Py_DECREF(item);
    }
    Py_DECREF(pop);
    PyDict_Clear(obj); /* (empty already, unless the dict had a subclass's popitem) */
    Py_RETURN_NONE;
}

/* Whether the cyclic GC may ever need to look at item: 0 for objects it does not handle and
 * for untracked tuples and untracked slotted records such as ProfilingTask (nothing tracks
 * either again once it is untracked), as the collector itself decides for a tuple's items
 * (_PyObject_GC_MAY_BE_TRACKED). A dict is the exception: CPython tracks an untracked dict
 * again when a tracked value goes in. */
static int
may_be_tracked(PyObject *item)
{
    if (!(PyType_GetFlags(Py_TYPE(item)) & Py_TPFLAGS_HAVE_GC)) {
        return 0;
    }
    return PyDict_Check(item) || PyObject_GC_IsTracked(item);
}

PyDoc_STRVAR(tuple_of_doc,
"tuple_of(items, /)\n--\n\n"
"tuple(items) of a list, made in steps with release points, and the list emptied (its items\n"
"moved, not copied). The tuple is left out of the cyclic GC where no item is tracked by it.");

static PyObject *
tuple_of(PyObject *Py_UNUSED(module), PyObject *list)
{
    if (!PyList_Check(list)) {
        PyErr_SetString(PyExc_TypeError, "tuple_of: a list");
        return NULL;
    }
    Py_ssize_t n = PyList_Size(list);
    PyObject *out = PyTuple_New(n);
    if (out == NULL) {
        return NULL;
    }
    int tracked = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        RELEASE_POINT(i, RELEASE_READS);
        PyObject *item = PyList_GetItem(list, i);
        tracked |= may_be_tracked(item);
        PyTuple_SetItem(out, i, new_ref(item));
    }
    /* A tuple of such items can never be part of a reference cycle, so the collector has
     * nothing to find in it; tracked, every collection would visit each of its items. */
    if (!tracked && PyObject_GC_IsTracked(out)) {
        PyObject_GC_UnTrack(out);
    }
    PyObject *done = empty(NULL, list);
    if (done == NULL) {
        Py_DECREF(out);
        return NULL;
    }
    Py_DECREF(done);
    return out;
}

PyDoc_STRVAR(clear_items_doc,
"clear_items(box, start, stop, /)\n--\n\n"
"Replaces items start:stop of the tuple box[0] with None, freeing them: True; False (nothing\n"
"changed) where the tuple has another holder than box. A tuple freed whole decrements every\n"
"item in one operation (6 ms for 500,000 records, cache misses mostly); this frees it in steps.");

static PyObject *
clear_items(PyObject *Py_UNUSED(module), PyObject *args)
{
    PyObject *box;
    Py_ssize_t start, stop;
    if (!PyArg_ParseTuple(args, "O!nn:clear_items", &PyList_Type, &box, &start, &stop)) {
        return NULL;
    }
    PyObject *tuple = PyList_GetItem(box, 0); /* borrowed: box stays its holder */
    if (tuple == NULL) {
        return NULL;
    }
    if (!PyTuple_Check(tuple)) {
        PyErr_SetString(PyExc_TypeError, "clear_items: box[0] is not a tuple");
        return NULL;
    }
    Py_ssize_t n = PyTuple_Size(tuple);
    start = start < 0 ? 0 : start;
    stop = stop > n ? n : stop;
    for (Py_ssize_t i = start; i < stop; i++) {
        /* PyTuple_SetItem refuses a tuple anyone else holds (a reference count above 1): then
         * nothing has changed yet, since the count cannot change while this loop runs */
        if (PyTuple_SetItem(tuple, i, new_ref(Py_None)) < 0) {
            PyErr_Clear();
            Py_RETURN_FALSE;
        }
    }
    Py_RETURN_TRUE;
}

static PyMethodDef methods[] = {
    {"empty", empty, METH_O, empty_doc},
    {"clear_items", clear_items, METH_VARARGS, clear_items_doc},
    {"tuple_of", tuple_of, METH_O, tuple_of_doc},
    {"public_tasks", public_tasks, METH_VARARGS, public_tasks_doc},
    {"of_device", of_device, METH_VARARGS, of_device_doc},
    {"ge_index", ge_index, METH_VARARGS, ge_index_doc},
    {"paired_tasks", paired_tasks, METH_VARARGS, paired_tasks_doc},
    {"paired_stars", paired_stars, METH_VARARGS, paired_stars_doc},
    {"top_down", top_down, METH_VARARGS, top_down_doc},
    {"op_summary", op_summary, METH_VARARGS, op_summary_doc},
    {"packed_rows", packed_rows, METH_VARARGS, packed_rows_doc},
    {"packed_device", packed_device, METH_VARARGS, packed_device_doc},
    {"printed_all", printed_all, METH_VARARGS, printed_all_doc},
    {"round3", round3, METH_O, round3_doc},
    {NULL, NULL, 0, NULL},
};

static int
module_exec(PyObject *m)
{
    if (record_new_init() < 0) {
        return -1;
    }
    /* the spacing of release points (see _release.h): tests check it against the switch interval */
    if (PyModule_AddIntConstant(m, "RELEASE_INTERVAL_NS", RELEASE_INTERVAL_NS) < 0) {
        return -1;
    }
    /* how records are built here (see _record_new.h): tests read it */
    return PyModule_AddIntConstant(m, "RECORDS_VIA_NEW", record_via_new);
}

static PyModuleDef_Slot slots[] = {
    {Py_mod_exec, (void *)module_exec},
    {0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    "asc_aprof._plans._raw._cdevice",
    "C device loops for asc_aprof._plans._raw._run (optional accelerator; see _run.py).",
    0,
    methods,
    slots,
    NULL,
    NULL,
    NULL,
};

PyMODINIT_FUNC
PyInit__cdevice(void)
{
    return PyModuleDef_Init(&module);
}
