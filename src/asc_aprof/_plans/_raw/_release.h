/* Release points: the raw reader's C loops let the GIL go for a moment at bounded intervals.
 *
 * read_run_async decodes in a worker thread while an event loop runs in another. A C call that
 * loops over a run's records holds the GIL from start to end (a second for 500,000 tasks), and
 * the event loop cannot run meanwhile. So every loop whose length grows with the run passes a
 * release point every N iterations, N chosen per kind of loop so that the work between two
 * checks stays in the tens of microseconds:
 *
 *   RELEASE_OBJECTS  loops that make Python objects or call Python (about 0.3 to 2 us each);
 *   RELEASE_READS    loops that read Python objects or hash keys in C (up to about 0.2 us each);
 *   RELEASE_PLAIN    loops over C arrays only (a few ns to a few tens of ns each).
 *
 * A release point lets the GIL go and takes it back, if this thread last did so at least
 * RELEASE_INTERVAL_NS ago (a monotonic clock read at each check); otherwise it does nothing.
 * How CPython (3.11 and later) hands the GIL over: a thread that wants it waits on a condition
 * variable for one switch interval (sys.getswitchinterval(), which asc_aprof._runs._raw_files pins
 * to SWITCH_INTERVAL while a decode runs); if nothing woke it meanwhile, it asks the holder to
 * drop the GIL, and the holder's next release then waits until the other thread has it. But
 * every release wakes the waiter and restarts its wait, and the releasing thread, already
 * running, nearly always takes the GIL back first: releasing more often than the switch
 * interval would keep the waiter from ever asking (measured: stalls of 20-100 ms with a
 * release every 64 records). So releases are spaced RELEASE_INTERVAL_NS apart, twice the
 * switch interval: a waiter asks within one interval of its wait, and gets the GIL at the
 * next release, at most RELEASE_INTERVAL_NS + the switch interval after it began to wait.
 * Sections that touch no Python object at all (sorting C arrays) run with the GIL released
 * throughout (RELEASED_IF): long enough for a waiter to take it.
 *
 * Why this is safe: while the GIL is released this thread touches no Python object, and when it
 * takes the GIL back every borrowed reference the loop holds is still valid because the objects
 * the loops read are private to the decode that called them: lists, dicts and tuples the decode
 * built itself (or tuples and bytes, which are immutable), passed to these functions by the
 * raw reader's own code (_run.py, _host.py, _pmu.py, _chunked.py, _types.py), which never shares
 * them with another thread while a call runs. Only another thread mutating those containers
 * could invalidate a borrowed item, and none can reach them. (The loops call back into Python
 * already, where the interpreter may switch threads at any bytecode; they relied on the same
 * privacy before.)
 */
#ifndef ASC_APROF_RELEASE_H
#define ASC_APROF_RELEASE_H

#include <Python.h>
#include <stdint.h>
#include <stdlib.h>

#define RELEASE_OBJECTS 64
#define RELEASE_READS 256
#define RELEASE_PLAIN 4096

/* At least this long between two releases of one thread: twice _driver.SWITCH_INTERVAL. */
#define RELEASE_INTERVAL_NS 500000

#if defined(_WIN32)
#include <windows.h>

static uint64_t
release_clock_ns(void)
{
    LARGE_INTEGER count, hertz;
    QueryPerformanceCounter(&count);
    QueryPerformanceFrequency(&hertz);
    return (uint64_t)((double)count.QuadPart / (double)hertz.QuadPart * 1e9);
}
#else
#include <time.h>

static uint64_t
release_clock_ns(void)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec;
}
#endif

#if defined(_MSC_VER)
#define RELEASE_THREAD_LOCAL __declspec(thread)
#else
#define RELEASE_THREAD_LOCAL _Thread_local
#endif

/* When this thread last let the GIL go at a release point (0: not yet). */
static RELEASE_THREAD_LOCAL uint64_t release_last_ns;

/* Lets the GIL go and takes it back: another thread that asked for it gets it here. */
static void
release_gil(void)
{
    Py_BEGIN_ALLOW_THREADS
    Py_END_ALLOW_THREADS
    release_last_ns = release_clock_ns();
}

/* release_gil() if this thread last let the GIL go RELEASE_INTERVAL_NS ago or longer. */
static void
release_if_due(void)
{
    if (release_clock_ns() - release_last_ns >= RELEASE_INTERVAL_NS) {
        release_gil();
    }
}

/* A release point at the start of iteration i of a loop: every `every` (a power of two)
 * iterations, release_if_due(). Put where the loop holds no reference it has not accounted for. */
#define RELEASE_POINT(i, every)                                                                    \
    do {                                                                                           \
        if (((size_t)(i) & ((size_t)(every) - 1)) == (size_t)(every) - 1) {                        \
            release_if_due();                                                                      \
        }                                                                                          \
    } while (0)

/* Runs the statement with the GIL released where cond holds (a section big enough to be worth
 * the switch); it must touch no Python object and call no Python API (PyMem_* included). */
#define RELEASED_IF(cond, statement)                                                               \
    do {                                                                                           \
        if (cond) {                                                                                \
            Py_BEGIN_ALLOW_THREADS statement;                                                      \
            Py_END_ALLOW_THREADS                                                                   \
            release_last_ns = release_clock_ns();                                                  \
        }                                                                                          \
        else {                                                                                     \
            statement;                                                                             \
        }                                                                                          \
    } while (0)

/* Sections of more elements than this run with the GIL released. */
#define RELEASE_SECTION 4096

/* -- scratch memory ----------------------------------------------------------------------------
 * Every array these loops allocate comes from scratch_malloc / calloc / realloc and goes back
 * through scratch_free. A block of SCRATCH_MAPPED_MIN bytes or more is its own anonymous memory
 * map, whose pages go back to the kernel when it is freed. From malloc, glibc would serve many
 * of these blocks from its heap instead (its mmap threshold rises to the size of the biggest
 * mapped block freed so far, up to 32 MiB) and keep their pages after free: measured on a
 * 1,000,000-task read, some 30 MB more peak memory. (Elsewhere than POSIX: malloc itself.) */
#if defined(__unix__) || defined(__APPLE__)
#include <string.h>
#include <sys/mman.h>
#define SCRATCH_MAPS 1
#else
#define SCRATCH_MAPS 0
#endif

#define SCRATCH_MAPPED_MIN ((size_t)1 << 20)

typedef struct {
    size_t size;   /* the bytes asked for */
    size_t mapped; /* 1: its own map (of size + the header) */
} ScratchHead;     /* 16 bytes: the block after it keeps malloc's alignment */

static void *
scratch_malloc(size_t n)
{
    if (n > SIZE_MAX - sizeof(ScratchHead)) {
        return NULL;
    }
    size_t total = n + sizeof(ScratchHead);
    ScratchHead *h;
#if SCRATCH_MAPS
    if (total >= SCRATCH_MAPPED_MIN) {
        void *p = mmap(NULL, total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED) {
            return NULL;
        }
        h = p;
        h->mapped = 1;
        h->size = n;
        return h + 1;
    }
#endif
    h = malloc(total);
    if (h == NULL) {
        return NULL;
    }
    h->mapped = 0;
    h->size = n;
    return h + 1;
}

static void
scratch_free(void *p)
{
    if (p == NULL) {
        return;
    }
    ScratchHead *h = (ScratchHead *)p - 1;
#if SCRATCH_MAPS
    if (h->mapped) {
        munmap(h, h->size + sizeof(ScratchHead));
        return;
    }
#endif
    free(h);
}

static void *
scratch_calloc(size_t n, size_t size)
{
    if (size != 0 && n > SIZE_MAX / size) {
        return NULL;
    }
    void *p = scratch_malloc(n * size);
    if (p != NULL && !((ScratchHead *)p - 1)->mapped) {
        memset(p, 0, n * size); /* (a new map is zeros already) */
    }
    return p;
}

static void *
scratch_realloc(void *p, size_t n)
{
    if (p == NULL) {
        return scratch_malloc(n);
    }
    ScratchHead *h = (ScratchHead *)p - 1;
    size_t old = h->size;
    if (!h->mapped && n + sizeof(ScratchHead) < SCRATCH_MAPPED_MIN && n <= SIZE_MAX - sizeof(ScratchHead)) {
        ScratchHead *grown = realloc(h, n + sizeof(ScratchHead));
        if (grown == NULL) {
            return NULL;
        }
        grown->size = n;
        return grown + 1;
    }
#if SCRATCH_MAPS && defined(MREMAP_MAYMOVE)
    if (h->mapped && n <= SIZE_MAX - sizeof(ScratchHead)) {
        void *moved = mremap(h, old + sizeof(ScratchHead), n + sizeof(ScratchHead), MREMAP_MAYMOVE);
        if (moved == MAP_FAILED) {
            return NULL;
        }
        h = moved;
        h->size = n;
        return h + 1;
    }
#endif
    void *q = scratch_malloc(n);
    if (q == NULL) {
        return NULL;
    }
    memcpy(q, p, old < n ? old : n);
    scratch_free(p);
    return q;
}

/* Scratch arrays as big as the run (C values only, no Python object) come from scratch_malloc,
 * not PyMem_Malloc, and are freed with the GIL released: freeing tens of megabytes of touched pages
 * (the kernel takes them back) holds a thread about 10 ms, and PyMem_Free needs the GIL. */
static void
free_released(void **blocks, size_t n)
{
    Py_BEGIN_ALLOW_THREADS
    for (size_t j = 0; j < n; j++) {
        scratch_free(blocks[j]);
    }
    Py_END_ALLOW_THREADS
    release_last_ns = release_clock_ns();
}

/* scratch_free() of each scratch array (NULL allowed), with the GIL released. */
#define FREE_RELEASED(...)                                                                         \
    do {                                                                                           \
        void *blocks_[] = {__VA_ARGS__};                                                           \
        free_released(blocks_, sizeof blocks_ / sizeof blocks_[0]);                                \
    } while (0)

/* A growing array of new references (a list in the making): a list's own growth copies or
 * remaps its whole array with the GIL held (several ms past a million items); this array grows
 * with the GIL released, and objvec_list() makes the list at its final size. */
typedef struct {
    PyObject **items;
    Py_ssize_t n, cap;
} ObjVec;

/* Appends item (a new reference, stolen; NULL: its creation failed). -1 with an exception. */
static int
objvec_push(ObjVec *v, PyObject *item)
{
    if (item == NULL) {
        return -1;
    }
    if (v->n == v->cap) {
        size_t cap = v->cap ? (size_t)v->cap * 2 : 1024;
        PyObject **grown;
        RELEASED_IF(v->cap > RELEASE_SECTION, grown = scratch_realloc(v->items, cap * sizeof(PyObject *)));
        if (grown == NULL) {
            Py_DECREF(item);
            PyErr_NoMemory();
            return -1;
        }
        v->items = grown;
        v->cap = (Py_ssize_t)cap;
    }
    v->items[v->n++] = item;
    return 0;
}

/* Lets go of every item and of the array (an error path). */
static void
objvec_clear(ObjVec *v)
{
    for (Py_ssize_t i = 0; i < v->n; i++) {
        RELEASE_POINT(i, RELEASE_READS);
        Py_DECREF(v->items[i]);
    }
    FREE_RELEASED(v->items);
    v->items = NULL;
    v->n = v->cap = 0;
}

/* A new list of the items (moved into it), the array freed; NULL with an exception (the items
 * let go). */
static PyObject *
objvec_list(ObjVec *v)
{
    PyObject *list = PyList_New(v->n);
    if (list == NULL) {
        objvec_clear(v);
        return NULL;
    }
    for (Py_ssize_t i = 0; i < v->n; i++) {
        RELEASE_POINT(i, RELEASE_READS);
        PyList_SetItem(list, i, v->items[i]);
    }
    FREE_RELEASED(v->items);
    v->items = NULL;
    v->n = v->cap = 0;
    return list;
}

#endif
