/* A raw file's contents, as the C loops read them in place: bytes, or an anonymous memory map
 * (asc_aprof._raw._decode.RawData: the driver reads big record files into maps, which CPython
 * frees with the GIL released; freeing a bytes object of 64 MB holds it for about 10 ms).
 *
 * The buffer protocol joined the limited API only in Python 3.11, and these extensions are built
 * for 3.10's: a map's memory is found with PyObject_AsReadBuffer, the older call the stable ABI
 * keeps for exactly this (deprecated, but exported by every CPython 3). The pointer it gives
 * stays valid while the object lives and is neither closed nor resized: the decode's own maps
 * are not (the same privacy _release.h relies on). */
#ifndef ASC_APROF_RAWDATA_H
#define ASC_APROF_RAWDATA_H

#include <Python.h>

PyAPI_FUNC(int) PyObject_AsReadBuffer(PyObject *obj, const void **buffer, Py_ssize_t *buffer_len);

/* The bytes of obj (bytes, or an object with a contiguous buffer): 0, or -1 with an exception. */
static int
raw_data(PyObject *obj, const unsigned char **data, Py_ssize_t *len)
{
    if (PyBytes_Check(obj)) {
        char *buf;
        if (PyBytes_AsStringAndSize(obj, &buf, len) < 0) {
            return -1;
        }
        *data = (const unsigned char *)buf;
        return 0;
    }
    const void *buf;
#if defined(__GNUC__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
#elif defined(_MSC_VER)
#pragma warning(push)
#pragma warning(disable : 4996)
#endif
    int rc = PyObject_AsReadBuffer(obj, &buf, len);
#if defined(__GNUC__)
#pragma GCC diagnostic pop
#elif defined(_MSC_VER)
#pragma warning(pop)
#endif
    if (rc < 0) {
        return -1;
    }
    *data = (const unsigned char *)buf;
    return 0;
}

#endif
