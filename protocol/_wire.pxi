# Shared by the compiled twins (included by protocol/_speedups.pyx and
# store/_speedups.pyx): big-endian integers in and out of raw buffers, and the raw bytes of
# text that is ASCII (a compact ASCII str's data is its UTF-8) or of a bytes object.

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_GET_SIZE
from libc.stdint cimport int16_t, int32_t, uint32_t, uint64_t


cdef extern from "Python.h":
    bint PyUnicode_IS_COMPACT_ASCII(object)
    void* PyUnicode_DATA(object)
    Py_ssize_t PyUnicode_GET_LENGTH(object)
    int PyUnicode_KIND(object)


cdef inline int32_t _i32(const unsigned char* p) noexcept:
    return <int32_t>((<uint32_t>p[0] << 24) | (<uint32_t>p[1] << 16) | (<uint32_t>p[2] << 8) | <uint32_t>p[3])


cdef inline int16_t _i16(const unsigned char* p) noexcept:
    return <int16_t>((<uint32_t>p[0] << 8) | <uint32_t>p[1])


cdef inline void _put16(unsigned char* p, uint32_t v) noexcept:
    p[0] = (v >> 8) & 0xFF
    p[1] = v & 0xFF


cdef inline void _put32(unsigned char* p, uint32_t v) noexcept:
    p[0] = (v >> 24) & 0xFF
    p[1] = (v >> 16) & 0xFF
    p[2] = (v >> 8) & 0xFF
    p[3] = v & 0xFF


cdef inline void _put64(unsigned char* p, uint64_t v) noexcept:
    cdef int i
    for i in range(8):
        p[i] = (v >> (56 - 8 * i)) & 0xFF


cdef inline Py_ssize_t _size(object piece) noexcept:
    """Bytes of an ASCII str or of a bytes object."""
    if type(piece) is str:
        return PyUnicode_GET_LENGTH(piece)
    return PyBytes_GET_SIZE(piece)


cdef inline const char* _ptr(object piece) noexcept:
    """Where those bytes are."""
    if type(piece) is str:
        return <const char*>PyUnicode_DATA(piece)
    return PyBytes_AS_STRING(piece)


cdef object _utf8_or_none(object text):
    """ASCII text as is, other text as UTF-8 bytes; None when it has no UTF-8 form."""
    if PyUnicode_IS_COMPACT_ASCII(text):
        return text
    try:
        return text.encode()
    except UnicodeEncodeError:
        return None
