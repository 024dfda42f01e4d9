/* asc_aprof._plans._cparser: the row loop of TaskParser in C (an optional accelerator), and the
 * grouping and order statistics of the columnar path (asc_aprof._plans._columns).
 *
 * One function, parse_rows(), consumes complete lines of a CSV chunk, as bytes, and appends
 * their ProfilingTask records to a list (and, when asked, each task's PMU counter cells as
 * doubles, N/A as NaN, to one bytearray per counter column). The contract with _parser.py: every line it consumes
 * gives exactly what TaskParser._rows gives for that line (tasks, skipped counts, data rows,
 * line count). Any line that is not the plain fast case -- a quote in the first k fields, a
 * quote breaking the quoting rule, a wrong field count, a number that is not plain, a
 * non-finite duration, N/A or host cells, invalid UTF-8 in the name or type, a line longer in
 * bytes than the limit, a counter cell that is quoted, padded or not a plain finite number
 * (other than N/A) -- is left untouched: the call stops at its first byte and says so,
 * Python runs its own per-line code on it (including raising the error with its line number),
 * and calls back for the rest.
 *
 * Only the stable ABI (Python >= 3.10) is used, so one build serves every later version.
 */
#ifndef Py_LIMITED_API
#define Py_LIMITED_API 0x030A0000
#endif
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "_record_new.h"

/* Kernel names repeat (a run launches few distinct kernels): a small per-call cache of the
 * last distinct names and types saves decoding and allocating a str per row. */
#define CACHE_SIZE 16

typedef struct {
    const char *p; /* the bytes, inside the caller's buffer (valid for this call) */
    Py_ssize_t n;
    PyObject *s;
    int32_t code; /* columnar reads: its index in the interning table, -1 until interned */
} CacheEntry;

typedef struct {
    CacheEntry e[CACHE_SIZE];
    int used, next, last;
} Cache;

typedef struct {
    PyObject *out, *default_device, *skipped;
    RecordKind kind; /* how ProfilingTask records are built (_record_new.h) */
    Py_ssize_t ncols, k, i_dev, i_id, i_name, i_type, i_dur;
    Py_ssize_t *ends; /* ends[f]: offset of the comma closing field f < k (or the line end) */
    Cache names, types;
    Py_ssize_t rows;
    int untrack; /* the default device is None or an int, so records hold nothing else */
    /* Counters: ncounter column indexes (ascending), one row's values, and the values of the
     * tasks this call made, row-major (flushed into the caller's bytearrays at the end). */
    Py_ssize_t ncounter, *cidx;
    double *rowv, *cbuf;
    Py_ssize_t cbuf_rows, cbuf_cap;
    /* Columnar reads (columnar is not None): no record per task, but one value per task in each
     * of five C arrays (flushed into the caller's bytearrays at the end), names, types and
     * devices as codes into the caller's interning tables (dict value -> code, list of values). */
    int columnar;
    PyObject *name_codes, *name_table, *type_codes, *type_table, *dev_codes, *dev_table;
    double *col_dur;
    int64_t *col_id;
    int32_t *col_dev, *col_name, *col_type;
    Py_ssize_t col_rows, col_cap;
    long long last_dev; /* the device of the last row and its code (dev_cached: known) */
    int32_t last_dev_code;
    int dev_cached;
} Ctx;

/* The id column's value for a task without id (N/A): ids are refused outside (INT64_MIN, INT64_MAX]. */
#define NO_ID INT64_MIN

enum { ROW_ERROR = -1, ROW_FALLBACK = 0, ROW_DONE = 1 };

static void
cache_clear(Cache *c)
{
    for (int i = 0; i < c->used; i++) {
        Py_DECREF(c->e[i].s);
    }
    c->used = c->next = c->last = 0;
}

/* A new reference to the str of p[0:n]; NULL with *fallback set when the bytes are not valid
 * UTF-8 (Python decodes with "replace", so it builds that name itself), NULL with an
 * exception otherwise. */
static PyObject *
cache_str(Cache *c, const char *p, Py_ssize_t n, int *fallback)
{
    if (c->used) {
        CacheEntry *e = &c->e[c->last];
        if (e->n == n && memcmp(e->p, p, (size_t)n) == 0) {
            Py_INCREF(e->s);
            return e->s;
        }
    }
    for (int i = 0; i < c->used; i++) {
        CacheEntry *e = &c->e[i];
        if (e->n == n && memcmp(e->p, p, (size_t)n) == 0) {
            c->last = i;
            Py_INCREF(e->s);
            return e->s;
        }
    }
    PyObject *s = PyUnicode_DecodeUTF8(p, n, NULL);
    if (s == NULL) {
        if (PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) {
            PyErr_Clear();
            *fallback = 1;
        }
        return NULL;
    }
    int slot;
    if (c->used < CACHE_SIZE) {
        slot = c->used++;
    }
    else {
        slot = c->next;
        c->next = (c->next + 1) % CACHE_SIZE;
        Py_DECREF(c->e[slot].s);
    }
    c->e[slot].p = p;
    c->e[slot].n = n;
    c->e[slot].s = s;
    c->e[slot].code = -1;
    c->last = slot;
    Py_INCREF(s);
    return s;
}

/* The padding float() and int() strip that we accept; any other whitespace goes to Python. */
static int
is_pad(char ch)
{
    return ch == ' ' || ch == '\t' || ch == '\r';
}

static int
is_digit(char ch)
{
    return ch >= '0' && ch <= '9';
}

static void
trim(const char **p, const char **q)
{
    while (*p < *q && is_pad(**p)) {
        (*p)++;
    }
    while (*q > *p && is_pad((*q)[-1])) {
        (*q)--;
    }
}

/* [+-]digits, at most 18 of them (fits a long long): 1 with *out set, else 0 (Python decides,
 * which also covers N/A, host, underscores, Unicode digits and huge ids). */
static int
plain_int(const char *p, const char *q, long long *out)
{
    trim(&p, &q);
    int negative = 0;
    if (p < q && (*p == '+' || *p == '-')) {
        negative = *p == '-';
        p++;
    }
    if (p == q || q - p > 18) {
        return 0;
    }
    long long v = 0;
    for (; p < q; p++) {
        if (!is_digit(*p)) {
            return 0;
        }
        v = v * 10 + (*p - '0');
    }
    *out = negative ? -v : v;
    return 1;
}

/* float() of the trimmed, validated text p[0:q], by the PyOS_string_to_double call float()
 * itself makes (overflow gives inf, as in float()). */
static int
slow_float(const char *p, const char *q, double *out)
{
    char text[64]; /* PyOS_string_to_double wants a NUL-terminated string */
    size_t n = (size_t)(q - p);
    if (n >= sizeof text) {
        return ROW_FALLBACK;
    }
    memcpy(text, p, n);
    text[n] = '\0';
    char *end = NULL;
    double v = PyOS_string_to_double(text, &end, NULL);
    if (v == -1.0 && PyErr_Occurred()) {
        return ROW_ERROR;
    }
    if (end != text + n) {
        return ROW_FALLBACK;
    }
    *out = v;
    return ROW_DONE;
}

/* 10^0 .. 10^22: the powers of ten a double holds exactly */
static const double POW10[] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,  1e8,  1e9,  1e10, 1e11,
                               1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};

/* [+-]digits[.digits][e[+-]digits] (a digit somewhere in the mantissa): ROW_DONE with *out
 * set to what float() gives, bit for bit; ROW_FALLBACK for anything else (nan, inf, N/A,
 * underscores, ...); ROW_ERROR with an exception set. */
static int
plain_float(const char *p, const char *q, double *out)
{
    trim(&p, &q);
    const char *s = p;
    int negative = 0;
    if (s < q && (*s == '+' || *s == '-')) {
        negative = *s == '-';
        s++;
    }
    /* the mantissa as an integer m (meaningful up to 19 significant digits) and a scale */
    unsigned long long m = 0;
    int digits = 0, significant = 0, scale = 0;
    for (; s < q && is_digit(*s); s++, digits++) {
        if (m || *s != '0') {
            m = m * 10 + (unsigned long long)(*s - '0');
            significant++;
        }
    }
    if (s < q && *s == '.') {
        for (s++; s < q && is_digit(*s); s++, digits++) {
            if (m || *s != '0') {
                m = m * 10 + (unsigned long long)(*s - '0');
                significant++;
            }
            scale--;
        }
    }
    if (digits == 0) {
        return ROW_FALLBACK;
    }
    int exponent = 0, exp_negative = 0, exp_digits = 0;
    if (s < q && (*s == 'e' || *s == 'E')) {
        s++;
        if (s < q && (*s == '+' || *s == '-')) {
            exp_negative = *s == '-';
            s++;
        }
        for (; s < q && is_digit(*s); s++, exp_digits++) {
            if (exponent >= 10000) {
                /* no cap: with 10,000 zeros after the point, 1e100005 is 1e90004 (inf), not
                 * 0.1; Python reads such an exponent (its value or its error) */
                return ROW_FALLBACK;
            }
            exponent = exponent * 10 + (*s - '0');
        }
        if (exp_digits == 0) {
            return ROW_FALLBACK;
        }
    }
    if (s != q) {
        return ROW_FALLBACK;
    }
#if defined(FLT_EVAL_METHOD) && FLT_EVAL_METHOD == 0
    /* Clinger's fast path: m and 10^|e| are exact doubles, so one IEEE multiply or divide
     * gives the correctly rounded value, which is what float()'s correctly rounded
     * _Py_dg_strtod returns too; it also skips the x87 control-word switch that
     * PyOS_string_to_double makes on every call. Only where doubles are evaluated in double
     * precision (SSE2, ARM); elsewhere everything takes the slow path. */
    int e = scale + (exp_negative ? -exponent : exponent);
    if (significant <= 19 && m <= (1ULL << 53) && e >= -22 && e <= 22) {
        double v = (double)m;
        v = e < 0 ? v / POW10[-e] : v * POW10[e];
        *out = negative ? -v : v;
        return ROW_DONE;
    }
#else
    (void)scale;
    (void)significant;
    (void)exponent;
    (void)exp_negative;
    (void)negative;
#endif
    return slow_float(p, q, out);
}

/* One counter cell: N/A (exactly) is NaN, a plain finite number its value; anything else is
 * Python's to read (padding, quotes, nan, inf, overflow, text: its value or its error). */
static int
counter_cell(const char *p, const char *q, double *out)
{
    if (q - p == 3 && p[0] == 'N' && p[1] == '/' && p[2] == 'A') {
        *out = NAN;
        return ROW_DONE;
    }
    int rc = plain_float(p, q, out);
    if (rc != ROW_DONE) {
        return rc;
    }
    return isfinite(*out) ? ROW_DONE : ROW_FALLBACK;
}

static Py_ssize_t
field_start(const Ctx *c, Py_ssize_t f)
{
    return f == 0 ? 0 : c->ends[f - 1] + 1;
}

/* The counter cells of the line p[0:n] into c->rowv. The line already passed the field count
 * and quoting checks, so fields past the first k are found by walking commas, a quoted field
 * (never a counter here: those go to Python) skipped to its closing quote. */
static int
parse_counters(Ctx *c, const char *p, Py_ssize_t n)
{
    Py_ssize_t j = 0;
    for (; j < c->ncounter && c->cidx[j] < c->k; j++) {
        Py_ssize_t f = c->cidx[j];
        int rc = counter_cell(p + field_start(c, f), p + c->ends[f], &c->rowv[j]);
        if (rc != ROW_DONE) {
            return rc;
        }
    }
    Py_ssize_t pos = c->ends[c->k - 1] + 1;
    for (Py_ssize_t f = c->k; j < c->ncounter; f++) {
        Py_ssize_t end;
        if (pos < n && p[pos] == '"') {
            if (f == c->cidx[j]) {
                return ROW_FALLBACK;
            }
            Py_ssize_t i = pos + 1;
            for (;;) {
                const char *close = memchr(p + i, '"', (size_t)(n - i));
                if (close == NULL) {
                    return ROW_FALLBACK;
                }
                i = close - p + 1;
                if (i < n && p[i] == '"') { /* an escaped "" */
                    i++;
                    continue;
                }
                break;
            }
            end = i;
        }
        else {
            const char *comma = memchr(p + pos, ',', (size_t)(n - pos));
            end = comma ? comma - p : n;
            if (f == c->cidx[j]) {
                int rc = counter_cell(p + pos, p + end, &c->rowv[j]);
                if (rc != ROW_DONE) {
                    return rc;
                }
                j++;
            }
        }
        pos = end + 1;
    }
    return ROW_DONE;
}

/* Room for one more row of counters in c->cbuf (before anything of the row is committed). */
static int
reserve_counter_row(Ctx *c)
{
    if (c->cbuf_rows < c->cbuf_cap) {
        return 0;
    }
    Py_ssize_t cap = c->cbuf_cap ? 2 * c->cbuf_cap : 1024;
    double *grown = PyMem_Realloc(c->cbuf, (size_t)(cap * c->ncounter) * sizeof(double));
    if (grown == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    c->cbuf = grown;
    c->cbuf_cap = cap;
    return 0;
}

/* Append this call's counters to the caller's bytearrays, column by column. */
static int
flush_counters(Ctx *c, PyObject *counter_out)
{
    for (Py_ssize_t j = 0; j < c->ncounter; j++) {
        PyObject *column = PyList_GetItem(counter_out, j); /* borrowed, checked by the caller */
        Py_ssize_t old = PyByteArray_Size(column);
        if (old < 0 || PyByteArray_Resize(column, old + c->cbuf_rows * (Py_ssize_t)sizeof(double)) < 0) {
            return -1;
        }
        char *dst = PyByteArray_AsString(column) + old;
        for (Py_ssize_t r = 0; r < c->cbuf_rows; r++) {
            memcpy(dst + r * (Py_ssize_t)sizeof(double), &c->cbuf[r * c->ncounter + j], sizeof(double));
        }
    }
    return 0;
}

/* The code of value in an interning table (codes: dict value -> code; table: the values in code
 * order), adding it when new, as _parser.py's pure path does. */
static int
intern_value(PyObject *codes, PyObject *table, PyObject *value, int32_t *code)
{
    PyObject *found = PyDict_GetItemWithError(codes, value); /* borrowed */
    if (found != NULL) {
        long v = PyLong_AsLong(found);
        if (v == -1 && PyErr_Occurred()) {
            return -1;
        }
        *code = (int32_t)v;
        return 0;
    }
    if (PyErr_Occurred()) {
        return -1;
    }
    Py_ssize_t next = PyList_Size(table);
    if (next < 0) {
        return -1;
    }
    if (next >= INT32_MAX) {
        PyErr_SetString(PyExc_OverflowError, "parse_rows: more than 2**31 distinct values");
        return -1;
    }
    PyObject *number = PyLong_FromSsize_t(next);
    if (number == NULL) {
        return -1;
    }
    int rc = PyDict_SetItem(codes, value, number);
    Py_DECREF(number);
    if (rc < 0 || PyList_Append(table, value) < 0) {
        return -1;
    }
    *code = (int32_t)next;
    return 0;
}

/* The code of a cache entry's string (interned on first use). */
static int
entry_code(CacheEntry *e, PyObject *codes, PyObject *table, int32_t *code)
{
    if (e->code < 0 && intern_value(codes, table, e->s, &e->code) < 0) {
        return -1;
    }
    *code = e->code;
    return 0;
}

/* The code of a row's device: the parsed value (has_value) or the default device object. */
static int
device_code(Ctx *c, int has_value, long long value, int32_t *code)
{
    if (c->dev_cached && has_value && value == c->last_dev) {
        *code = c->last_dev_code;
        return 0;
    }
    PyObject *obj = has_value ? PyLong_FromLongLong(value) : c->default_device;
    if (obj == NULL) {
        return -1;
    }
    if (!has_value) {
        Py_INCREF(obj);
    }
    int rc = intern_value(c->dev_codes, c->dev_table, obj, code);
    Py_DECREF(obj);
    if (rc < 0) {
        return -1;
    }
    if (has_value) {
        c->dev_cached = 1;
        c->last_dev = value;
        c->last_dev_code = *code;
    }
    return 0;
}

/* Room for one more row in the columnar arrays. */
static int
reserve_column_row(Ctx *c)
{
    if (c->col_rows < c->col_cap) {
        return 0;
    }
    Py_ssize_t cap = c->col_cap ? 2 * c->col_cap : 4096;
    void *dur = PyMem_Realloc(c->col_dur, (size_t)cap * sizeof(double));
    if (dur != NULL) {
        c->col_dur = dur;
    }
    void *ids = PyMem_Realloc(c->col_id, (size_t)cap * sizeof(int64_t));
    if (ids != NULL) {
        c->col_id = ids;
    }
    void *dev = PyMem_Realloc(c->col_dev, (size_t)cap * sizeof(int32_t));
    if (dev != NULL) {
        c->col_dev = dev;
    }
    void *name = PyMem_Realloc(c->col_name, (size_t)cap * sizeof(int32_t));
    if (name != NULL) {
        c->col_name = name;
    }
    void *type = PyMem_Realloc(c->col_type, (size_t)cap * sizeof(int32_t));
    if (type != NULL) {
        c->col_type = type;
    }
    if (dur == NULL || ids == NULL || dev == NULL || name == NULL || type == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    c->col_cap = cap;
    return 0;
}

static int
append_bytes(PyObject *column, const void *data, Py_ssize_t n)
{
    Py_ssize_t old = PyByteArray_Size(column);
    if (old < 0 || PyByteArray_Resize(column, old + n) < 0) {
        return -1;
    }
    if (n) {
        memcpy(PyByteArray_AsString(column) + old, data, (size_t)n);
    }
    return 0;
}

/* Append this call's columns to the caller's bytearrays (duration, id, device, name, type). */
static int
flush_columns(Ctx *c, PyObject *col_out)
{
    Py_ssize_t n = c->col_rows;
    if (append_bytes(PyList_GetItem(col_out, 0), c->col_dur, n * (Py_ssize_t)sizeof(double)) < 0
        || append_bytes(PyList_GetItem(col_out, 1), c->col_id, n * (Py_ssize_t)sizeof(int64_t)) < 0
        || append_bytes(PyList_GetItem(col_out, 2), c->col_dev, n * (Py_ssize_t)sizeof(int32_t)) < 0
        || append_bytes(PyList_GetItem(col_out, 3), c->col_name, n * (Py_ssize_t)sizeof(int32_t)) < 0
        || append_bytes(PyList_GetItem(col_out, 4), c->col_type, n * (Py_ssize_t)sizeof(int32_t)) < 0) {
        return -1;
    }
    return 0;
}

/* skipped[key] = skipped.get(key, 0) + 1, as _rows does for control rows */
static int
count_skipped(PyObject *skipped, const char *p, Py_ssize_t n)
{
    int rc = -1;
    PyObject *now = NULL;
    PyObject *key = PyUnicode_FromStringAndSize(p, n);
    PyObject *one = PyLong_FromLong(1);
    if (key == NULL || one == NULL) {
        goto done;
    }
    PyObject *old = PyDict_GetItemWithError(skipped, key); /* borrowed */
    if (old != NULL) {
        now = PyNumber_Add(old, one);
    }
    else if (!PyErr_Occurred()) {
        now = one;
        Py_INCREF(now);
    }
    if (now != NULL) {
        rc = PyDict_SetItem(skipped, key, now);
    }
done:
    Py_XDECREF(now);
    Py_XDECREF(one);
    Py_XDECREF(key);
    return rc;
}

/* One non-empty line p[0:n] (line end already stripped of the CRLF '\r'). */
static int
parse_row(Ctx *c, const char *p, Py_ssize_t n)
{
    const char *quote = memchr(p, '"', (size_t)n);
    Py_ssize_t first_quote = quote ? quote - p : n;
    /* The first k fields split on commas alone, exact only without a quote before the k-th
     * comma (Python's str.split path; otherwise it goes through csv). */
    Py_ssize_t i = 0, f = 0;
    while (f < c->k) {
        const char *comma = memchr(p + i, ',', (size_t)(n - i));
        if (comma == NULL) {
            c->ends[f] = n;
            break;
        }
        c->ends[f++] = comma - p;
        i = comma - p + 1;
    }
    if (first_quote < (f == c->k ? i : n)) {
        return ROW_FALLBACK;
    }
    /* The field count, on every row: the commas outside quotes. Quoting follows _parser.py's one
     * rule (RFC 4180): a quoted field opens with '"' at its start, doubles every '"' inside and
     * closes right before a comma or the line end. A row that breaks it (an odd quote, a quote
     * inside an unquoted field, text after a closing quote) or has the wrong count is an error,
     * which Python raises. The unquoted stretches are counted branch-free (the loop
     * vectorises); quoted text is skipped with memchr. */
    Py_ssize_t commas = f;
    while (i < n) {
        const char *open = quote ? memchr(p + i, '"', (size_t)(n - i)) : NULL;
        Py_ssize_t stop = open ? open - p : n;
        for (; i < stop; i++) {
            commas += p[i] == ',';
        }
        if (open == NULL) {
            break;
        }
        if (p[stop - 1] != ',') { /* stop >= 1: the k-th comma precedes every quote here */
            return ROW_FALLBACK;
        }
        for (i = stop + 1;;) {
            const char *close = memchr(p + i, '"', (size_t)(n - i));
            if (close == NULL) {
                return ROW_FALLBACK;
            }
            i = close - p + 1;
            if (i < n && p[i] == '"') { /* an escaped "" */
                i++;
                continue;
            }
            break;
        }
        if (i < n && p[i] != ',') {
            return ROW_FALLBACK;
        }
    }
    if (commas + 1 != c->ncols) {
        return ROW_FALLBACK;
    }

#define FIELD_START(ix) ((ix) == 0 ? 0 : c->ends[(ix) - 1] + 1)
    const char *tp = p + FIELD_START(c->i_type), *tq = p + c->ends[c->i_type];
    Py_ssize_t tn = tq - tp;
    if ((tn == 16 && memcmp(tp, "PROFILING_ENABLE", 16) == 0)
        || (tn == 17 && memcmp(tp, "PROFILING_DISABLE", 17) == 0)) {
        if (count_skipped(c->skipped, tp, tn) < 0) {
            return ROW_ERROR;
        }
        c->rows++;
        return ROW_DONE;
    }

    /* Everything is checked before anything is committed: a fallback must leave no trace. */
    double duration;
    int rc = plain_float(p + FIELD_START(c->i_dur), p + c->ends[c->i_dur], &duration);
    if (rc != ROW_DONE) {
        return rc;
    }
    if (!isfinite(duration)) { /* nan, inf, or beyond the float range (1e309): Python refuses it */
        return ROW_FALLBACK;
    }
    long long task_id = 0, device = 0;
    if (c->i_id >= 0 && !plain_int(p + FIELD_START(c->i_id), p + c->ends[c->i_id], &task_id)) {
        return ROW_FALLBACK;
    }
    if (c->i_dev >= 0 && !plain_int(p + FIELD_START(c->i_dev), p + c->ends[c->i_dev], &device)) {
        return ROW_FALLBACK;
    }
    if (c->ncounter) {
        rc = parse_counters(c, p, n);
        if (rc != ROW_DONE) {
            return rc;
        }
        if (reserve_counter_row(c) < 0) {
            return ROW_ERROR;
        }
    }
    int fallback = 0;
    const char *np = p + FIELD_START(c->i_name);
    PyObject *name = cache_str(&c->names, np, p + c->ends[c->i_name] - np, &fallback);
    if (name == NULL) {
        return fallback ? ROW_FALLBACK : ROW_ERROR;
    }
    PyObject *type = cache_str(&c->types, tp, tn, &fallback);
    if (type == NULL) {
        Py_DECREF(name);
        return fallback ? ROW_FALLBACK : ROW_ERROR;
    }
#undef FIELD_START

    if (c->columnar) {
        /* the strings stay owned by the caches; a row's values go to the C arrays */
        int32_t name_code, type_code, dev_code;
        CacheEntry *ne = &c->names.e[c->names.last], *te = &c->types.e[c->types.last];
        Py_DECREF(name);
        Py_DECREF(type);
        if (reserve_column_row(c) < 0 || entry_code(ne, c->name_codes, c->name_table, &name_code) < 0
            || entry_code(te, c->type_codes, c->type_table, &type_code) < 0
            || device_code(c, c->i_dev >= 0, device, &dev_code) < 0) {
            return ROW_ERROR;
        }
        Py_ssize_t r = c->col_rows++;
        c->col_dur[r] = duration;
        c->col_id[r] = c->i_id >= 0 ? (int64_t)task_id : NO_ID;
        c->col_dev[r] = dev_code;
        c->col_name[r] = name_code;
        c->col_type[r] = type_code;
        if (c->ncounter) {
            memcpy(c->cbuf + c->cbuf_rows * c->ncounter, c->rowv, (size_t)c->ncounter * sizeof(double));
            c->cbuf_rows++;
        }
        c->rows++;
        return ROW_DONE;
    }

    PyObject *id_obj, *dur_obj, *dev_obj;
    if (c->i_id >= 0) {
        id_obj = PyLong_FromLongLong(task_id);
    }
    else {
        id_obj = Py_None;
        Py_INCREF(id_obj);
    }
    dur_obj = PyFloat_FromDouble(duration);
    if (c->i_dev >= 0) {
        dev_obj = PyLong_FromLongLong(device);
    }
    else {
        dev_obj = c->default_device;
        Py_INCREF(dev_obj);
    }
    if (id_obj == NULL || dur_obj == NULL || dev_obj == NULL) {
        Py_XDECREF(id_obj);
        Py_XDECREF(dur_obj);
        Py_XDECREF(dev_obj);
        Py_DECREF(name);
        Py_DECREF(type);
        return ROW_ERROR;
    }
    PyObject *items[5] = {id_obj, name, type, dur_obj, dev_obj};
    PyObject *task = record_kind_new(&c->kind, items);
    if (task == NULL) {
        return ROW_ERROR;
    }
    /* The record holds only str, int, float and None and has no __dict__ (checked by the
     * caller), so it can never be part of a reference cycle: keep it out of the cyclic GC,
     * whose full passes would otherwise walk every task parsed so far. */
    if (c->untrack) {
        PyObject_GC_UnTrack(task);
    }
    rc = PyList_Append(c->out, task);
    Py_DECREF(task);
    if (rc < 0) {
        return ROW_ERROR;
    }
    if (c->ncounter) { /* room was reserved before the task was made */
        memcpy(c->cbuf + c->cbuf_rows * c->ncounter, c->rowv, (size_t)c->ncounter * sizeof(double));
        c->cbuf_rows++;
    }
    c->rows++;
    return ROW_DONE;
}

PyDoc_STRVAR(parse_rows_doc,
"parse_rows(out, buf, start, end, ncols, split_at, i_dev, i_id, i_name, i_type, i_dur,\n"
"           default_device, crlf, skipped, cls, max_line_length, counter_idx, counter_out,\n"
"           columnar, /)\n"
"--\n\n"
"Parse the '\\n'-separated lines of buf[start:end] (the last one ends at end) into cls\n"
"records appended to out, counting control rows in skipped. i_dev / i_id are -1 when the\n"
"CSV has no such column. For every record, the cells of the columns counter_idx (a tuple of\n"
"ascending indexes) are appended as native doubles (N/A: NaN) to the bytearrays of the list\n"
"counter_out, one per column. Stops at the first line Python must handle itself.\n\n"
"columnar is None (records), or (col_out, name_codes, name_table, type_codes, type_table,\n"
"dev_codes, dev_table): no record is made; each task appends its duration (double), id\n"
"(int64, INT64_MIN for none), and the int32 codes of its device, name and type to the five\n"
"bytearrays of col_out, codes taken from (and new values added to) the interning dicts and\n"
"lists.\n\n"
"Returns (data_rows, lines, stop, fallback): the data rows and lines consumed, and where it\n"
"stopped; fallback is True when the line starting at stop is left to Python, False when\n"
"everything up to end was consumed (stop == end).");

static PyObject *
parse_rows(PyObject *Py_UNUSED(module), PyObject *args)
{
    PyObject *out, *buf, *default_device, *skipped, *cls, *counter_idx, *counter_out, *columnar;
    Py_ssize_t start, end, ncols, k, i_dev, i_id, i_name, i_type, i_dur, limit;
    int crlf;
    if (!PyArg_ParseTuple(args, "O!O!nnnnnnnnnOpO!OnO!O!O:parse_rows", &PyList_Type, &out, &PyBytes_Type,
                          &buf, &start, &end, &ncols, &k, &i_dev, &i_id, &i_name, &i_type, &i_dur,
                          &default_device, &crlf, &PyDict_Type, &skipped, &cls, &limit, &PyTuple_Type,
                          &counter_idx, &PyList_Type, &counter_out, &columnar)) {
        return NULL;
    }
    PyObject *col_out = NULL;
    if (columnar != Py_None) {
        if (!PyTuple_Check(columnar) || PyTuple_Size(columnar) != 7) {
            PyErr_SetString(PyExc_TypeError, "parse_rows: columnar must be None or a 7-tuple");
            return NULL;
        }
        col_out = PyTuple_GetItem(columnar, 0);
        if (!PyList_Check(col_out) || PyList_Size(col_out) != 5) {
            PyErr_SetString(PyExc_TypeError, "parse_rows: col_out must be a list of 5 bytearrays");
            return NULL;
        }
        for (Py_ssize_t j = 0; j < 5; j++) {
            if (!PyByteArray_Check(PyList_GetItem(col_out, j))) {
                PyErr_SetString(PyExc_TypeError, "parse_rows: col_out must be a list of 5 bytearrays");
                return NULL;
            }
        }
        for (Py_ssize_t j = 1; j < 7; j++) {
            PyObject *item = PyTuple_GetItem(columnar, j);
            if (j % 2 ? !PyDict_Check(item) : !PyList_Check(item)) {
                PyErr_SetString(PyExc_TypeError, "parse_rows: interning tables must be dict, list pairs");
                return NULL;
            }
        }
    }
    char *base;
    Py_ssize_t size;
    if (PyBytes_AsStringAndSize(buf, &base, &size) < 0) {
        return NULL;
    }
    if (start < 0 || start > end || end > size) {
        PyErr_SetString(PyExc_ValueError, "parse_rows: need 0 <= start <= end <= len(buf)");
        return NULL;
    }
    if (k < 1 || ncols < k || i_name < 0 || i_name >= k || i_type < 0 || i_type >= k || i_dur < 0
        || i_dur >= k || i_dev < -1 || i_dev >= k || i_id < -1 || i_id >= k) {
        PyErr_SetString(PyExc_ValueError, "parse_rows: column indexes must lie in [0, split_at)");
        return NULL;
    }
    Ctx c;
    memset(&c, 0, sizeof c);
    c.out = out;
    c.default_device = default_device;
    c.skipped = skipped;
    c.untrack = default_device == Py_None || PyLong_CheckExact(default_device);
    if (col_out != NULL) {
        c.columnar = 1;
        c.name_codes = PyTuple_GetItem(columnar, 1);
        c.name_table = PyTuple_GetItem(columnar, 2);
        c.type_codes = PyTuple_GetItem(columnar, 3);
        c.type_table = PyTuple_GetItem(columnar, 4);
        c.dev_codes = PyTuple_GetItem(columnar, 5);
        c.dev_table = PyTuple_GetItem(columnar, 6);
    }
    c.ncols = ncols;
    c.k = k;
    c.i_dev = i_dev;
    c.i_id = i_id;
    c.i_name = i_name;
    c.i_type = i_type;
    c.i_dur = i_dur;
    c.ncounter = PyTuple_Size(counter_idx);
    if (c.ncounter != PyList_Size(counter_out)) {
        PyErr_SetString(PyExc_ValueError, "parse_rows: counter_idx and counter_out differ in length");
        return NULL;
    }
    for (Py_ssize_t j = 0; j < c.ncounter; j++) {
        if (!PyByteArray_Check(PyList_GetItem(counter_out, j))) {
            PyErr_SetString(PyExc_TypeError, "parse_rows: counter_out must hold bytearrays");
            return NULL;
        }
    }
    c.ends = PyMem_Malloc((size_t)k * sizeof(Py_ssize_t));
    c.cidx = PyMem_Malloc((size_t)(c.ncounter + 1) * sizeof(Py_ssize_t));
    c.rowv = PyMem_Malloc((size_t)(c.ncounter + 1) * sizeof(double));
    if (c.ends == NULL || c.cidx == NULL || c.rowv == NULL) {
        PyMem_Free(c.ends);
        PyMem_Free(c.cidx);
        PyMem_Free(c.rowv);
        return PyErr_NoMemory();
    }
    for (Py_ssize_t j = 0; j < c.ncounter; j++) {
        Py_ssize_t index = PyLong_AsSsize_t(PyTuple_GetItem(counter_idx, j));
        if ((index == -1 && PyErr_Occurred()) || index < 0 || index >= ncols
            || (j > 0 && index <= c.cidx[j - 1])) {
            if (!PyErr_Occurred()) {
                PyErr_SetString(PyExc_ValueError,
                                "parse_rows: counter_idx must ascend strictly within [0, ncols)");
            }
            PyMem_Free(c.ends);
            PyMem_Free(c.cidx);
            PyMem_Free(c.rowv);
            return NULL;
        }
        c.cidx[j] = index;
    }
    /* Checked last, as the only step that holds references to release (record_kind_clear). */
    if (record_kind_init(&c.kind, cls, 5, "parse_rows: cls") < 0) {
        PyMem_Free(c.ends);
        PyMem_Free(c.cidx);
        PyMem_Free(c.rowv);
        return NULL;
    }

    Py_ssize_t lines = 0, pos = start;
    int fallback = 0, failed = 0;
    for (;;) {
        const char *p = base + pos;
        const char *nl = memchr(p, '\n', (size_t)(end - pos));
        const char *q = nl ? nl : base + end;
        /* A byte count within the limit is a character count within it; over it, Python
         * counts the characters. */
        if (q - p > limit) {
            fallback = 1;
            break;
        }
        if (crlf && q > p && q[-1] == '\r') {
            q--;
        }
        if (q > p) { /* an empty line is no data row, but it is a line */
            int rc = parse_row(&c, p, q - p);
            if (rc == ROW_ERROR) {
                failed = 1;
                break;
            }
            if (rc == ROW_FALLBACK) {
                fallback = 1;
                break;
            }
        }
        lines++;
        if (nl == NULL) {
            pos = end;
            break;
        }
        pos = nl - base + 1;
    }
    if (!failed && c.ncounter && flush_counters(&c, counter_out) < 0) {
        failed = 1;
    }
    if (!failed && c.columnar && flush_columns(&c, col_out) < 0) {
        failed = 1;
    }
    PyMem_Free(c.col_dur);
    PyMem_Free(c.col_id);
    PyMem_Free(c.col_dev);
    PyMem_Free(c.col_name);
    PyMem_Free(c.col_type);
    PyMem_Free(c.ends);
    PyMem_Free(c.cidx);
    PyMem_Free(c.rowv);
    PyMem_Free(c.cbuf);
    cache_clear(&c.names);
    cache_clear(&c.types);
    record_kind_clear(&c.kind);
    if (failed) {
        return NULL;
    }
    return Py_BuildValue("nnnO", c.rows, lines, pos, fallback ? Py_True : Py_False);
}


/* -- columnar statistics ---------------------------------------------------------------------- */

/* The bytes of a bytes or bytearray argument (the stable ABI of 3.10 has no buffer protocol). */
static int
raw_bytes(PyObject *obj, char **data, Py_ssize_t *size)
{
    if (PyByteArray_Check(obj)) {
        *data = PyByteArray_AsString(obj);
        *size = PyByteArray_Size(obj);
        return 0;
    }
    if (PyBytes_Check(obj)) {
        return PyBytes_AsStringAndSize(obj, data, size);
    }
    PyErr_SetString(PyExc_TypeError, "expected bytes or bytearray");
    return -1;
}

PyDoc_STRVAR(group_rows_doc,
"group_rows(devices, names, ndevices, nnames, skip, /)\n"
"--\n\n"
"Group rows by (device code, name code), both int32 arrays given as bytes/bytearray, codes in\n"
"[0, ndevices) and [0, nnames). Groups come in the order of their first row, rows in file\n"
"order; the first skip rows of each group are dropped, and groups with no more rows than\n"
"skip are left out. Returns (keys, order, starts): keys a list of (device code, name code,\n"
"index of the group's first row, before skip),\n"
"order the kept row indexes group after group (int32, as bytes), starts the offset of each\n"
"group in order plus the end (a list of len(keys) + 1 ints).");

static PyObject *
group_rows(PyObject *Py_UNUSED(module), PyObject *args)
{
    PyObject *dev_obj, *name_obj;
    Py_ssize_t ndev, nnames, skip;
    if (!PyArg_ParseTuple(args, "OOnnn:group_rows", &dev_obj, &name_obj, &ndev, &nnames, &skip)) {
        return NULL;
    }
    char *dev_raw, *name_raw;
    Py_ssize_t dev_size, name_size;
    if (raw_bytes(dev_obj, &dev_raw, &dev_size) < 0 || raw_bytes(name_obj, &name_raw, &name_size) < 0) {
        return NULL;
    }
    if (dev_size != name_size || dev_size % 4 || ndev < 0 || nnames < 0 || skip < 0) {
        PyErr_SetString(PyExc_ValueError, "group_rows: columns of different lengths or bad counts");
        return NULL;
    }
    Py_ssize_t n = dev_size / 4;
    if (n > INT32_MAX) {
        PyErr_SetString(PyExc_OverflowError, "group_rows: too many rows");
        return NULL;
    }
    const int32_t *dev = (const int32_t *)dev_raw, *name = (const int32_t *)name_raw;
    /* pair -> group: a dense ndev x nnames table while it is small against the rows; else an
     * open-addressing hash of twice the rows (16,384 rows of distinct devices and names would
     * make the dense table 1 GiB). */
    int dense = nnames == 0 || (ndev <= (n * 2 + 4096) / nnames);
    Py_ssize_t cells = dense ? ndev * nnames : 2;
    int bits = 1;
    while (!dense && cells < 2 * (n + 1)) {
        cells *= 2;
        bits++;
    }
    int32_t *group_of = PyMem_Malloc((size_t)(cells + 1) * sizeof(int32_t));
    uint64_t *pair_of = dense ? NULL : PyMem_Malloc((size_t)cells * sizeof(uint64_t)); /* hash keys */
    int32_t *row_group = PyMem_Malloc((size_t)(n + 1) * sizeof(int32_t));
    Py_ssize_t *count = NULL, *pos = NULL;
    int32_t *first = NULL;
    PyObject *keys = NULL, *order = NULL, *starts = NULL, *result = NULL;
    if (group_of == NULL || row_group == NULL || (!dense && pair_of == NULL)) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; i < cells; i++) {
        group_of[i] = -1;
    }
    Py_ssize_t ngroups = 0, cap = 64;
    count = PyMem_Malloc((size_t)cap * sizeof(Py_ssize_t));
    first = PyMem_Malloc((size_t)cap * sizeof(int32_t));
    if (count == NULL || first == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        int32_t d = dev[i], m = name[i];
        if (d < 0 || d >= ndev || m < 0 || m >= nnames) {
            PyErr_SetString(PyExc_ValueError, "group_rows: a code out of range");
            goto done;
        }
        int32_t *slot;
        if (dense) {
            slot = &group_of[(Py_ssize_t)d * nnames + m];
        }
        else {
            uint64_t pair = ((uint64_t)(uint32_t)d << 32) | (uint32_t)m;
            size_t mask = (size_t)cells - 1, h = (size_t)((pair * 0x9E3779B97F4A7C15ULL) >> (64 - bits));
            while (group_of[h] >= 0 && pair_of[h] != pair) {
                h = (h + 1) & mask;
            }
            pair_of[h] = pair;
            slot = &group_of[h];
        }
        if (*slot < 0) {
            if (ngroups == cap) {
                cap *= 2;
                Py_ssize_t *c2 = PyMem_Realloc(count, (size_t)cap * sizeof(Py_ssize_t));
                if (c2 != NULL) {
                    count = c2;
                }
                int32_t *f2 = PyMem_Realloc(first, (size_t)cap * sizeof(int32_t));
                if (f2 != NULL) {
                    first = f2;
                }
                if (c2 == NULL || f2 == NULL) {
                    PyErr_NoMemory();
                    goto done;
                }
            }
            first[ngroups] = (int32_t)i;
            count[ngroups] = 0;
            *slot = (int32_t)ngroups++;
        }
        row_group[i] = *slot;
        count[*slot]++;
    }
    /* the kept groups' offsets (pos[g]: where group g's next kept row goes; -1: left out) */
    pos = PyMem_Malloc((size_t)(ngroups + 1) * sizeof(Py_ssize_t));
    keys = PyList_New(0);
    starts = PyList_New(0);
    if (pos == NULL || keys == NULL || starts == NULL) {
        if (pos == NULL) {
            PyErr_NoMemory();
        }
        goto done;
    }
    Py_ssize_t total = 0;
    for (Py_ssize_t g = 0; g < ngroups; g++) {
        if (count[g] <= skip && skip) {
            pos[g] = -1;
            continue;
        }
        pos[g] = total;
        PyObject *start = PyLong_FromSsize_t(total);
        PyObject *key = Py_BuildValue("(iin)", dev[first[g]], name[first[g]], (Py_ssize_t)first[g]);
        int bad = start == NULL || key == NULL || PyList_Append(starts, start) < 0
                  || PyList_Append(keys, key) < 0;
        Py_XDECREF(start);
        Py_XDECREF(key);
        if (bad) {
            goto done;
        }
        total += count[g] - skip;
        count[g] = 0; /* from here: rows of the group seen so far */
    }
    PyObject *end = PyLong_FromSsize_t(total);
    if (end == NULL || PyList_Append(starts, end) < 0) {
        Py_XDECREF(end);
        goto done;
    }
    Py_DECREF(end);
    order = PyBytes_FromStringAndSize(NULL, total * 4);
    if (order == NULL) {
        goto done;
    }
    int32_t *out = (int32_t *)PyBytes_AsString(order);
    for (Py_ssize_t i = 0; i < n; i++) {
        int32_t g = row_group[i];
        if (pos[g] < 0) {
            continue;
        }
        if (count[g]++ < skip) {
            continue;
        }
        out[pos[g]++] = (int32_t)i;
    }
    result = Py_BuildValue("(OOO)", keys, order, starts);
done:
    PyMem_Free(group_of);
    PyMem_Free(pair_of);
    PyMem_Free(row_group);
    PyMem_Free(count);
    PyMem_Free(first);
    PyMem_Free(pos);
    Py_XDECREF(keys);
    Py_XDECREF(order);
    Py_XDECREF(starts);
    return result;
}

PyDoc_STRVAR(take_doc,
"take(values, order, start, stop, drop_nan, /)\n"
"--\n\n"
"values[order[i]] for i in range(start, stop): values native doubles, order int32 indexes (both\n"
"bytes/bytearray); NaN left out when drop_nan. Returns the doubles as bytes.");

static PyObject *
take(PyObject *Py_UNUSED(module), PyObject *args)
{
    PyObject *values_obj, *order_obj;
    Py_ssize_t start, stop;
    int drop_nan;
    if (!PyArg_ParseTuple(args, "OOnnp:take", &values_obj, &order_obj, &start, &stop, &drop_nan)) {
        return NULL;
    }
    char *values_raw, *order_raw;
    Py_ssize_t values_size, order_size;
    if (raw_bytes(values_obj, &values_raw, &values_size) < 0
        || raw_bytes(order_obj, &order_raw, &order_size) < 0) {
        return NULL;
    }
    Py_ssize_t n = values_size / (Py_ssize_t)sizeof(double);
    if (start < 0 || stop < start || stop > order_size / 4) {
        PyErr_SetString(PyExc_ValueError, "take: need 0 <= start <= stop <= len(order)");
        return NULL;
    }
    const double *values = (const double *)values_raw;
    const int32_t *order = (const int32_t *)order_raw;
    PyObject *out = PyBytes_FromStringAndSize(NULL, (stop - start) * (Py_ssize_t)sizeof(double));
    if (out == NULL) {
        return NULL;
    }
    double *dst = (double *)PyBytes_AsString(out);
    Py_ssize_t kept = 0;
    for (Py_ssize_t i = start; i < stop; i++) {
        int32_t row = order[i];
        if (row < 0 || row >= n) {
            Py_DECREF(out);
            PyErr_SetString(PyExc_IndexError, "take: a row index out of range");
            return NULL;
        }
        double v = values[row];
        if (drop_nan && v != v) {
            continue;
        }
        dst[kept++] = v;
    }
    if (kept != stop - start) {
        PyObject *cut = PyBytes_FromStringAndSize((const char *)dst, kept * (Py_ssize_t)sizeof(double));
        Py_DECREF(out);
        return cut;
    }
    return out;
}

static void
swap_d(double *a, Py_ssize_t i, Py_ssize_t j)
{
    double t = a[i];
    a[i] = a[j];
    a[j] = t;
}

static int
cmp_double(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

/* Partially order a[lo:hi] so that a[k] compares equal to the k-th smallest (quickselect with
 * a three-way partition, median-of-three pivots, and qsort when it stops narrowing). */
static void
select_kth(double *a, Py_ssize_t lo, Py_ssize_t hi, Py_ssize_t k)
{
    int budget = 64;
    while (hi - lo > 16) {
        if (budget-- == 0) {
            qsort(a + lo, (size_t)(hi - lo), sizeof(double), cmp_double);
            return;
        }
        double x = a[lo], y = a[lo + (hi - lo) / 2], z = a[hi - 1];
        double pivot = x < y ? (y < z ? y : (x < z ? z : x)) : (x < z ? x : (y < z ? z : y));
        Py_ssize_t lt = lo, i = lo, gt = hi;
        while (i < gt) {
            if (a[i] < pivot) {
                swap_d(a, lt++, i++);
            }
            else if (a[i] > pivot) {
                swap_d(a, i, --gt);
            }
            else {
                i++;
            }
        }
        if (k < lt) {
            hi = lt;
        }
        else if (k >= gt) {
            lo = gt;
        }
        else {
            return;
        }
    }
    for (Py_ssize_t i = lo + 1; i < hi; i++) { /* insertion sort: stable enough, ties are equal */
        double v = a[i];
        Py_ssize_t j = i;
        while (j > lo && a[j - 1] > v) {
            a[j] = a[j - 1];
            j--;
        }
        a[j] = v;
    }
}

PyDoc_STRVAR(order_stats_doc,
"order_stats(values, ranks, /)\n"
"--\n\n"
"sorted(values)[r] for every r of ranks (ascending ints), values native doubles without NaN\n"
"as bytes/bytearray. Exactly what Python's stable sort gives, the sign of zero included: a\n"
"rank inside the run of zeros takes the zero at that place in file order.");

static PyObject *
order_stats(PyObject *Py_UNUSED(module), PyObject *args)
{
    PyObject *values_obj, *ranks;
    if (!PyArg_ParseTuple(args, "OO!:order_stats", &values_obj, &PyTuple_Type, &ranks)) {
        return NULL;
    }
    char *raw;
    Py_ssize_t size;
    if (raw_bytes(values_obj, &raw, &size) < 0) {
        return NULL;
    }
    Py_ssize_t n = size / (Py_ssize_t)sizeof(double);
    Py_ssize_t nranks = PyTuple_Size(ranks);
    const double *values = (const double *)raw;
    double *a = PyMem_Malloc((size_t)(n + 1) * sizeof(double));
    PyObject *out = PyTuple_New(nranks);
    if (a == NULL || out == NULL) {
        PyMem_Free(a);
        Py_XDECREF(out);
        return a == NULL ? PyErr_NoMemory() : NULL;
    }
    memcpy(a, values, (size_t)n * sizeof(double));
    Py_ssize_t lo = 0, last = -1, negatives = -1;
    for (Py_ssize_t j = 0; j < nranks; j++) {
        Py_ssize_t r = PyLong_AsSsize_t(PyTuple_GetItem(ranks, j));
        if ((r == -1 && PyErr_Occurred()) || r < 0 || r >= n || r < last) {
            if (!PyErr_Occurred()) {
                PyErr_SetString(PyExc_ValueError, "order_stats: ranks must ascend within [0, len(values))");
            }
            PyMem_Free(a);
            Py_DECREF(out);
            return NULL;
        }
        if (r != last) {
            select_kth(a, lo, n, r);
            lo = r + 1;
            last = r;
        }
        double v = a[r];
        if (v == 0.0) { /* the stable sort's zero: the (r - negatives)-th zero in file order */
            if (negatives < 0) {
                negatives = 0;
                for (Py_ssize_t i = 0; i < n; i++) {
                    negatives += values[i] < 0.0;
                }
            }
            Py_ssize_t want = r - negatives;
            for (Py_ssize_t i = 0; i < n; i++) {
                if (values[i] == 0.0 && want-- == 0) {
                    v = values[i];
                    break;
                }
            }
        }
        PyObject *item = PyFloat_FromDouble(v);
        if (item == NULL) {
            PyMem_Free(a);
            Py_DECREF(out);
            return NULL;
        }
        PyTuple_SetItem(out, j, item);
    }
    PyMem_Free(a);
    return out;
}

PyDoc_STRVAR(fsum_doc,
"fsum(values, /)\n"
"--\n\n"
"math.fsum() of native doubles (bytes/bytearray), by the same algorithm (Shewchuk's partials\n"
"and its final half-even correction), so the same correctly rounded value. None when a partial\n"
"is not finite (an inf or nan value, or an intermediate overflow): math.fsum decides those.");

static PyObject *
fsum(PyObject *Py_UNUSED(module), PyObject *arg)
{
    char *raw;
    Py_ssize_t size;
    if (raw_bytes(arg, &raw, &size) < 0) {
        return NULL;
    }
    const double *v = (const double *)raw;
    Py_ssize_t count = size / (Py_ssize_t)sizeof(double);
    Py_ssize_t n = 0, m = 32;
    double *p = PyMem_Malloc((size_t)m * sizeof(double));
    if (p == NULL) {
        return PyErr_NoMemory();
    }
    double x, y, t, hi, yr, lo = 0.0;
    for (Py_ssize_t k = 0; k < count; k++) {
        x = v[k];
        Py_ssize_t i = 0;
        for (Py_ssize_t j = 0; j < n; j++) {
            y = p[j];
            if (fabs(x) < fabs(y)) {
                t = x;
                x = y;
                y = t;
            }
            hi = x + y;
            yr = hi - x;
            lo = y - yr;
            if (lo != 0.0) {
                p[i++] = lo;
            }
            x = hi;
        }
        n = i;
        if (x != 0.0) {
            if (!isfinite(x)) {
                PyMem_Free(p);
                Py_RETURN_NONE;
            }
            if (n >= m) {
                double *grown = PyMem_Realloc(p, (size_t)(2 * m) * sizeof(double));
                if (grown == NULL) {
                    PyMem_Free(p);
                    return PyErr_NoMemory();
                }
                p = grown;
                m *= 2;
            }
            p[n++] = x;
        }
    }
    hi = 0.0;
    if (n > 0) {
        hi = p[--n];
        while (n > 0) { /* the exact sum from the top, until it becomes inexact */
            x = hi;
            y = p[--n];
            hi = x + y;
            yr = hi - x;
            lo = y - yr;
            if (lo != 0.0) {
                break;
            }
        }
        if (n > 0 && ((lo < 0.0 && p[n - 1] < 0.0) || (lo > 0.0 && p[n - 1] > 0.0))) {
            y = lo * 2.0; /* half-even rounding across several partials */
            x = hi + y;
            yr = x - hi;
            if (y == yr) {
                hi = x;
            }
        }
    }
    PyMem_Free(p);
    return PyFloat_FromDouble(hi);
}

static PyMethodDef methods[] = {
    {"parse_rows", parse_rows, METH_VARARGS, parse_rows_doc},
    {"group_rows", group_rows, METH_VARARGS, group_rows_doc},
    {"take", take, METH_VARARGS, take_doc},
    {"order_stats", order_stats, METH_VARARGS, order_stats_doc},
    {"fsum", fsum, METH_O, fsum_doc},
    {NULL, NULL, 0, NULL},
};

static int
module_exec(PyObject *m)
{
    if (record_new_init() < 0) {
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
    "asc_aprof._plans._cparser",
    "C row loop for asc_aprof._plans._parser.TaskParser (optional accelerator; see _parser.py).",
    0,
    methods,
    slots,
    NULL,
    NULL,
    NULL,
};

PyMODINIT_FUNC
PyInit__cparser(void)
{
    return PyModuleDef_Init(&module);
}
