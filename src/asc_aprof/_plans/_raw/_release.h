/* Release points: the raw reader's C loops let the GIL go for a moment at bounded intervals.
 *
 * read_run_async decodes in a worker thread while an event loop runs in another. A C call that
 * loops over a run's records holds the GIL from start to end (a second for 500,000 tasks), and
 * the event loop cannot run meanwhile. So every loop whose length grows with the run passes a
 * release point every N iterations, N chosen per kind of loop so that the work between two
 * points stays in the tens of microseconds:
 *
 *   RELEASE_OBJECTS  loops that make Python objects or call Python (about 0.3 to 2 us each);
 *   RELEASE_READS    loops that read Python objects or hash keys in C (up to about 0.2 us each);
 *   RELEASE_PLAIN    loops over C arrays only (a few ns to a few tens of ns each).
 *
 * A release point releases the GIL and takes it back. A thread waiting for the GIL asks for it
 * after sys.getswitchinterval() (which asc_aprof._raw._driver pins low while a decode runs), and
 * CPython makes the holder hand it over at its next release; without a waiter it costs a mutex
 * round trip. Sections that touch no Python object at all (sorting C arrays) run with the GIL
 * released throughout (RELEASED_IF).
 *
 * Why this is safe: while the GIL is released this thread touches no Python object, and when it
 * takes the GIL back every borrowed reference the loop holds is still valid because the objects
 * the loops read are private to the decode that called them: lists, dicts and tuples the decode
 * built itself (or tuples and bytes, which are immutable), passed to these functions by the
 * raw reader's own code (_run.py, _host.py, _types.py), which never shares them with another
 * thread while a call runs. Only another thread mutating those containers could invalidate a
 * borrowed item, and none can reach them. (The loops call back into Python already, where the
 * interpreter may switch threads at any bytecode; they relied on the same privacy before.)
 */
#ifndef ASC_APROF_RELEASE_H
#define ASC_APROF_RELEASE_H

#include <Python.h>

#define RELEASE_OBJECTS 64
#define RELEASE_READS 256
#define RELEASE_PLAIN 4096

/* Lets the GIL go and takes it back: another thread that asked for it gets it here. */
static void
release_gil(void)
{
    Py_BEGIN_ALLOW_THREADS
    Py_END_ALLOW_THREADS
}

/* A release point at the start of iteration i of a loop: every `every` (a power of two)
 * iterations. Put where the loop holds no reference it has not accounted for. */
#define RELEASE_POINT(i, every)                                                                    \
    do {                                                                                           \
        if (((size_t)(i) & ((size_t)(every) - 1)) == (size_t)(every) - 1) {                        \
            release_gil();                                                                         \
        }                                                                                          \
    } while (0)

/* Runs the statement with the GIL released where cond holds (a section big enough to be worth
 * the switch); it must touch no Python object and call no Python API (PyMem_* included). */
#define RELEASED_IF(cond, statement)                                                               \
    do {                                                                                           \
        if (cond) {                                                                                \
            Py_BEGIN_ALLOW_THREADS statement;                                                      \
            Py_END_ALLOW_THREADS                                                                   \
        }                                                                                          \
        else {                                                                                     \
            statement;                                                                             \
        }                                                                                          \
    } while (0)

/* Sections of more elements than this run with the GIL released. */
#define RELEASE_SECTION 4096

#endif
