/* asc_aprof._plans._raw._chost: the raw reader's host call tree in C (an optional accelerator).
 *
 * host_tables() does what _host._host_tables_py does with a run's host records (lists of
 * api_event, node_basic_info, tensor_info and task_track record tuples; or, for all but
 * tensor_info, their files' contents (bytes or a memory map, see _rawdata.h), read in place
 * without making a record object): the runtime tasks in the exporter's order (flips counted,
 * groups sorted), every thread's queue sorted by (time, level, order added), the call tree
 * built and walked in one pass, and the host tasks and GE tasks made from each task record and
 * its node launch. It returns the two
 * lists, or None when a record is not what the decoders make (not a list of tuples of the
 * expected size, a field that is not an int in [0, 2**64)): Python then runs its own loops,
 * which say what is wrong. in_place() tells whether a file's bytes may be handed over as they
 * are: every record one its decoder keeps or drops without a decline.
 *
 * Everything that depends on a name or a table (type names, kernel and node names, GE types,
 * which api_event calls are skipped) is asked of Python through the callbacks in `lookups`, once
 * per distinct key, and every decline is raised by Python's _fail(code, value), so the errors
 * (reason, message, and which comes first) are the pure loops'. The loops visit the records in
 * the pure loops' order, so a callback that raises raises what the pure loops would raise there.
 *
 * lean_new() and the calls after it (the lean walk, its own section below) make the GE tasks
 * alone, packed, from the host files fed a piece at a time, where only op_summary's rows are read
 * at task time level 1: the calls kept as sorted intervals instead of one queue of every record.
 *
 * Every loop over a run's records passes release points (_release.h), and the big sorts run
 * with the GIL released, so that an event loop in another thread keeps running meanwhile.
 *
 * Only the stable ABI (Python >= 3.10) is used, so one build serves every later version.
 */
#ifndef Py_LIMITED_API
#define Py_LIMITED_API 0x030A0000
#endif
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "../_record_new.h"
#include "_gepack.h"
#include "_rawdata.h"
#include "_release.h"

/* Queue levels (as _host.py numbers them) and the codes _host._api_level returns. */
enum { ROOT = 0, ACL = 1, NODE = 3, TASK = 5, SKIPPED = -1, OTHER_LEVEL = -2 };
/* Entry kinds. */
enum { K_API = 0, K_BASIC = 1, K_TENSOR = 2, K_TRACK = 3 };
/* Decline codes of _host._fail (same numbers as _host.py). */
enum { F_OTHER_API_LEVEL = 0, F_NESTED_NODE, F_TOO_DEEP, F_DPU, F_BATCHED, F_WRAPPED,
       F_CONTEXTS_AT_LEVEL1, F_NO_BASIC_AT_LEVEL1, F_HCCL_NODE, F_OUTSIDE_NODE };
/* Flags of a runtime task type (_host._c_track_type). */
enum { T_FLIP = 1, T_MAINTENANCE = 2, T_CONTEXTS = 4, T_MIX = 8, T_KERNEL = 16 };
/* Flags of a node name (_host._c_node_name), kinds of a node_basic_info payload. */
enum { N_EMPTY = 1, N_LCCL = 2 };
enum { B_PLAIN = 0, B_FFTS_PLUS = 1, B_HCCL = 2 };

#define DEPTH_LIMIT 20 /* deepest nesting the exporter follows (_host._DEPTH_LIMIT) */
#define RUNTIME_LEVEL 5000u
#define NODE_LEVEL 10000u

/* The lookups tuple, in this order (see _host._c_lookups). */
enum { L_API_LEVEL, L_NODE_NAME, L_BASIC, L_TRACK_TYPE, L_KERNEL_NAME, L_REQUIRE, L_FAIL, L_NA,
       L_INVALID, L_HOST_TASK, L_GE_TASK, L_COUNT };

/* -- a small open-addressing map from a pair of 64-bit keys to an int64 ----------------------- */

typedef struct {
    uint64_t a, b;
    int64_t v;
    int used;
} Slot;

typedef struct {
    Slot *s;
    size_t cap, n;
    Slot *last; /* the slot found last (keys repeat in runs): checked before hashing */
} Map;

static size_t
slot_of(uint64_t a, uint64_t b, size_t mask)
{
    uint64_t h = a * 0x9E3779B97F4A7C15ull ^ (b + 0x632BE59BD9B4E019ull) * 0xC2B2AE3D27D4EB4Full;
    h ^= h >> 29;
    h *= 0xBF58476D1CE4E5B9ull;
    h ^= h >> 32;
    return (size_t)h & mask;
}

static int
map_init(Map *m, size_t hint)
{
    size_t cap = 16;
    while (cap < 2 * hint + 2) {
        cap *= 2;
    }
    m->s = PyMem_Calloc(cap, sizeof(Slot));
    m->cap = cap;
    m->n = 0;
    m->last = NULL;
    if (m->s == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    return 0;
}

static void
map_free(Map *m)
{
    PyMem_Free(m->s);
    m->s = NULL;
}

/* The value slot of (a, b); a new key gets *fresh = 1 and value -1. NULL: out of memory. */
static int64_t *
map_get(Map *m, uint64_t a, uint64_t b, int *fresh)
{
    if (m->last != NULL && m->last->a == a && m->last->b == b) {
        *fresh = 0;
        return &m->last->v;
    }
    if (2 * (m->n + 1) > m->cap) {
        size_t cap = m->cap * 2;
        Slot *s = PyMem_Calloc(cap, sizeof(Slot));
        if (s == NULL) {
            PyErr_NoMemory();
            return NULL;
        }
        for (size_t i = 0; i < m->cap; i++) {
            RELEASE_POINT(i, RELEASE_PLAIN);
            if (m->s[i].used) {
                size_t j = slot_of(m->s[i].a, m->s[i].b, cap - 1);
                while (s[j].used) {
                    j = (j + 1) & (cap - 1);
                }
                s[j] = m->s[i];
            }
        }
        PyMem_Free(m->s);
        m->s = s;
        m->last = NULL;
        m->cap = cap;
    }
    size_t j = slot_of(a, b, m->cap - 1);
    while (m->s[j].used) {
        if (m->s[j].a == a && m->s[j].b == b) {
            *fresh = 0;
            m->last = m->s + j;
            return &m->s[j].v;
        }
        j = (j + 1) & (m->cap - 1);
    }
    m->last = m->s + j;
    m->s[j].used = 1;
    m->s[j].a = a;
    m->s[j].b = b;
    m->s[j].v = -1;
    m->n++;
    *fresh = 1;
    return &m->s[j].v;
}

/* The value of (a, b), NULL when absent. */
static const int64_t *
map_find(const Map *m, uint64_t a, uint64_t b)
{
    size_t j = slot_of(a, b, m->cap - 1);
    while (m->s[j].used) {
        if (m->s[j].a == a && m->s[j].b == b) {
            return &m->s[j].v;
        }
        j = (j + 1) & (m->cap - 1);
    }
    return NULL;
}

/* -- records --------------------------------------------------------------------------------- */

typedef struct {
    uint64_t ts, bound;
    int64_t seq;
    int32_t level, kind, payload, thread;
} Entry;

typedef struct {
    PyObject *name; /* borrowed (kept alive by the keep list) */
    int flags;      /* N_EMPTY, N_LCCL */
    uint64_t start, bound;
    int32_t basic;  /* index into the payloads, -1: no node_basic_info attached */
    int others;     /* a tensor_info record attached */
} Node;

typedef struct {
    PyObject *payload; /* _NodeBasic (task_type, block_num, mix_block_num), borrowed */
    int kind;
} Basic;

typedef struct {
    /* device, stream, task and timestamp as objects: the record's (borrowed) when the records
     * are tuples; made when first needed (owned) when they are read in place */
    PyObject *obj[4];
    PyObject *ttype, *kname;
    int tflags, na; /* the type's flags; the kernel name is N/A */
    uint64_t ts, device, stream, thread, task;
} Track;

enum { O_DEVICE, O_STREAM, O_TASK, O_TS };

/* Where a kind of records comes from: a list of record tuples, or the raw file bytes read in
 * place (every record already checked by Python: host magic, known level, see _decode.py). */
typedef struct {
    PyObject *list;
    const unsigned char *buf; /* the whole records (a torn head dropped) */
    Py_ssize_t n, size;
} Source;

typedef struct {
    PyObject *lookups[L_COUNT];
    PyObject *keep; /* owns every callback result the arrays below borrow */
    PyObject *zero, *invalid;
    ObjVec host_out, ge_out; /* the tables in the making */
    allocfunc host_alloc, ge_alloc;
    int level0, untrack;
    int keys_only;      /* no host task records: their ids only, checked to come once each */
    uint64_t *keys;     /* keys_only: each host task's ids packed (see host_key) */
    Py_ssize_t nkeys, capkeys;
    int fallback;       /* keys_only: ids too large to pack (the pure loops make the records) */
    PyObject *let_go;   /* the list that holds the sources read in place: emptied once read */
    Node *nodes;
    Basic *basics;
    Track *tracks;
    Py_ssize_t nnodes, nbasics, ntracks;
    int own_track_objs; /* the tracks' obj[] are owned (records read in place) */
} Ctx;

/* A little-endian field (in_place() refuses raw records on a big-endian host). */
static uint64_t
le(const unsigned char *p, int bytes)
{
    uint16_t v2;
    uint32_t v4;
    uint64_t v8;
    switch (bytes) {
    case 2:
        memcpy(&v2, p, 2);
        return v2;
    case 4:
        memcpy(&v4, p, 4);
        return v4;
    default:
        memcpy(&v8, p, 8);
        return v8;
    }
}

static int
little_endian(void)
{
    const uint16_t one = 1;
    unsigned char first;
    memcpy(&first, &one, 1);
    return first == 1;
}

/* Field at (offset, bytes) of raw host records, as their tuples number them. */
typedef struct {
    int offset, bytes;
} Raw;

static int
known_level(uint64_t level)
{
    switch (level) {
    case 30000: case 25000: case 20500: case 20000: case 15000: case 10000: case 6000: case 5500: case 5000:
        return 1;
    default:
        return 0;
    }
}

/* Record i of src: its fields (tuple index idx[j], raw layout raw[j]) into out[]. 1: read;
 * 0: not what the decoders make (the caller falls back); -1: error. */
static int fields(PyObject *rec, Py_ssize_t n, const int *idx, int k, uint64_t *out);

static int
record(const Source *src, Py_ssize_t i, Py_ssize_t n, const int *idx, const Raw *raw, int k, uint64_t *out,
       PyObject **rec)
{
    if (src->list != NULL) {
        *rec = PyList_GetItem(src->list, i);
        return fields(*rec, n, idx, k, out);
    }
    const unsigned char *p = src->buf + i * src->size;
    *rec = NULL;
    if (le(p, 2) != 0x5A5A || !known_level(le(p + 2, 2))) {
        return 0; /* Python checks this before; should it not have, its decoder says what is wrong */
    }
    for (int j = 0; j < k; j++) {
        out[j] = le(p + raw[j].offset, raw[j].bytes);
    }
    return 1;
}

/* Field index of record rec (NULL: read in place, value v) as a new reference. */
static PyObject *
field_obj(PyObject *rec, int index, uint64_t v)
{
    if (rec == NULL) {
        return PyLong_FromUnsignedLongLong(v);
    }
    PyObject *item = PyTuple_GetItem(rec, index);
    Py_XINCREF(item);
    return item;
}

/* The track's field as an object (borrowed from the track). */
static PyObject *
track_obj(Track *t, int which)
{
    if (t->obj[which] == NULL) {
        uint64_t v = which == O_DEVICE ? t->device : which == O_STREAM ? t->stream : which == O_TASK ? t->task : t->ts;
        t->obj[which] = PyLong_FromUnsignedLongLong(v);
    }
    return t->obj[which];
}

/* 1: the n-tuple's fields at idx[] as uint64 in out[]; 0: not what the decoders make; -1: error. */
static int
fields(PyObject *rec, Py_ssize_t n, const int *idx, int k, uint64_t *out)
{
    if (!PyTuple_Check(rec) || PyTuple_Size(rec) != n) {
        return 0;
    }
    for (int j = 0; j < k; j++) {
        PyObject *item = PyTuple_GetItem(rec, idx[j]);
        if (item == NULL) {
            return -1;
        }
        if (!PyLong_CheckExact(item)) {
            return 0;
        }
        /* PyLong_AsUnsignedLongLong goes through a byte array; this one reads the digits */
        int overflow;
        long long v = PyLong_AsLongLongAndOverflow(item, &overflow);
        if (v == -1 && PyErr_Occurred()) {
            return -1;
        }
        if (overflow > 0) {
            unsigned long long u = PyLong_AsUnsignedLongLong(item);
            if (u == (unsigned long long)-1 && PyErr_Occurred()) {
                if (!PyErr_ExceptionMatches(PyExc_OverflowError)) {
                    return -1;
                }
                PyErr_Clear();
                return 0;
            }
            out[j] = (uint64_t)u;
        }
        else if (overflow < 0 || v < 0) {
            return 0;
        }
        else {
            out[j] = (uint64_t)v;
        }
    }
    return 1;
}

/* A callback's result, kept alive by ctx->keep (borrowed). NULL: it raised. It takes (steals)
 * the new references a and b (b may be absent: NULL; either NULL after a failed conversion). */
static PyObject *
call(Ctx *c, int which, PyObject *a, PyObject *b, int nargs)
{
    PyObject *r = NULL;
    if (a != NULL && (nargs == 1 || b != NULL)) {
        r = PyObject_CallFunctionObjArgs(c->lookups[which], a, b, NULL);
    }
    Py_XDECREF(a);
    Py_XDECREF(b);
    if (r == NULL) {
        return NULL;
    }
    int rc = PyList_Append(c->keep, r);
    Py_DECREF(r);
    return rc < 0 ? NULL : r;
}

/* _fail(code, value): always raises (NULL, error set). value: borrowed, or NULL for None. */
static void *
fail(Ctx *c, long code, PyObject *value)
{
    if (PyErr_Occurred()) {
        return NULL; /* making value failed */
    }
    PyObject *what = PyLong_FromLong(code);
    if (what == NULL) {
        return NULL;
    }
    PyObject *r = PyObject_CallFunctionObjArgs(c->lookups[L_FAIL], what, value ? value : Py_None, NULL);
    Py_DECREF(what);
    if (r != NULL) {
        Py_DECREF(r);
        PyErr_SetString(PyExc_SystemError, "_chost: _fail returned");
    }
    return NULL;
}

/* _require_level for a record not at the expected level (it raises; if not, the loop goes on). */
static int
require(Ctx *c, long kind, PyObject *rec, uint64_t level)
{
    PyObject *k = PyLong_FromLong(kind), *l = field_obj(rec, 0, level), *r = NULL;
    if (k != NULL && l != NULL) {
        r = PyObject_CallFunctionObjArgs(c->lookups[L_REQUIRE], k, l, NULL);
    }
    Py_XDECREF(k);
    Py_XDECREF(l);
    if (r == NULL) {
        return -1;
    }
    Py_DECREF(r);
    return 0;
}

/* A (str, int) pair from a callback: 0 ok, -1 error (TypeError when it is not one). */
static int
pair(PyObject *r, PyObject **first, long *second)
{
    if (!PyTuple_Check(r) || PyTuple_Size(r) != 2) {
        PyErr_SetString(PyExc_TypeError, "_chost: a lookup returned no pair");
        return -1;
    }
    *first = PyTuple_GetItem(r, 0);
    *second = PyLong_AsLong(PyTuple_GetItem(r, 1));
    return (*second == -1 && PyErr_Occurred()) ? -1 : 0;
}

/* -- sorting: a natural merge sort of index arrays (stable) ----------------------------------- */

typedef int (*Less)(const void *, int32_t, int32_t);

static int
entry_less(const void *ctx, int32_t x, int32_t y)
{
    const Entry *e = ctx, *a = e + x, *b = e + y;
    if (a->ts != b->ts) {
        return a->ts < b->ts;
    }
    if (a->level != b->level) {
        return a->level < b->level;
    }
    return a->seq < b->seq;
}

static int
track_less(const void *ctx, int32_t x, int32_t y)
{
    const Track *t = ctx;
    return t[x].ts < t[y].ts;
}

/* Sorts a[0:n] by less (equal keys keep their order); tmp has room for n. */
static void
merge_sort(int32_t *a, int32_t *tmp, Py_ssize_t n, Less less, const void *ctx)
{
    int32_t *src = a, *dst = tmp;
    for (;;) {
        Py_ssize_t i = 0, runs = 0;
        while (i < n) {
            Py_ssize_t mid = i + 1;
            while (mid < n && !less(ctx, src[mid], src[mid - 1])) {
                mid++;
            }
            Py_ssize_t end = mid;
            if (mid < n) {
                end = mid + 1;
                while (end < n && !less(ctx, src[end], src[end - 1])) {
                    end++;
                }
            }
            Py_ssize_t l = i, r = mid, o = i;
            while (l < mid && r < end) {
                dst[o++] = less(ctx, src[r], src[l]) ? src[r++] : src[l++];
            }
            while (l < mid) {
                dst[o++] = src[l++];
            }
            while (r < end) {
                dst[o++] = src[r++];
            }
            runs++;
            i = end;
        }
        int32_t *t = src;
        src = dst;
        dst = t;
        if (runs <= 1) {
            break;
        }
    }
    if (src != a) {
        memcpy(a, src, (size_t)n * sizeof(int32_t));
    }
}

/* -- the tables ------------------------------------------------------------------------------ */

/* Appends cls(*items) to out (the record holds only ints and strs: no cycle, so untracked). */
static int
emit(Ctx *c, ObjVec *out, PyObject *cls, allocfunc alloc, PyObject **items, Py_ssize_t n)
{
    for (Py_ssize_t j = 0; j < n; j++) {
        Py_INCREF(items[j]);
    }
    PyObject *rec = record_new((PyTypeObject *)cls, alloc, items, n);
    if (rec == NULL) {
        return -1;
    }
    if (c->untrack) {
        PyObject_GC_UnTrack(rec);
    }
    return objvec_push(out, rec);
}

static int
host_task(Ctx *c, Track *t, PyObject *context)
{
    if (c->keys_only) {
        /* (device, stream, task, context; batch 0) in one word: 10, 20, 32 and 1 bits */
        if (t->device >> 10 || t->stream >> 20 || t->task >> 32) {
            c->fallback = 1;
            return -1;
        }
        if (c->nkeys == c->capkeys) {
            size_t cap = c->capkeys ? (size_t)c->capkeys * 2 : 4096;
            uint64_t *grown;
            RELEASED_IF(c->capkeys > RELEASE_SECTION, grown = scratch_realloc(c->keys, cap * sizeof(uint64_t)));
            if (grown == NULL) {
                PyErr_NoMemory();
                return -1;
            }
            c->keys = grown;
            c->capkeys = (Py_ssize_t)cap;
        }
        c->keys[c->nkeys++] = t->device << 53 | t->stream << 33 | t->task << 1 | (context == c->invalid);
        return 0;
    }
    PyObject *items[8] = {
        track_obj(t, O_DEVICE), track_obj(t, O_STREAM), track_obj(t, O_TASK), context,
        c->zero, t->ttype, t->kname, track_obj(t, O_TS),
    };
    if (!items[0] || !items[1] || !items[2] || !items[7]) {
        return -1;
    }
    return emit(c, &c->host_out, c->lookups[L_HOST_TASK], c->host_alloc, items, 8);
}

static int
ge_task(Ctx *c, Track *t, PyObject *name, PyObject *ttype, PyObject *block, PyObject *mix)
{
    PyObject *items[9] = {
        track_obj(t, O_DEVICE), track_obj(t, O_STREAM), track_obj(t, O_TASK), c->invalid,
        c->zero, name, ttype, block, mix,
    };
    if (!items[0] || !items[1] || !items[2]) {
        return -1;
    }
    return emit(c, &c->ge_out, c->lookups[L_GE_TASK], c->ge_alloc, items, 9);
}

/* What _Tables._kernel makes of a kernel task and its node launch: one of these, or a decline
 * (the F_* code, negated). has_node: a launch with a name; basic_kind: its node_basic_info
 * payload's kind, -1 where none is attached. */
enum { GE_NONE = 0, GE_KERNEL_NAME = 1, GE_NODE_NAME = 2, GE_NODE_BASIC = 3 };

static int
kernel_rule(int has_node, int node_flags, int kernel_na, int level0, int basic_kind, int others)
{
    if (!has_node || (node_flags & N_EMPTY)) { /* _kernel_without_node */
        return kernel_na ? GE_NONE : level0 ? GE_KERNEL_NAME : -F_OUTSIDE_NODE;
    }
    if (node_flags & N_LCCL) {
        return GE_NONE;
    }
    if (level0) {
        return GE_NODE_NAME;
    }
    if (basic_kind < 0) { /* a node with tensor records only takes the level-0 path at level 1 */
        return others ? -F_NO_BASIC_AT_LEVEL1 : GE_NONE;
    }
    return basic_kind == B_FFTS_PLUS ? GE_NONE : basic_kind == B_HCCL ? -F_HCCL_NODE : GE_NODE_BASIC;
}

/* _Tables.add of one task record and its node launch (node -1: none): its host tasks, then its
 * GE task as _Tables._kernel decides. No node here has context ids (host_tables queues no
 * context_id_info record), so only MIX types take the context path: contexts "invalid, 0". */
static int
add(Ctx *c, Track *t, int32_t node)
{
    if (host_task(c, t, c->invalid) < 0) {
        return -1;
    }
    if ((t->tflags & T_CONTEXTS) && (t->tflags & T_MIX) && host_task(c, t, c->zero) < 0) {
        return -1;
    }
    if (!(t->tflags & T_KERNEL)) {
        return 0;
    }
    const Node *n = node >= 0 ? c->nodes + node : NULL;
    const Basic *b = n != NULL && n->basic >= 0 ? c->basics + n->basic : NULL;
    PyObject *na = c->lookups[L_NA];
    int rule = kernel_rule(n != NULL, n ? n->flags : 0, t->na, c->level0, b ? b->kind : -1, n ? n->others : 0);
    switch (rule) {
    case GE_NONE:
        return 0;
    case GE_KERNEL_NAME:
        return ge_task(c, t, t->kname, na, c->zero, c->zero);
    case GE_NODE_NAME:
        return ge_task(c, t, n->name, na, c->zero, c->zero);
    case GE_NODE_BASIC:
        return ge_task(c, t, n->name, PyTuple_GetItem(b->payload, 0), PyTuple_GetItem(b->payload, 1),
                       PyTuple_GetItem(b->payload, 2));
    default: /* a decline: of the kernel's name where it has no node, else of its node's */
        fail(c, -rule, rule == -F_OUTSIDE_NODE ? t->kname : n->name);
        return -1;
    }
}

/* _chain of one thread's queue (its entry indexes, in the order added): appends to pairs (at
 * *npairs) each task record's index and its node launch, in the order _Tables.add_all takes them.
 * 0, or the code of the decline its tree meets (*npairs then as it was: the caller raises it
 * once the earlier threads' tasks are added, as _Tables.add_all meets those first); no Python. */
static int
thread_pairs(Ctx *c, Entry *entries, int32_t *order, int32_t *tmp, Py_ssize_t n, int32_t *pairs,
             Py_ssize_t *npairs_at)
{
    RELEASED_IF(n > RELEASE_SECTION, merge_sort(order, tmp, n, entry_less, entries));
    int32_t levels[DEPTH_LIMIT + 2], nodes[DEPTH_LIMIT + 2];
    uint64_t bounds[DEPTH_LIMIT + 2];
    int depth = 1; /* the root is never closed: its bound is above every entry's */
    levels[0] = ROOT;
    bounds[0] = 0;
    nodes[0] = -1;
    int32_t last_node = -1;
    Py_ssize_t npairs = *npairs_at;
    for (Py_ssize_t i = 0; i < n; i++) {
        RELEASE_POINT(i, RELEASE_PLAIN);
        const Entry *e = entries + order[i];
        if (e->kind != K_API) {
            while (depth > 1 && e->bound > bounds[depth - 1]) {
                depth--;
            }
            if (e->kind == K_TRACK) {
                pairs[2 * npairs] = e->payload;
                pairs[2 * npairs + 1] = nodes[depth - 1];
                npairs++;
            }
            else if (last_node >= 0 && c->nodes[last_node].start <= e->ts && e->ts <= c->nodes[last_node].bound) {
                if (e->kind == K_BASIC) {
                    c->nodes[last_node].basic = e->payload;
                }
                else {
                    c->nodes[last_node].others = 1;
                }
            }
            continue;
        }
        int32_t parent;
        for (;;) {
            parent = levels[depth - 1];
            if (depth > 1 && (e->bound > bounds[depth - 1] || (e->level < parent && e->level != ACL))) {
                depth--;
                continue;
            }
            break;
        }
        if (e->level == ACL && parent != ROOT) {
            continue; /* nested ACL calls take no part in the tree */
        }
        if (e->level == NODE && parent == NODE) {
            return F_NESTED_NODE;
        }
        if (depth > DEPTH_LIMIT) {
            return F_TOO_DEEP;
        }
        if (e->level == NODE) {
            last_node = e->payload;
            nodes[depth] = e->payload;
        }
        else {
            nodes[depth] = nodes[depth - 1];
        }
        levels[depth] = e->level;
        bounds[depth] = e->bound;
        depth++;
    }
    *npairs_at = npairs;
    return 0;
}

/* The thread's index (in order of first appearance); -1: out of memory. */
static int64_t
thread_index(Map *threads, uint64_t thread)
{
    int fresh;
    int64_t *v = map_get(threads, thread, 0, &fresh);
    if (v == NULL) {
        return -1;
    }
    if (fresh) {
        *v = (int64_t)threads->n - 1;
    }
    return *v;
}

#define FALLBACK 2 /* a record the decoders would not make: the caller runs the pure loops */

/* The body of host_tables: 0 done, -1 error, FALLBACK. */
static int
tables(Ctx *c, const Source *apis, const Source *basics, PyObject *tensors, const Source *tracks, int all_export)
{
    Py_ssize_t napi = apis->n, nbasic = basics->n, ntensor = PyList_Size(tensors), ntrack = tracks->n;
    Py_ssize_t total = napi + nbasic + ntensor + ntrack;
    int rc = -1;
    Map api_levels = {0}, node_names = {0}, payloads = {0}, types = {0}, kernels = {0}, threads = {0},
        groups = {0}, flips = {0};
    Entry *entries = scratch_malloc((size_t)(total + 1) * sizeof(Entry));
    int32_t *order = scratch_malloc((size_t)(total + 1) * sizeof(int32_t));
    int32_t *tmp = scratch_malloc((size_t)(total + 1) * sizeof(int32_t));
    int32_t *pairs = scratch_malloc((size_t)(2 * ntrack + 2) * sizeof(int32_t));
    int32_t *kept = scratch_malloc((size_t)(ntrack + 1) * sizeof(int32_t));
    int32_t *group_of = scratch_malloc((size_t)(ntrack + 1) * sizeof(int32_t));
    Py_ssize_t *counts = NULL, *starts = NULL;
    c->nodes = scratch_malloc((size_t)(napi + 1) * sizeof(Node));
    c->basics = scratch_malloc((size_t)(nbasic + 1) * sizeof(Basic));
    c->tracks = scratch_calloc((size_t)ntrack + 1, sizeof(Track));
    c->ntracks = ntrack;
    c->own_track_objs = tracks->list == NULL;
    if (!entries || !order || !tmp || !pairs || !kept || !group_of || !c->nodes || !c->basics || !c->tracks) {
        PyErr_NoMemory();
        goto done;
    }
    if (map_init(&api_levels, 16) < 0 || map_init(&node_names, 16) < 0 || map_init(&payloads, 16) < 0 ||
        map_init(&types, 16) < 0 || map_init(&kernels, 16) < 0 || map_init(&threads, 16) < 0 ||
        map_init(&groups, 16) < 0 || map_init(&flips, 16) < 0) {
        goto done;
    }
    Py_ssize_t nentries = 0;
    int fresh, ok;
    uint64_t f[10];
    PyObject *r, *name, *rec;
    long flag;

    /* api_event calls: (level, struct_type, thread_id, start, end, item_id) */
    static const int API[] = {0, 1, 2, 3, 4, 5};
    static const Raw API_RAW[] = {{2, 2}, {4, 4}, {8, 4}, {16, 8}, {24, 8}, {32, 8}};
    for (Py_ssize_t i = 0; i < napi; i++) {
        RELEASE_POINT(i, RELEASE_READS);
        if ((ok = record(apis, i, 6, API, API_RAW, 6, f, &rec)) <= 0) {
            rc = ok < 0 ? -1 : FALLBACK;
            goto done;
        }
        if (rec == NULL) {
            if (f[4] == UINT64_MAX) {
                rc = FALLBACK; /* an event record: api_records declines it */
                goto done;
            }
            if (f[3] == 0) {
                continue; /* api_records drops it as invalid */
            }
        }
        int64_t *level = map_get(&api_levels, f[0], f[1], &fresh);
        if (level == NULL) {
            goto done;
        }
        if (fresh) {
            PyObject *a = field_obj(rec, 0, f[0]), *b = field_obj(rec, 1, f[1]);
            r = NULL;
            if (a != NULL && b != NULL) {
                r = PyObject_CallFunctionObjArgs(c->lookups[L_API_LEVEL], a, b, NULL);
            }
            Py_XDECREF(a);
            Py_XDECREF(b);
            if (r == NULL) {
                goto done;
            }
            *level = PyLong_AsLong(r);
            Py_DECREF(r);
            if (*level == -1 && PyErr_Occurred()) {
                goto done;
            }
            if (*level != ACL && *level != NODE && *level != SKIPPED && *level != OTHER_LEVEL) {
                PyErr_SetString(PyExc_SystemError, "_chost: unknown api level code");
                goto done;
            }
        }
        if (*level == SKIPPED || f[3] == 0 || f[3] == f[4]) {
            continue;
        }
        if (*level == OTHER_LEVEL) {
            PyObject *value = field_obj(rec, 0, f[0]);
            fail(c, F_OTHER_API_LEVEL, value);
            Py_XDECREF(value);
            goto done;
        }
        int32_t payload = -1;
        if (*level == NODE) {
            int64_t *known = map_get(&node_names, f[5], 0, &fresh);
            if (known == NULL) {
                goto done;
            }
            if (fresh) {
                /* (name, flags) per item, kept in a node as its template */
                if ((r = call(c, L_NODE_NAME, field_obj(rec, 5, f[5]), NULL, 1)) == NULL || pair(r, &name, &flag) < 0) {
                    goto done;
                }
                c->untrack &= PyUnicode_Check(name);
                *known = c->nnodes;
                c->nodes[c->nnodes].name = name;
                c->nodes[c->nnodes].flags = (int)flag;
            }
            else {
                c->nodes[c->nnodes].name = c->nodes[*known].name;
                c->nodes[c->nnodes].flags = c->nodes[*known].flags;
            }
            Node *node = c->nodes + c->nnodes;
            node->start = f[3];
            node->bound = f[4];
            node->basic = -1;
            node->others = 0;
            payload = (int32_t)c->nnodes++;
        }
        int64_t thread = thread_index(&threads, f[2]);
        if (thread < 0) {
            goto done;
        }
        entries[nentries] = (Entry){f[3], f[4], nentries, (int32_t)*level, K_API, payload, (int32_t)thread};
        nentries++;
    }

    /* node_basic_info: (level, struct_type, thread_id, timestamp, node_hash, task_type, op_type_hash,
     * block_word, op_flag) */
    static const int BASIC[] = {0, 2, 3, 5, 7};
    static const Raw BASIC_RAW[] = {{2, 2}, {8, 4}, {16, 8}, {32, 4}, {44, 4}};
    for (Py_ssize_t i = 0; i < nbasic; i++) {
        RELEASE_POINT(i, RELEASE_READS);
        if ((ok = record(basics, i, 9, BASIC, BASIC_RAW, 5, f, &rec)) <= 0) {
            rc = ok < 0 ? -1 : FALLBACK;
            goto done;
        }
        if (f[0] != NODE_LEVEL && require(c, 0, rec, f[0]) < 0) {
            goto done;
        }
        int64_t *known = map_get(&payloads, f[3], f[4], &fresh);
        if (known == NULL) {
            goto done;
        }
        if (fresh) {
            if ((r = call(c, L_BASIC, field_obj(rec, 5, f[3]), field_obj(rec, 7, f[4]), 2)) == NULL ||
                pair(r, &name, &flag) < 0) {
                goto done;
            }
            if (!PyTuple_Check(name) || PyTuple_Size(name) != 3) {
                PyErr_SetString(PyExc_TypeError, "_chost: a node_basic_info payload is not a triple");
                goto done;
            }
            c->untrack &= PyUnicode_Check(PyTuple_GetItem(name, 0));
            c->basics[c->nbasics].payload = name;
            c->basics[c->nbasics].kind = (int)flag;
            *known = c->nbasics++;
        }
        int64_t thread = thread_index(&threads, f[1]);
        if (thread < 0) {
            goto done;
        }
        entries[nentries] = (Entry){f[2], f[2], nentries, NODE, K_BASIC, (int32_t)*known, (int32_t)thread};
        nentries++;
    }

    /* tensor_info headers: (level, struct_type, thread_id, timestamp) */
    static const int TENSOR[] = {0, 2, 3};
    for (Py_ssize_t i = 0; i < ntensor; i++) {
        RELEASE_POINT(i, RELEASE_READS);
        rec = PyList_GetItem(tensors, i);
        if ((ok = fields(rec, 4, TENSOR, 3, f)) <= 0) {
            rc = ok < 0 ? -1 : FALLBACK;
            goto done;
        }
        if (f[0] != NODE_LEVEL && require(c, 1, rec, f[0]) < 0) {
            goto done;
        }
        int64_t thread = thread_index(&threads, f[1]);
        if (thread < 0) {
            goto done;
        }
        entries[nentries] = (Entry){f[2], f[2], nentries, NODE, K_TENSOR, -1, (int32_t)thread};
        nentries++;
    }

    /* task_track (_host._tracks): (level, struct_type, thread_id, timestamp, dev_type, device_id,
     * stream_id, task_id, batch_id, task_type, kernel_hash); in place the device word holds the
     * device type (bits 12-15) and id (bits 0-11) */
    static const int TRACK[] = {0, 3, 4, 5, 6, 8, 9, 10, 2, 7};
    static const Raw TRACK_RAW[] = {{2, 2}, {16, 8}, {24, 2}, {24, 2}, {26, 2},
                                    {30, 2}, {32, 8}, {40, 8}, {8, 4}, {28, 2}};
    Py_ssize_t nkept = 0;
    int batched = 0;
    for (Py_ssize_t i = 0; i < ntrack; i++) {
        RELEASE_POINT(i, RELEASE_READS);
        if ((ok = record(tracks, i, 11, TRACK, TRACK_RAW, 10, f, &rec)) <= 0) {
            rc = ok < 0 ? -1 : FALLBACK;
            goto done;
        }
        if (rec == NULL) {
            f[2] = (f[2] >> 12) & 0xF;
            f[3] &= 0xFFF;
        }
        if (f[0] != RUNTIME_LEVEL && require(c, 2, rec, f[0]) < 0) {
            goto done;
        }
        Track *t = c->tracks + i;
        int64_t *known = map_get(&types, f[6], 0, &fresh);
        if (known == NULL) {
            goto done;
        }
        if (fresh) {
            if ((r = call(c, L_TRACK_TYPE, field_obj(rec, 0, f[0]), field_obj(rec, 9, f[6]), 2)) == NULL ||
                pair(r, &name, &flag) < 0) {
                goto done;
            }
            c->untrack &= PyUnicode_Check(name);
            *known = (int64_t)i;
            t->ttype = name;
            t->tflags = (int)flag;
        }
        else {
            t->ttype = c->tracks[*known].ttype;
            t->tflags = c->tracks[*known].tflags;
        }
        if (rec != NULL) {
            t->obj[O_DEVICE] = PyTuple_GetItem(rec, 5);
            t->obj[O_STREAM] = PyTuple_GetItem(rec, 6);
            t->obj[O_TASK] = PyTuple_GetItem(rec, 7);
            t->obj[O_TS] = PyTuple_GetItem(rec, 3);
        }
        t->ts = f[1];
        t->device = f[3];
        t->stream = f[4];
        t->thread = f[8];
        t->task = f[9];
        if (t->tflags & T_FLIP) {
            int64_t *first = map_get(&flips, f[3], f[4], &fresh);
            if (first == NULL) {
                goto done;
            }
            if (fresh || (uint64_t)*first > f[1]) {
                *first = (int64_t)f[1]; /* stored as the bits of a uint64 */
            }
            continue;
        }
        if (t->tflags & T_MAINTENANCE) {
            continue;
        }
        if (f[2] != 0) {
            fail(c, F_DPU, NULL);
            goto done;
        }
        /* the kernel name: kept in the first track with that hash (as the types are) */
        int64_t *kname = map_get(&kernels, f[7], 0, &fresh);
        if (kname == NULL) {
            goto done;
        }
        if (fresh) {
            if ((r = call(c, L_KERNEL_NAME, field_obj(rec, 10, f[7]), NULL, 1)) == NULL || pair(r, &name, &flag) < 0) {
                goto done;
            }
            c->untrack &= PyUnicode_Check(name);
            *kname = (int64_t)i;
            t->kname = name;
            t->na = (int)flag;
        }
        else {
            t->kname = c->tracks[*kname].kname;
            t->na = c->tracks[*kname].na;
        }
        batched |= f[5] != 0;
        kept[nkept++] = (int32_t)i;
    }
    if (c->let_go != NULL) {
        /* Every record is in the arrays now: the files' contents go (a memory map is unmapped
         * with the GIL released), before the walk's scratch and the tables take their place.
         * From here on nothing returns FALLBACK but keys_only's checks. */
        apis = basics = tracks = NULL;
        if (PyList_SetSlice(c->let_go, 0, PyList_Size(c->let_go), NULL) < 0) {
            goto done;
        }
    }
    if (!all_export) {
        if (batched) {
            fail(c, F_BATCHED, NULL);
            goto done;
        }
    }
    else {
        /* group by (device, stream) in order of appearance, each sorted by time (stably) */
        Py_ssize_t ngroups = 0;
        for (Py_ssize_t j = 0; j < nkept; j++) {
            RELEASE_POINT(j, RELEASE_PLAIN);
            const Track *t = c->tracks + kept[j];
            int64_t *g = map_get(&groups, t->device, t->stream, &fresh);
            if (g == NULL) {
                goto done;
            }
            if (fresh) {
                *g = ngroups++;
            }
            group_of[j] = (int32_t)*g;
        }
        counts = scratch_calloc((size_t)ngroups + 1, sizeof(Py_ssize_t));
        starts = scratch_malloc(((size_t)ngroups + 1) * sizeof(Py_ssize_t));
        if (counts == NULL || starts == NULL) {
            PyErr_NoMemory();
            goto done;
        }
        for (Py_ssize_t j = 0; j < nkept; j++) {
            RELEASE_POINT(j, RELEASE_PLAIN);
            counts[group_of[j]]++;
        }
        Py_ssize_t at = 0;
        for (Py_ssize_t g = 0; g < ngroups; g++) {
            RELEASE_POINT(g, RELEASE_PLAIN);
            starts[g] = at;
            at += counts[g];
        }
        for (Py_ssize_t j = 0; j < nkept; j++) {
            RELEASE_POINT(j, RELEASE_PLAIN);
            order[starts[group_of[j]]++] = kept[j];
        }
        at = 0;
        for (Py_ssize_t g = 0; g < ngroups; g++) {
            RELEASE_POINT(g, RELEASE_PLAIN);
            int32_t *group = order + at;
            RELEASED_IF(counts[g] > RELEASE_SECTION, merge_sort(group, tmp, counts[g], track_less, c->tracks));
            Track *last = c->tracks + group[counts[g] - 1];
            const int64_t *limit = map_find(&flips, last->device, last->stream);
            if (limit != NULL && last->ts >= (uint64_t)*limit) {
                fail(c, F_WRAPPED, track_obj(last, O_STREAM));
                goto done;
            }
            at += counts[g];
        }
        memcpy(kept, order, (size_t)nkept * sizeof(int32_t));
    }
    for (Py_ssize_t j = 0; j < nkept; j++) {
        RELEASE_POINT(j, RELEASE_PLAIN);
        const Track *t = c->tracks + kept[j];
        int64_t thread = thread_index(&threads, t->thread);
        if (thread < 0) {
            goto done;
        }
        entries[nentries] = (Entry){t->ts, t->ts, nentries, TASK, K_TRACK, kept[j], (int32_t)thread};
        nentries++;
    }

    /* every thread's queue, in order of first appearance */
    Py_ssize_t nthreads = (Py_ssize_t)threads.n;
    scratch_free(counts);
    scratch_free(starts);
    counts = scratch_calloc((size_t)nthreads + 1, sizeof(Py_ssize_t));
    starts = scratch_malloc(((size_t)nthreads + 1) * sizeof(Py_ssize_t));
    if (counts == NULL || starts == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t j = 0; j < nentries; j++) {
        RELEASE_POINT(j, RELEASE_PLAIN);
        counts[entries[j].thread]++;
    }
    Py_ssize_t at = 0;
    for (Py_ssize_t g = 0; g < nthreads; g++) {
        RELEASE_POINT(g, RELEASE_PLAIN);
        starts[g] = at;
        at += counts[g];
    }
    for (Py_ssize_t j = 0; j < nentries; j++) {
        RELEASE_POINT(j, RELEASE_PLAIN);
        order[starts[entries[j].thread]++] = (int32_t)j;
    }
    /* every thread's tree first (up to the first decline), then _Tables.add_all of each
     * thread's pairs in turn (the same records, errors and order as tree and pairs thread by
     * thread): the queues' arrays, near half this call's scratch memory, go before the records
     * are made */
    at = 0;
    Py_ssize_t npairs = 0;
    int declined = 0;
    for (Py_ssize_t g = 0; g < nthreads && !declined; g++) {
        declined = thread_pairs(c, entries, order + at, tmp, counts[g], pairs, &npairs);
        at += counts[g];
    }
    FREE_RELEASED(entries, order, tmp);
    entries = NULL;
    order = tmp = NULL;
    for (Py_ssize_t i = 0; i < npairs; i++) {
        RELEASE_POINT(i, RELEASE_OBJECTS);
        if (add(c, c->tracks + pairs[2 * i], pairs[2 * i + 1]) < 0) {
            if (c->fallback) {
                rc = FALLBACK;
            }
            goto done;
        }
    }
    if (declined) {
        fail(c, declined, NULL);
        goto done;
    }
    rc = 0;
done:
    map_free(&api_levels);
    map_free(&node_names);
    map_free(&payloads);
    map_free(&types);
    map_free(&kernels);
    map_free(&threads);
    map_free(&groups);
    map_free(&flips);
    FREE_RELEASED(entries, order, tmp, pairs, kept, group_of, counts, starts, c->nodes, c->basics);
    if (c->tracks != NULL && c->own_track_objs) {
        for (Py_ssize_t i = 0; i < c->ntracks; i++) {
            RELEASE_POINT(i, RELEASE_READS);
            for (int j = 0; j < 4; j++) {
                Py_XDECREF(c->tracks[i].obj[j]);
            }
        }
    }
    FREE_RELEASED(c->tracks);
    return rc;
}

/* A Source of list (records) or bytes (raw records of size bytes each, a torn head dropped as
 * the decoders drop it). 0: neither (the caller falls back); -1: error. */
static int
source(PyObject *obj, Py_ssize_t size, Source *src)
{
    src->size = size;
    if (PyList_Check(obj)) {
        src->list = obj;
        src->buf = NULL;
        src->n = PyList_Size(obj);
        return 1;
    }
    const unsigned char *data;
    Py_ssize_t len;
    if (raw_data(obj, &data, &len) < 0) {
        if (!PyErr_ExceptionMatches(PyExc_TypeError)) {
            return -1;
        }
        PyErr_Clear();
        return 0; /* not records, not a file's contents */
    }
    src->list = NULL;
    src->buf = data + len % size;
    src->n = len / size;
    return 1;
}

PyDoc_STRVAR(host_tables_doc,
             "host_tables(apis, basics, tensors, tracks, level0, all_export, lookups, keys_only=False,\n"
             "            let_go=None, /)\n"
             "--\n\n"
             "The host tasks and GE tasks of a run as two lists (see asc_aprof._plans._raw._host), or None\n"
             "when a record is not what the decoders make. apis, basics and tracks are lists of\n"
             "records or their files' contents, bytes or a memory map (checked records, read in\n"
             "place). keys_only: no host task is made (the first list is empty), their ids are\n"
             "only checked to come once each; None where two have the same. let_go: a list\n"
             "[apis, basics, tracks] (those arguments None), emptied once every record is read,\n"
             "so that the files' contents can go while the tables are made.");

static int
u64_cmp(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* Whether a key comes twice (the keys sorted in place, with the GIL released). */
static int
twice(uint64_t *keys, Py_ssize_t n)
{
    int found = 0;
    Py_BEGIN_ALLOW_THREADS
    qsort(keys, (size_t)n, sizeof(uint64_t), u64_cmp);
    for (Py_ssize_t i = 1; i < n && !found; i++) {
        found = keys[i] == keys[i - 1];
    }
    Py_END_ALLOW_THREADS
    return found;
}

static PyObject *
host_tables(PyObject *self, PyObject *args)
{
    PyObject *apis, *basics, *tensors, *tracks, *lookups, *let_go = NULL;
    int level0, all_export, keys_only = 0;
    (void)self;
    if (!PyArg_ParseTuple(args, "OOOOppO|pO!:host_tables", &apis, &basics, &tensors, &tracks, &level0,
                          &all_export, &lookups, &keys_only, &PyList_Type, &let_go)) {
        return NULL;
    }
    if (let_go != NULL) {
        /* the sources from the list (apis, basics and tracks given as None): only it holds them */
        if (PyList_Size(let_go) != 3 || apis != Py_None || basics != Py_None || tracks != Py_None) {
            PyErr_SetString(PyExc_TypeError, "host_tables: let_go is [apis, basics, tracks], given as None");
            return NULL;
        }
        apis = PyList_GetItem(let_go, 0);
        basics = PyList_GetItem(let_go, 1);
        tracks = PyList_GetItem(let_go, 2);
    }
    if (!PyTuple_Check(lookups) || PyTuple_Size(lookups) != L_COUNT) {
        PyErr_SetString(PyExc_TypeError, "host_tables: lookups must be a tuple of 11");
        return NULL;
    }
    Source api_src, basic_src, track_src;
    int ok;
    if ((ok = source(apis, 40, &api_src)) <= 0 || (ok = source(basics, 64, &basic_src)) <= 0 ||
        (ok = source(tracks, 64, &track_src)) <= 0 || !(ok = PyList_Check(tensors))) {
        if (ok < 0) {
            return NULL;
        }
        Py_RETURN_NONE;
    }
    if (api_src.n + basic_src.n + PyList_Size(tensors) + track_src.n >= INT32_MAX / 2) {
        Py_RETURN_NONE; /* indexes are int32 */
    }
    Ctx c;
    memset(&c, 0, sizeof(c));
    for (int j = 0; j < L_COUNT; j++) {
        c.lookups[j] = PyTuple_GetItem(lookups, j);
    }
    c.level0 = level0;
    c.untrack = 1;
    c.keys_only = keys_only;
    c.let_go = let_go;

    c.host_alloc = (allocfunc)PyType_GetSlot((PyTypeObject *)c.lookups[L_HOST_TASK], Py_tp_alloc);
    c.ge_alloc = (allocfunc)PyType_GetSlot((PyTypeObject *)c.lookups[L_GE_TASK], Py_tp_alloc);
    if (c.host_alloc == NULL || c.ge_alloc == NULL) {
        if (!PyErr_Occurred()) {
            PyErr_SetString(PyExc_TypeError, "host_tables: the task classes have no tp_alloc");
        }
        return NULL;
    }
    c.invalid = c.lookups[L_INVALID];
    c.zero = PyLong_FromLong(0);
    c.keep = PyList_New(0);
    PyObject *result = NULL;
    if (c.zero && c.keep) {
        int rc = tables(&c, &api_src, &basic_src, tensors, &track_src, all_export);
        if (rc == 0 && keys_only && twice(c.keys, c.nkeys)) {
            rc = FALLBACK; /* two host tasks of one id: the pure loops make them, _run declines */
        }
        if (rc == 0) {
            PyObject *host_out = objvec_list(&c.host_out);
            PyObject *ge_out = host_out == NULL ? NULL : objvec_list(&c.ge_out);
            if (ge_out != NULL) {
                result = PyTuple_Pack(2, host_out, ge_out);
            }
            Py_XDECREF(host_out);
            Py_XDECREF(ge_out);
        }
        else if (rc == FALLBACK) {
            result = Py_None;
            Py_INCREF(result);
        }
    }
    objvec_clear(&c.host_out);
    objvec_clear(&c.ge_out);
    FREE_RELEASED(c.keys);
    Py_XDECREF(c.zero);
    Py_XDECREF(c.keep);
    return result;
}

PyDoc_STRVAR(in_place_doc,
             "in_place(data, size, api, /)\n--\n\n"
             "Whether host_tables may read the size-byte host records of data (bytes or a memory\n"
             "map) in place: a\n"
             "little-endian host and every record with the host magic and a known level (api: and\n"
             "no event record, end = all ones), so that its decoder would decline none of them.");

static PyObject *
in_place(PyObject *self, PyObject *args)
{
    PyObject *data;
    Py_ssize_t size;
    int api;
    (void)self;
    if (!PyArg_ParseTuple(args, "Onp:in_place", &data, &size, &api)) {
        return NULL;
    }
    if (size < 32) {
        PyErr_SetString(PyExc_TypeError, "in_place: size must be at least 32");
        return NULL;
    }
    const unsigned char *buf;
    Py_ssize_t len;
    if (raw_data(data, &buf, &len) < 0) {
        return NULL;
    }
    if (!little_endian()) {
        Py_RETURN_FALSE;
    }
    const unsigned char *p = buf + len % size;
    for (Py_ssize_t i = 0, n = len / size; i < n; i++, p += size) {
        RELEASE_POINT(i, RELEASE_PLAIN);
        if (le(p, 2) != 0x5A5A || !known_level(le(p + 2, 2)) || (api && le(p + 24, 8) == UINT64_MAX)) {
            Py_RETURN_FALSE;
        }
    }
    Py_RETURN_TRUE;
}

/* -- the lean walk: GE tasks only, with the calls kept as intervals --------------------------- */

/* Where only op_summary's rows are read at task time level 1 (no host task is made), lean_new,
 * lean_feed, lean_walk, lean_tensors and lean_finish make host_tables' GE tasks in a fraction of
 * its memory, and packed (_gepack.h). The caller feeds the records a file slice at a time and
 * lets go of each slice once fed; only the api_event calls are kept (24 bytes each) and sorted
 * per thread, as intervals. Every node_basic_info, tensor_info and task_track record then finds
 * its place among them by binary search instead of joining one queue of every record.
 *
 * Why that gives the queue walk's answer: in a thread's queue, sorted by (time, level, order
 * added), a point record (basic, tensor, task; levels 3 and 5, added after every call) comes
 * after every call of its time or earlier. It pops the open calls that end before it; the next
 * call pops at least those, since a call ends at or after its start (checked: else the run is
 * read whole). So the calls alone decide each call's stack; a point's stack is the stack after
 * the last call at or before its time, popped to its time (the parent chain, at most
 * DEPTH_LIMIT deep); and the node a basic or tensor record attaches to is the last node call at
 * or before its time, as the walk's last_node. Of several basics on a node the last in queue
 * order wins there: the latest, or of one time the last fed, here.
 *
 * Anything else (a record host_tables would decline or leave to the pure loops, a lookup that
 * raises, two host tasks of one id, ids beyond the packed ranges) makes the call return False
 * (lean_finish: None), and the caller reads the run whole: then the errors and their order are
 * the whole decode's. */

typedef struct {
    uint64_t ts, bound;
    int32_t thread, node; /* node: index into nodes, -1: an ACL call */
} LApi;

typedef struct {
    uint64_t basic_ts;
    int32_t basic, api; /* basic: index into basics, -1: none; api: its call's sorted index */
    int32_t name;       /* index into names (its object and flags): 24 bytes a node, not 32 */
    int8_t others;
} LNode;

typedef struct {
    PyObject *obj; /* borrowed (the keep list) */
    long flags;
} Named;

typedef struct {
    Ctx c; /* the lookups and the keep list (the rest of it unused) */
    int all_export, stage, batched;
    Map api_levels, node_names, payloads, types, kernels, threads, flips, ends, devices, tmpls;
    Named *names, *ttypes, *knames, *basics;
    Py_ssize_t nnames, ntypes, nknames, nbasics, capnames, captypes, capknames, capbasics;
    LApi *apis;
    LNode *nodes;
    Py_ssize_t napis, capapis, nnodes, capnodes;
    int32_t *parent, *top, *ctx, *last; /* by sorted call (lean_walk) */
    Py_ssize_t *starts;                 /* a thread's first sorted call; starts[nthreads] = napis */
    Py_ssize_t nthreads;
    uint64_t *keys;
    Py_ssize_t nkeys, capkeys;
    struct {
        GeVec ge;
        uint64_t device;
    } *outs; /* per device (devices: device id -> index) */
    Py_ssize_t nouts, capouts;
    PyObject *templates; /* list of GE task records */
} Lean;

enum { LEAN_APIS = 0, LEAN_WALKED = 1, LEAN_DONE = 2 };
#define LEAN_CAPSULE "asc_aprof._plans._raw.lean_walk"

/* The walk's maps, for what is done to each of them (made, freed). */
#define LEAN_MAPS 10

static void
lean_maps(Lean *w, Map *maps[LEAN_MAPS])
{
    Map *all[LEAN_MAPS] = {&w->api_levels, &w->node_names, &w->payloads, &w->types, &w->kernels,
                           &w->threads, &w->flips, &w->ends, &w->devices, &w->tmpls};
    memcpy(maps, all, sizeof all);
}

/* Room for one more item in *v (n items, *cap room): 0, or -1 with MemoryError. */
static int
room(void **v, Py_ssize_t n, Py_ssize_t *cap, size_t item)
{
    if (n < *cap) {
        return 0;
    }
    size_t want = *cap ? (size_t)*cap * 2 : 1024;
    void *grown;
    RELEASED_IF(*cap > RELEASE_SECTION, grown = scratch_realloc(*v, want * item));
    if (grown == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    *v = grown;
    *cap = (Py_ssize_t)want;
    return 0;
}

#define ROOM(w, field, count, cap) room((void **)&(w)->field, (w)->count, &(w)->cap, sizeof(*(w)->field))

static void
lean_free(PyObject *capsule)
{
    Lean *w = PyCapsule_GetPointer(capsule, LEAN_CAPSULE);
    if (w == NULL) {
        PyErr_Clear();
        return;
    }
    Map *maps[LEAN_MAPS];
    lean_maps(w, maps);
    for (size_t j = 0; j < LEAN_MAPS; j++) {
        map_free(maps[j]);
    }
    for (Py_ssize_t d = 0; d < w->nouts; d++) {
        FREE_RELEASED(w->outs[d].ge.v);
    }
    FREE_RELEASED(w->names, w->ttypes, w->knames, w->basics, w->apis, w->nodes, w->parent, w->top, w->ctx,
                  w->last, w->starts, w->keys, w->outs);
    for (int j = 0; j < L_COUNT; j++) {
        Py_XDECREF(w->c.lookups[j]);
    }
    Py_XDECREF(w->c.keep);
    Py_XDECREF(w->templates);
    scratch_free(w);
}

static Lean *
lean_of(PyObject *capsule, int stage)
{
    Lean *w = PyCapsule_GetPointer(capsule, LEAN_CAPSULE);
    if (w != NULL && w->stage != stage) {
        PyErr_SetString(PyExc_ValueError, "lean walk: called out of order (apis, walk, basics and "
                                          "tensors, tracks, finish)");
        return NULL;
    }
    return w;
}

PyDoc_STRVAR(lean_new_doc,
             "lean_new(lookups, all_export, /)\n--\n\n"
             "A lean walk (a capsule; see the lean walk in _chost.c): feed it the api_event records\n"
             "(lean_feed kind 0), lean_walk, the node_basic_info (kind 1) and tensor_info records\n"
             "(lean_tensors), the task_track records (kind 2), then lean_finish.");

static PyObject *
lean_new(PyObject *self, PyObject *args)
{
    PyObject *lookups;
    int all_export;
    (void)self;
    if (!PyArg_ParseTuple(args, "O!p:lean_new", &PyTuple_Type, &lookups, &all_export)) {
        return NULL;
    }
    if (PyTuple_Size(lookups) != L_COUNT) {
        PyErr_SetString(PyExc_TypeError, "lean_new: lookups must be a tuple of 11");
        return NULL;
    }
    Lean *w = scratch_calloc(1, sizeof(Lean));
    if (w == NULL) {
        return PyErr_NoMemory();
    }
    for (int j = 0; j < L_COUNT; j++) {
        w->c.lookups[j] = PyTuple_GetItem(lookups, j);
        Py_INCREF(w->c.lookups[j]);
    }
    w->all_export = all_export;
    w->stage = LEAN_APIS;
    w->c.keep = PyList_New(0);
    w->templates = PyList_New(0);
    PyObject *capsule = w->c.keep && w->templates ? PyCapsule_New(w, LEAN_CAPSULE, lean_free) : NULL;
    if (capsule == NULL) {
        for (int j = 0; j < L_COUNT; j++) {
            Py_DECREF(w->c.lookups[j]);
        }
        Py_XDECREF(w->c.keep);
        Py_XDECREF(w->templates);
        scratch_free(w);
        return NULL;
    }
    Map *maps[LEAN_MAPS];
    lean_maps(w, maps);
    for (size_t j = 0; j < LEAN_MAPS; j++) {
        if (map_init(maps[j], 16) < 0) {
            Py_DECREF(capsule);
            return NULL;
        }
    }
    return capsule;
}

/* The cached lookup of key (a, b) in m (value: index into *vec), made by calling lookup `which`
 * with the ints a (and b, nargs 2) on a miss. NULL: error. */
static Named *
named(Lean *w, Map *m, Named **vec, Py_ssize_t *n, Py_ssize_t *cap, int which, uint64_t a, uint64_t b, int nargs)
{
    int fresh;
    int64_t *at = map_get(m, a, b, &fresh);
    if (at == NULL) {
        return NULL;
    }
    if (!fresh) {
        return *vec + *at;
    }
    PyObject *name, *r;
    long flag;
    if (room((void **)vec, *n, cap, sizeof(Named)) < 0) {
        return NULL;
    }
    r = call(&w->c, which, PyLong_FromUnsignedLongLong(a), nargs == 2 ? PyLong_FromUnsignedLongLong(b) : NULL,
             nargs);
    if (r == NULL || pair(r, &name, &flag) < 0) {
        return NULL;
    }
    (*vec)[*n] = (Named){name, flag};
    *at = (*n)++;
    return *vec + *at;
}

/* Feeds api_event records (kind 0): 1 fed, 0 declined, -1 error. */
static int
lean_apis(Lean *w, const Source *src)
{
    static const int API[] = {0, 1, 2, 3, 4, 5};
    static const Raw API_RAW[] = {{2, 2}, {4, 4}, {8, 4}, {16, 8}, {24, 8}, {32, 8}};
    uint64_t f[6];
    PyObject *rec;
    int fresh;
    for (Py_ssize_t i = 0; i < src->n; i++) {
        RELEASE_POINT(i, RELEASE_READS);
        if (record(src, i, 6, API, API_RAW, 6, f, &rec) <= 0 || f[4] == UINT64_MAX) {
            return 0;
        }
        if (f[3] == 0) {
            continue;
        }
        int64_t *level = map_get(&w->api_levels, f[0], f[1], &fresh);
        if (level == NULL) {
            return -1;
        }
        if (fresh) {
            PyObject *r = PyObject_CallFunction(w->c.lookups[L_API_LEVEL], "KK", (unsigned long long)f[0],
                                                (unsigned long long)f[1]);
            if (r == NULL) {
                return -1;
            }
            *level = PyLong_AsLong(r);
            Py_DECREF(r);
            if (*level == -1 && PyErr_Occurred()) {
                return -1;
            }
        }
        if (*level == SKIPPED || f[3] == f[4]) {
            continue;
        }
        if ((*level != ACL && *level != NODE) || f[4] < f[3]) {
            return 0; /* declined by the whole walk; a call ending before it starts: not covered */
        }
        int32_t node = -1;
        if (*level == NODE) {
            Named *nm = named(w, &w->node_names, &w->names, &w->nnames, &w->capnames, L_NODE_NAME, f[5], 0, 1);
            if (nm == NULL || ROOM(w, nodes, nnodes, capnodes) < 0) {
                return -1;
            }
            w->nodes[w->nnodes] = (LNode){0, -1, -1, (int32_t)(nm - w->names), 0};
            node = (int32_t)w->nnodes++;
        }
        int64_t thread = thread_index(&w->threads, f[2]);
        if (thread < 0 || ROOM(w, apis, napis, capapis) < 0) {
            return -1;
        }
        if (w->napis >= INT32_MAX / 2) {
            return 0;
        }
        w->apis[w->napis++] = (LApi){f[3], f[4], (int32_t)thread, node};
    }
    return 1;
}

static int
api_less(const void *ctx, int32_t x, int32_t y)
{
    const LApi *a = (const LApi *)ctx + x, *b = (const LApi *)ctx + y;
    if (a->thread != b->thread) {
        return a->thread < b->thread;
    }
    if (a->ts != b->ts) {
        return a->ts < b->ts;
    }
    return (a->node >= 0) < (b->node >= 0); /* ACL (1) before NODE (3); else in the order fed */
}

/* Sorts the calls per thread and walks each thread's: 1 done, 0 declined, -1 error. */
static int
lean_sorted_walk(Lean *w)
{
    Py_ssize_t n = w->napis;
    int32_t *order = scratch_malloc(sizeof(int32_t) * (size_t)(n + 1)), *tmp = scratch_malloc(sizeof(int32_t) * (size_t)(n + 1));
    LApi *sorted = scratch_malloc(sizeof(LApi) * (size_t)(n + 1));
    w->nthreads = (Py_ssize_t)w->threads.n;
    w->starts = scratch_calloc((size_t)w->nthreads + 1, sizeof(Py_ssize_t));
    w->parent = scratch_malloc(sizeof(int32_t) * (size_t)(n + 1));
    w->top = scratch_malloc(sizeof(int32_t) * (size_t)(n + 1));
    w->ctx = scratch_malloc(sizeof(int32_t) * (size_t)(n + 1));
    w->last = scratch_malloc(sizeof(int32_t) * (size_t)(n + 1));
    if (!order || !tmp || !sorted || !w->starts || !w->parent || !w->top || !w->ctx || !w->last) {
        FREE_RELEASED(order, tmp, sorted);
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        RELEASE_POINT(i, RELEASE_PLAIN);
        order[i] = (int32_t)i;
    }
    RELEASED_IF(n > RELEASE_SECTION, merge_sort(order, tmp, n, api_less, w->apis));
    for (Py_ssize_t i = 0; i < n; i++) {
        RELEASE_POINT(i, RELEASE_PLAIN);
        sorted[i] = w->apis[order[i]];
        w->starts[sorted[i].thread + 1]++;
    }
    FREE_RELEASED(order, tmp, w->apis);
    w->apis = sorted;
    w->capapis = n + 1;
    for (Py_ssize_t t = 0; t < w->nthreads; t++) {
        w->starts[t + 1] += w->starts[t];
    }
    /* thread_pairs' walk over the calls alone (see above) */
    for (Py_ssize_t t = 0; t < w->nthreads; t++) {
        int32_t levels[DEPTH_LIMIT + 2], nodes[DEPTH_LIMIT + 2], at[DEPTH_LIMIT + 2];
        uint64_t bounds[DEPTH_LIMIT + 2];
        int depth = 1;
        levels[0] = ROOT, bounds[0] = 0, nodes[0] = -1, at[0] = -1;
        int32_t last_node = -1;
        for (Py_ssize_t i = w->starts[t]; i < w->starts[t + 1]; i++) {
            RELEASE_POINT(i, RELEASE_PLAIN);
            const LApi *e = w->apis + i;
            int32_t level = e->node >= 0 ? NODE : ACL, parent;
            for (;;) {
                parent = levels[depth - 1];
                if (depth > 1 && (e->bound > bounds[depth - 1] || (level < parent && level != ACL))) {
                    depth--;
                    continue;
                }
                break;
            }
            w->top[i] = at[depth - 1];
            if (level == ACL && parent != ROOT) {
                w->last[i] = last_node;
                continue;
            }
            if ((level == NODE && parent == NODE) || depth > DEPTH_LIMIT) {
                return 0; /* declined by the whole walk */
            }
            if (level == NODE) {
                last_node = e->node;
                w->nodes[e->node].api = (int32_t)i;
            }
            w->parent[i] = at[depth - 1];
            w->ctx[i] = level == NODE ? e->node : nodes[depth - 1];
            w->last[i] = last_node;
            levels[depth] = level, bounds[depth] = e->bound, nodes[depth] = w->ctx[i], at[depth] = (int32_t)i;
            w->top[i] = (int32_t)i;
            depth++;
        }
    }
    return 1;
}

/* The sorted calls of the thread with id `thread` at or before time ts: [*first, *end). */
static void
calls_until(const Lean *w, uint64_t thread, uint64_t ts, Py_ssize_t *first, Py_ssize_t *end)
{
    const int64_t *t = map_find(&w->threads, thread, 0);
    if (t == NULL) {
        *first = *end = 0;
        return;
    }
    Py_ssize_t lo = w->starts[*t], hi = w->starts[*t + 1];
    *first = lo;
    while (lo < hi) {
        Py_ssize_t mid = lo + (hi - lo) / 2;
        if (w->apis[mid].ts <= ts) {
            lo = mid + 1;
        }
        else {
            hi = mid;
        }
    }
    *end = lo;
}

/* The node a point record of (thread, ts) attaches to (the walk's last_node, when its call
 * spans ts): its index, or -1. */
static int32_t
attached(const Lean *w, uint64_t thread, uint64_t ts)
{
    Py_ssize_t first, end;
    calls_until(w, thread, ts, &first, &end);
    if (end == first || w->last[end - 1] < 0) {
        return -1;
    }
    const LNode *n = w->nodes + w->last[end - 1];
    const LApi *a = w->apis + n->api;
    return a->ts <= ts && ts <= a->bound ? w->last[end - 1] : -1;
}

/* Feeds node_basic_info records (kind 1): 1, 0 declined, -1 error. */
static int
lean_basics(Lean *w, const Source *src)
{
    static const int BASIC[] = {0, 2, 3, 5, 7};
    static const Raw BASIC_RAW[] = {{2, 2}, {8, 4}, {16, 8}, {32, 4}, {44, 4}};
    uint64_t f[5];
    PyObject *rec;
    for (Py_ssize_t i = 0; i < src->n; i++) {
        RELEASE_POINT(i, RELEASE_READS);
        if (record(src, i, 9, BASIC, BASIC_RAW, 5, f, &rec) <= 0 || f[0] != NODE_LEVEL) {
            return 0;
        }
        Named *b = named(w, &w->payloads, &w->basics, &w->nbasics, &w->capbasics, L_BASIC, f[3], f[4], 2);
        if (b == NULL) {
            return -1;
        }
        if (!PyTuple_Check(b->obj) || PyTuple_Size(b->obj) != 3) {
            PyErr_SetString(PyExc_TypeError, "_chost: a node_basic_info payload is not a triple");
            return -1;
        }
        int32_t node = attached(w, f[1], f[2]);
        if (node >= 0) {
            LNode *nd = w->nodes + node;
            if (nd->basic < 0 || f[2] >= nd->basic_ts) {
                nd->basic = (int32_t)(b - w->basics);
                nd->basic_ts = f[2];
            }
        }
    }
    return 1;
}

/* A host task's ids, packed as host_task packs them (context: 1 invalid, 0 zero): 0 kept, 0 with
 * *out_of_range set, -1 error. */
static int
lean_key(Lean *w, uint64_t device, uint64_t stream, uint64_t task, int invalid, int *out_of_range)
{
    if (device >> 10 || stream >> 20 || task >> 32) {
        *out_of_range = 1;
        return 0;
    }
    if (ROOM(w, keys, nkeys, capkeys) < 0) {
        return -1;
    }
    w->keys[w->nkeys++] = device << 53 | stream << 33 | task << 1 | (uint64_t)invalid;
    return 0;
}

/* The GE task of a kernel task and its node, as add() makes it at level 1: 1 (made or none), 0
 * declined, -1 error. */
static int
lean_ge(Lean *w, uint64_t device, uint64_t stream, uint64_t task, const Named *kname, int32_t node)
{
    const LNode *n = node >= 0 ? w->nodes + node : NULL;
    const Named *nm = n != NULL ? w->names + n->name : NULL;
    const Named *b = n != NULL && n->basic >= 0 ? w->basics + n->basic : NULL;
    int rule = kernel_rule(n != NULL, nm ? (int8_t)nm->flags : 0, (int)kname->flags, 0, b ? (int)b->flags : -1,
                           n ? n->others : 0);
    if (rule != GE_NODE_BASIC) {
        return rule == GE_NONE ? 1 : 0; /* (level 1: none, or declined) */
    }
    int fresh;
    int64_t *d = map_get(&w->devices, device, 0, &fresh);
    if (d == NULL) {
        return -1;
    }
    if (fresh) {
        if (ROOM(w, outs, nouts, capouts) < 0) {
            return -1;
        }
        w->outs[w->nouts].ge = (GeVec){NULL, 0, 0};
        w->outs[w->nouts].device = device;
        *d = w->nouts++;
    }
    int64_t *tmpl = map_get(&w->tmpls, (uint64_t)(uintptr_t)nm->obj, (uint64_t)(uintptr_t)b->obj, &fresh);
    if (tmpl == NULL) {
        return -1;
    }
    if (fresh) {
        PyObject *items[9] = {PyLong_FromUnsignedLongLong(device), PyLong_FromUnsignedLongLong(stream),
                              PyLong_FromUnsignedLongLong(task), w->c.lookups[L_INVALID], PyLong_FromLong(0),
                              nm->obj, PyTuple_GetItem(b->obj, 0), PyTuple_GetItem(b->obj, 1),
                              PyTuple_GetItem(b->obj, 2)};
        PyObject *rec = NULL;
        if (items[0] && items[1] && items[2] && items[4]) {
            for (int j = 3; j < 9; j++) {
                if (j != 4) { /* (items[4] is new) */
                    Py_INCREF(items[j]);
                }
            }
            allocfunc alloc = (allocfunc)PyType_GetSlot((PyTypeObject *)w->c.lookups[L_GE_TASK], Py_tp_alloc);
            rec = alloc == NULL ? NULL : record_new((PyTypeObject *)w->c.lookups[L_GE_TASK], alloc, items, 9);
            if (alloc == NULL) {
                for (int j = 0; j < 9; j++) {
                    Py_DECREF(items[j]);
                }
            }
        }
        else {
            Py_XDECREF(items[0]);
            Py_XDECREF(items[1]);
            Py_XDECREF(items[2]);
            Py_XDECREF(items[4]);
        }
        if (rec == NULL) {
            return -1;
        }
        *tmpl = PyList_Size(w->templates);
        int rc = PyList_Append(w->templates, rec);
        Py_DECREF(rec);
        if (rc < 0) {
            return -1;
        }
    }
    GeVec *out = &w->outs[*d].ge;
    if (room((void **)&out->v, out->n, &out->cap, sizeof(GePacked)) < 0) {
        return -1;
    }
    out->v[out->n++] = (GePacked){(uint32_t)stream, (uint32_t)task, (uint32_t)*tmpl};
    return 1;
}

/* Feeds task_track records (kind 2): 1, 0 declined, -1 error. */
static int
lean_tracks(Lean *w, const Source *src)
{
    static const int TRACK[] = {0, 3, 4, 5, 6, 8, 9, 10, 2, 7};
    static const Raw TRACK_RAW[] = {{2, 2}, {16, 8}, {24, 2}, {24, 2}, {26, 2},
                                    {30, 2}, {32, 8}, {40, 8}, {8, 4}, {28, 2}};
    uint64_t f[10];
    PyObject *rec;
    int fresh, out_of_range = 0;
    for (Py_ssize_t i = 0; i < src->n; i++) {
        RELEASE_POINT(i, RELEASE_READS);
        if (record(src, i, 11, TRACK, TRACK_RAW, 10, f, &rec) <= 0) {
            return 0;
        }
        f[2] = (f[2] >> 12) & 0xF;
        f[3] &= 0xFFF;
        if (f[0] != RUNTIME_LEVEL) {
            return 0;
        }
        Named *type = named(w, &w->types, &w->ttypes, &w->ntypes, &w->captypes, L_TRACK_TYPE, f[0], f[6], 2);
        if (type == NULL) {
            return -1;
        }
        if (type->flags & T_FLIP) {
            int64_t *first = map_get(&w->flips, f[3], f[4], &fresh);
            if (first == NULL) {
                return -1;
            }
            if (fresh || (uint64_t)*first > f[1]) {
                *first = (int64_t)f[1];
            }
            continue;
        }
        if (type->flags & T_MAINTENANCE) {
            continue;
        }
        if (f[2] != 0) {
            return 0; /* a DPU task: declined */
        }
        Named *kname = named(w, &w->kernels, &w->knames, &w->nknames, &w->capknames, L_KERNEL_NAME, f[7], 0, 1);
        if (kname == NULL) {
            return -1;
        }
        w->batched |= f[5] != 0;
        if (w->all_export) {
            int64_t *end = map_get(&w->ends, f[3], f[4], &fresh);
            if (end == NULL) {
                return -1;
            }
            if (fresh || (uint64_t)*end < f[1]) {
                *end = (int64_t)f[1]; /* the group's last task in time order */
            }
        }
        if (lean_key(w, f[3], f[4], f[9], 1, &out_of_range) < 0 ||
            ((type->flags & T_CONTEXTS) && (type->flags & T_MIX) &&
             lean_key(w, f[3], f[4], f[9], 0, &out_of_range) < 0)) {
            return -1;
        }
        if (out_of_range) {
            return 0;
        }
        if (!(type->flags & T_KERNEL)) {
            continue;
        }
        /* the task's stack: the last call's at or before it, popped to its time */
        Py_ssize_t first, end;
        calls_until(w, f[8], f[1], &first, &end);
        int32_t q = end > first ? w->top[end - 1] : -1;
        while (q >= 0 && w->apis[q].bound < f[1]) {
            q = w->parent[q];
        }
        int made = lean_ge(w, f[3], f[4], f[9], kname, q >= 0 ? w->ctx[q] : -1);
        if (made <= 0) {
            return made;
        }
    }
    return 1;
}

PyDoc_STRVAR(lean_feed_doc,
             "lean_feed(walk, kind, data, /)\n--\n\n"
             "Feeds the lean walk one slice of host records (bytes or a memory map, whole records,\n"
             "read in place): kind 0 api_event (before lean_walk), 1 node_basic_info and 2\n"
             "task_track (after it, in that order). False: the walk declines the run (read it whole).");

static PyObject *
lean_feed(PyObject *self, PyObject *args)
{
    PyObject *capsule, *data;
    int kind;
    (void)self;
    if (!PyArg_ParseTuple(args, "OiO:lean_feed", &capsule, &kind, &data)) {
        return NULL;
    }
    if (kind < 0 || kind > 2) {
        PyErr_SetString(PyExc_ValueError, "lean_feed: kind is 0, 1 or 2");
        return NULL;
    }
    Lean *w = lean_of(capsule, kind == 0 ? LEAN_APIS : LEAN_WALKED);
    if (w == NULL) {
        return NULL;
    }
    Py_ssize_t size = kind == 0 ? 40 : 64;
    const unsigned char *buf;
    Py_ssize_t len;
    if (raw_data(data, &buf, &len) < 0) {
        return NULL;
    }
    if (!little_endian() || len % size != 0) {
        Py_RETURN_FALSE;
    }
    Source src = {NULL, buf, len / size, size};
    if (kind == 1 && w->last == NULL) {
        Py_RETURN_FALSE; /* (basics after task_track records: not the walk's order) */
    }
    if (kind == 2 && w->last != NULL) { /* (only basics and tensors read it: placed by now) */
        FREE_RELEASED(w->last);
        w->last = NULL;
    }
    int rc = kind == 0 ? lean_apis(w, &src) : kind == 1 ? lean_basics(w, &src) : lean_tracks(w, &src);
    if (rc < 0) {
        return NULL;
    }
    return PyBool_FromLong(rc);
}

PyDoc_STRVAR(lean_walk_doc,
             "lean_walk(walk, /)\n--\n\n"
             "Sorts the calls fed and walks each thread's; False: the walk declines the run.");

static PyObject *
lean_walk(PyObject *self, PyObject *capsule)
{
    (void)self;
    Lean *w = lean_of(capsule, LEAN_APIS);
    if (w == NULL) {
        return NULL;
    }
    int rc = lean_sorted_walk(w);
    if (rc < 0) {
        return NULL;
    }
    w->stage = LEAN_WALKED;
    return PyBool_FromLong(rc);
}

PyDoc_STRVAR(lean_tensors_doc,
             "lean_tensors(walk, records, /)\n--\n\n"
             "Feeds the tensor_info header records (a list of 4-tuples: level, struct type, thread,\n"
             "timestamp), after lean_walk; False: the walk declines the run.");

static PyObject *
lean_tensors(PyObject *self, PyObject *args)
{
    PyObject *capsule, *records;
    (void)self;
    if (!PyArg_ParseTuple(args, "OO!:lean_tensors", &capsule, &PyList_Type, &records)) {
        return NULL;
    }
    Lean *w = lean_of(capsule, LEAN_WALKED);
    if (w == NULL) {
        return NULL;
    }
    static const int TENSOR[] = {0, 2, 3};
    uint64_t f[3];
    for (Py_ssize_t i = 0; i < PyList_Size(records); i++) {
        RELEASE_POINT(i, RELEASE_READS);
        int ok = fields(PyList_GetItem(records, i), 4, TENSOR, 3, f);
        if (ok < 0) {
            return NULL;
        }
        if (ok == 0 || f[0] != NODE_LEVEL) {
            Py_RETURN_FALSE;
        }
        int32_t node = attached(w, f[1], f[2]);
        if (node >= 0) {
            w->nodes[node].others = 1;
        }
    }
    Py_RETURN_TRUE;
}

static void
ge_vec_free(PyObject *capsule)
{
    GeVec *v = PyCapsule_GetPointer(capsule, GE_CAPSULE);
    if (v == NULL) {
        PyErr_Clear();
        return;
    }
    FREE_RELEASED(v->v);
    scratch_free(v);
}

PyDoc_STRVAR(lean_finish_doc,
             "lean_finish(walk, /)\n--\n\n"
             "The GE tasks, after every record is fed: ({device: (capsule, number)}, templates), the\n"
             "capsules packed as _gepack.h says (read with ge_items); None: the walk declines the run\n"
             "(two host tasks of one id, a task id that wrapped, batch ids without the all-export\n"
             "grouping).");

static PyObject *
lean_finish(PyObject *self, PyObject *capsule)
{
    (void)self;
    Lean *w = lean_of(capsule, LEAN_WALKED);
    if (w == NULL) {
        return NULL;
    }
    w->stage = LEAN_DONE;
    if (!w->all_export && w->batched) {
        Py_RETURN_NONE;
    }
    for (size_t j = 0; w->all_export && j < w->ends.cap; j++) {
        RELEASE_POINT(j, RELEASE_PLAIN);
        const Slot *s = w->ends.s + j;
        const int64_t *limit = s->used ? map_find(&w->flips, s->a, s->b) : NULL;
        if (limit != NULL && (uint64_t)s->v >= (uint64_t)*limit) {
            Py_RETURN_NONE; /* task ids wrapped: declined by the whole walk */
        }
    }
    if (twice(w->keys, w->nkeys)) {
        Py_RETURN_NONE;
    }
    PyObject *out = PyDict_New();
    if (out == NULL) {
        return NULL;
    }
    for (Py_ssize_t d = 0; d < w->nouts; d++) {
        GeVec *v = scratch_malloc(sizeof(GeVec));
        if (v == NULL) {
            Py_DECREF(out);
            return PyErr_NoMemory();
        }
        *v = w->outs[d].ge;
        w->outs[d].ge = (GeVec){NULL, 0, 0};
        PyObject *ge = PyCapsule_New(v, GE_CAPSULE, ge_vec_free);
        if (ge == NULL) {
            FREE_RELEASED(v->v);
            scratch_free(v);
            Py_DECREF(out);
            return NULL;
        }
        PyObject *device = PyLong_FromUnsignedLongLong(w->outs[d].device);
        PyObject *value = Py_BuildValue("(Nn)", ge, v->n);
        int rc = device && value ? PyDict_SetItem(out, device, value) : -1;
        Py_XDECREF(device);
        Py_XDECREF(value);
        if (rc < 0) {
            Py_DECREF(out);
            return NULL;
        }
    }
    return Py_BuildValue("(NO)", out, w->templates);
}

PyDoc_STRVAR(ge_items_doc,
             "ge_items(ge, templates, device, start, stop, /)\n--\n\n"
             "GE task records ge[start:stop] of a packed device (a capsule lean_finish gave, with its\n"
             "templates): cls(device, stream, task, context, batch, *template[5:9]), of the\n"
             "templates' class, context and batch.");

static PyObject *
ge_items(PyObject *self, PyObject *args)
{
    PyObject *capsule, *templates, *device;
    Py_ssize_t start, stop;
    (void)self;
    if (!PyArg_ParseTuple(args, "OO!Onn:ge_items", &capsule, &PyList_Type, &templates, &device, &start, &stop)) {
        return NULL;
    }
    GeVec *v = PyCapsule_GetPointer(capsule, GE_CAPSULE);
    if (v == NULL) {
        return NULL;
    }
    if (start < 0 || stop < start || stop > v->n) {
        PyErr_SetString(PyExc_ValueError, "ge_items: needs 0 <= start <= stop <= the tasks' number");
        return NULL;
    }
    PyObject *list = PyList_New(stop - start);
    if (list == NULL) {
        return NULL;
    }
    for (Py_ssize_t i = start; i < stop; i++) {
        RELEASE_POINT(i, RELEASE_OBJECTS);
        const GePacked *g = v->v + i;
        PyObject *t = PyList_GetItem(templates, g->tmpl);
        if (t == NULL || !PyTuple_Check(t) || PyTuple_Size(t) != 9) {
            Py_DECREF(list);
            if (!PyErr_Occurred()) {
                PyErr_SetString(PyExc_TypeError, "ge_items: a template is not a GE task");
            }
            return NULL;
        }
        PyObject *items[9] = {device, PyLong_FromUnsignedLong(g->stream), PyLong_FromUnsignedLong(g->task)};
        if (items[1] == NULL || items[2] == NULL) {
            Py_XDECREF(items[1]);
            Py_XDECREF(items[2]);
            Py_DECREF(list);
            return NULL;
        }
        Py_INCREF(device);
        for (int j = 3; j < 9; j++) {
            items[j] = PyTuple_GetItem(t, j);
            Py_INCREF(items[j]);
        }
        PyTypeObject *cls = Py_TYPE(t);
        allocfunc alloc = (allocfunc)PyType_GetSlot(cls, Py_tp_alloc);
        PyObject *rec = alloc == NULL ? NULL : record_new(cls, alloc, items, 9);
        if (rec == NULL) {
            if (alloc == NULL) {
                for (int j = 0; j < 9; j++) {
                    Py_DECREF(items[j]);
                }
            }
            Py_DECREF(list);
            return NULL;
        }
        if (PyUnicode_Check(items[5]) && PyUnicode_Check(items[6])) {
            PyObject_GC_UnTrack(rec); /* ints and strs: no cycle */
        }
        PyList_SetItem(list, i - start, rec);
    }
    return list;
}

static PyMethodDef methods[] = {
    {"host_tables", host_tables, METH_VARARGS, host_tables_doc},
    {"in_place", in_place, METH_VARARGS, in_place_doc},
    {"lean_new", lean_new, METH_VARARGS, lean_new_doc},
    {"lean_feed", lean_feed, METH_VARARGS, lean_feed_doc},
    {"lean_walk", lean_walk, METH_O, lean_walk_doc},
    {"lean_tensors", lean_tensors, METH_VARARGS, lean_tensors_doc},
    {"lean_finish", lean_finish, METH_O, lean_finish_doc},
    {"ge_items", ge_items, METH_VARARGS, ge_items_doc},
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
    "asc_aprof._plans._raw._chost",
    "The raw reader's host call tree in C (optional accelerator; see asc_aprof._plans._raw._host).",
    0,
    methods,
    slots,
    NULL,
    NULL,
    NULL,
};

PyMODINIT_FUNC
PyInit__chost(void)
{
    return PyModuleDef_Init(&module);
}
