# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Compiled twins of the protocol's hottest functions (header codecs, frame steps).

Every function here has a pure-Python twin that stays the reference: the callers in
:mod:`rocklet.protocol.header_codec` pick this module when it was built and
``ROCKLET_PURE_PYTHON`` is not set, and ``tests/protocol/test_speedups.py`` checks both
give identical results (and identical errors) on generated and hostile input. Anything
unusual (a value that is not a plain ``str``, text that is not UTF-8 encodable) is
handed back to the Python twin rather than handled twice.
"""

from cpython.bytearray cimport (
    PyByteArray_AS_STRING,
    PyByteArray_FromStringAndSize,
    PyByteArray_GET_SIZE,
)
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.object cimport PyObject
from cpython.unicode cimport PyUnicode_DecodeUTF8
from libc.stdint cimport int16_t, int32_t, int64_t, uint32_t, uint64_t
from libc.string cimport memcmp, memcpy

from rocklet.protocol.errors import FrameError


include "_wire.pxi"


def decode_binary(bytes data):
    """Split a ROCKETMQ binary header into its fields.

    Args:
        data: The header bytes.

    Returns:
        ``(code, language number, version, opaque, flag, remark or None, ext dict)``.

    Raises:
        FrameError: A length overruns the header (the same messages as the Python twin).
    """
    return _decode_binary(<const unsigned char*>PyBytes_AS_STRING(data), PyBytes_GET_SIZE(data))


cdef tuple _decode_binary(const unsigned char* p, Py_ssize_t size):
    cdef Py_ssize_t pos
    cdef int32_t remark_len, ext_len, vlen
    cdef int16_t klen
    if size < 21:
        raise FrameError(f"binary header of {size} bytes is shorter than the minimum 21")
    code = _i16(p)
    lang = <signed char>p[2]
    version = _i16(p + 3)
    opaque = _i32(p + 5)
    flag = _i32(p + 9)
    pos = 13
    remark_len = _i32(p + pos)
    pos += 4
    if remark_len < 0 or pos + remark_len + 4 > size:
        raise FrameError(f"binary header remark length {remark_len} overruns the header")
    remark = None
    if remark_len:
        remark = PyUnicode_DecodeUTF8(<const char*>p + pos, remark_len, "surrogateescape")
    pos += remark_len
    ext_len = _i32(p + pos)
    pos += 4
    if ext_len < 0 or pos + ext_len != size:
        raise FrameError(f"binary header ext length {ext_len} does not match the header size")
    cdef dict ext = {}
    while pos < size:
        if pos + 2 > size:
            raise FrameError("binary header ext entry is truncated")
        klen = _i16(p + pos)
        pos += 2
        if klen < 0 or pos + klen + 4 > size:
            raise FrameError(f"binary header ext key length {klen} overruns the header")
        key = PyUnicode_DecodeUTF8(<const char*>p + pos, klen, "surrogateescape")
        pos += klen
        vlen = _i32(p + pos)
        pos += 4
        if vlen < 0 or pos + vlen > size:
            raise FrameError(f"binary header ext value length {vlen} overruns the header")
        ext[key] = PyUnicode_DecodeUTF8(<const char*>p + pos, vlen, "surrogateescape")
        pos += vlen
    return code, lang, version, opaque, flag, remark, ext


def decode_frame(
    bytearray buf,
    Py_ssize_t pos,
    Py_ssize_t size,
    Py_ssize_t max_frame,
    Py_ssize_t max_header,
    dict languages,
    new,
    cls,
    tuple slots,
    rocketmq,
    json,
):
    """The whole frame at ``pos`` as a command, when it is a usual, well-formed one.

    ``FrameDecoder.next_command``'s compiled path for the usual frame: lengths within
    the limits, every byte received, and a binary header, or a JSON header of the
    usual shape (see _json_header.pxi). Everything else (a frame not all here, a JSON
    header of another shape, any bad length) is left to the Python path, which waits,
    decodes or refuses it as it always did.

    Args:
        buf: The receive buffer.
        pos: Where the frame starts.
        size: Where the received bytes end (at most ``len(buf)``).
        max_frame: Largest accepted total length.
        max_header: Largest accepted header length.
        languages: Language number to name (unknown numbers: ``"OTHER"``).
        new: ``object.__new__``.
        cls: ``RemotingCommand``.
        slots: Its member descriptors, in field order.
        rocketmq: ``SerializeType.ROCKETMQ``.
        json: ``SerializeType.JSON``.

    Returns:
        ``(command, end)``, or None for the Python path.

    Raises:
        FrameError: The binary header does not parse (as :func:`decode_binary`).
    """
    cdef const unsigned char* p = <const unsigned char*>PyByteArray_AS_STRING(buf)
    cdef Py_ssize_t total, header_len, end, start
    cdef uint32_t word, stype
    if size > PyByteArray_GET_SIZE(buf):
        raise ValueError("size is past the buffer's end")
    if pos < 0 or size - pos < 8:
        return None
    total = _i32(p + pos)
    word = <uint32_t>_i32(p + pos + 4)
    header_len = word & 0xFFFFFF
    stype = word >> 24
    if total < 4 or total > max_frame or stype > 1:
        return None
    if header_len > total - 4 or header_len > max_header:
        return None
    end = pos + 4 + total
    if size < end:
        return None
    start = pos + 8
    if stype == 1:
        code, lang, version, opaque, flag, remark, ext = _decode_binary(p + start, header_len)
        language = languages.get(lang, "OTHER")
        serialized = rocketmq
    else:
        fields = _decode_json(p + start, header_len)
        if fields is None:
            return None
        code, opaque, flag, remark, ext, language, version = fields
        serialized = json
    body = PyBytes_FromStringAndSize(<const char*>p + start + header_len, end - start - header_len)
    obj = new(cls)
    values = (code, opaque, flag, remark, ext, body, language, version, serialized)
    cdef Py_ssize_t i
    for i in range(len(slots)):
        _set(slots[i], obj, values[i])
    return obj, end


def receive_buffer(Py_ssize_t size):
    """``bytearray(size)`` without the zeroing: the frame decoder's own buffer.

    The decoder only ever reads bytes a socket read or its own copy wrote there, so
    the first fill need not be preceded by a memset of the whole (frame-sized) buffer.

    Args:
        size: Bytes.

    Returns:
        A bytearray of ``size`` bytes, their values unspecified.
    """
    if size < 0:
        raise ValueError("negative size")
    return PyByteArray_FromStringAndSize(NULL, size)


cdef object _utf8(object text):
    """The UTF-8 form of header text: the text itself when it is ASCII, else bytes."""
    if type(text) is str and PyUnicode_IS_COMPACT_ASCII(text):
        return text
    try:
        return text.encode()
    except UnicodeEncodeError:
        try:
            return text.encode("utf-8", "surrogateescape")
        except UnicodeEncodeError:
            return text.encode("utf-8", "backslashreplace")


def encode_binary(int code, int lang, int version, int opaque, int flag, remark, ext):
    """A ROCKETMQ binary header from already range-checked fields.

    Args:
        code: Request or response code (int16, checked by the caller).
        lang: Language number.
        version: Version (int16, checked by the caller).
        opaque: Opaque.
        flag: Flag.
        remark: Remark text, or None / empty for none.
        ext: extFields, names and values as text.

    Returns:
        The header bytes.

    Raises:
        ValueError: A name is longer than 32767 bytes in UTF-8.
    """
    return _encode_binary(code, lang, version, opaque, flag, remark, ext, -1)


def encode_binary_head(cmd, dict languages, int other, Py_ssize_t body_len):
    """A binary-header command's frame up to its body: the two length words, the header.

    ``encode_command_into``'s compiled path: :func:`encode_binary` and the frame's
    prefix in one buffer.

    Args:
        cmd: The command (serialize type ROCKETMQ).
        languages: Language name to number.
        other: The number of an unknown language.
        body_len: Bytes of body that follow.

    Returns:
        The bytes, or None when a field does not fit its wire type or the frame its
        length field (the Python path then says which).

    Raises:
        ValueError: As :func:`encode_binary`.
    """
    cdef int64_t code, version, opaque, flag
    try:
        code, version, opaque, flag = cmd.code, cmd.version, cmd.opaque, cmd.flag
    except (OverflowError, TypeError):
        return None
    if not (-32768 <= code <= 32767 and -32768 <= version <= 32767):
        return None
    if not (_in_i32(opaque) and _in_i32(flag)) or body_len < 0:
        return None
    lang = languages.get(cmd.language, other)
    return _encode_binary(
        <int>code, lang, <int>version, <int>opaque, <int>flag, cmd.remark, cmd.ext_fields,
        body_len,
    )


cdef inline bint _in_i32(int64_t v) noexcept:
    return -2147483648 <= v <= 2147483647


include "_json_header.pxi"


cdef object _encode_binary(
    int code, int lang, int version, int opaque, int flag, remark, ext, Py_ssize_t body_len
):
    """The header, after the frame's two length words unless ``body_len`` is -1."""
    cdef list pieces = []
    cdef Py_ssize_t total = 13 + 4 + 4, n, i, klen, vlen, header_len
    cdef Py_ssize_t ext_size = 0
    cdef object k, v
    remark_b = _utf8(remark) if remark else b""
    total += _size(remark_b)
    for key, value in ext.items():
        k = _utf8(key)
        v = _utf8(value)
        klen = _size(k)
        if klen > 32767:
            raise ValueError(
                f"header field 'extFields key length' = {klen} does not fit in [0, 32767]"
            )
        pieces.append(k)
        pieces.append(v)
        ext_size += 2 + klen + 4 + _size(v)
    total += ext_size
    header_len = total
    if body_len >= 0:
        if header_len > 0xFFFFFF or 4 + header_len + body_len > 2147483647:
            return None
        total += 8
    out = PyBytes_FromStringAndSize(NULL, total)
    cdef unsigned char* w = <unsigned char*>PyBytes_AS_STRING(out)
    if body_len >= 0:
        _put32(w, <uint32_t>(4 + header_len + body_len))
        _put32(w + 4, <uint32_t>((1 << 24) | header_len))
        w += 8
    _put16(w, <uint32_t>code)
    w[2] = <unsigned char>(lang & 0xFF)
    _put16(w + 3, <uint32_t>version)
    _put32(w + 5, <uint32_t>opaque)
    _put32(w + 9, <uint32_t>flag)
    w += 13
    n = _size(remark_b)
    _put32(w, <uint32_t>n)
    w += 4
    if n:
        memcpy(w, _ptr(remark_b), n)
        w += n
    _put32(w, <uint32_t>ext_size)
    w += 4
    n = len(pieces)
    i = 0
    while i < n:
        k = pieces[i]
        v = pieces[i + 1]
        klen = _size(k)
        vlen = _size(v)
        _put16(w, <uint32_t>klen)
        w += 2
        memcpy(w, _ptr(k), klen)
        w += klen
        _put32(w, <uint32_t>vlen)
        w += 4
        memcpy(w, _ptr(v), vlen)
        w += vlen
        i += 2
    return out


# -- typed headers and commands ------------------------------------------------------

cdef extern from "Python.h":
    ctypedef int (*_descr_set)(PyObject*, PyObject*, PyObject*) except -1
    ctypedef struct _Type "PyTypeObject":
        _descr_set tp_descr_set


cdef inline int _set(object descr, object obj, object value) except -1:
    # The slot descriptor's own setter: what ``descr.__set__(obj, value)`` runs, without
    # the frozen class's __setattr__ in between (the Python twin uses the same setter).
    return (<_Type*>(<PyObject*>descr).ob_type).tp_descr_set(
        <PyObject*>descr, <PyObject*>obj, <PyObject*>value
    )


def build(new, cls, tuple slots, tuple values):
    """An instance of a slotted class with every slot set, bypassing ``__init__``.

    Args:
        new: ``object.__new__``.
        cls: The class.
        slots: Its member descriptors, in ``values`` order.
        values: One value per slot.

    Returns:
        The instance.
    """
    obj = new(cls)
    cdef Py_ssize_t i
    for i in range(len(slots)):
        _set(slots[i], obj, values[i])
    return obj


cdef enum:
    KIND_STR = 0
    KIND_INT = 1
    KIND_BOOL = 2


cdef inline object _int_or_none(object v, object low, object high):
    """ASCII ``-?digits`` (at most 18) within bounds, or None for the Python twin."""
    if type(v) is not str or not PyUnicode_IS_COMPACT_ASCII(v):
        return None
    cdef Py_ssize_t n = PyUnicode_GET_LENGTH(v), i = 0
    cdef const char* p = <const char*>PyUnicode_DATA(v)
    cdef bint negative = False
    cdef long long acc = 0
    if n and p[0] == b'-':
        negative = True
        i = 1
    if i == n or n - i > 18:
        return None
    while i < n:
        if p[i] < b'0' or p[i] > b'9':
            return None
        acc = acc * 10 + (p[i] - 48)
        i += 1
    value = -acc if negative else acc
    if not low <= value <= high:
        return None
    return value


def parse_header(ext, new, cls, tuple plan, tuple slots):
    """A typed header from extFields when every value is in its usual form.

    ``plan`` holds one ``(key, kind, required, default, low, high)`` per field (kind 0
    text, 1 integer, 2 boolean). Only values the Python parser would accept as they are
    are taken here: ASCII text, ``-?digits`` integers within bounds, ``true``/``false``/
    ``1``/``0``. Anything else (a missing required field, another spelling, a value to
    refuse) returns None and the Python parser decides, with its error messages.

    Returns:
        The header, or None.
    """
    if type(ext) is not dict:
        return None
    cdef Py_ssize_t i, n = len(plan)
    cdef tuple spec
    cdef int kind
    obj = new(cls)
    for i in range(n):
        spec = <tuple>plan[i]
        v = (<dict>ext).get(spec[0])
        if v is None:
            if spec[2]:
                return None
            value = spec[3]
        else:
            kind = spec[1]
            if kind == KIND_STR:
                if type(v) is not str or not PyUnicode_IS_COMPACT_ASCII(v):
                    return None
                value = v
            elif kind == KIND_INT:
                value = _int_or_none(v, spec[4], spec[5])
                if value is None:
                    return None
            else:
                if v == "true" or v == "1":
                    value = True
                elif v == "false" or v == "0":
                    value = False
                else:
                    return None
        _set(slots[i], obj, value)
    return obj


# -- pull bodies: stored records into message objects ---------------------------------

cdef extern from "Python.h":
    object PyUnicode_FromFormat(const char* fmt, ...)
    void PyObject_GC_UnTrack(PyObject* op)

# sysFlag bits the scan leaves to the caller: IPv6 hosts (0x10, 0x20), compressed (0x1).
cdef enum:
    _UNUSUAL_FLAGS = 0x31
    _FIXED_SIZE = 88
    _MAGIC = -626843481


cdef inline int64_t _i64(const unsigned char* p) noexcept:
    return <int64_t>((<uint64_t><uint32_t>_i32(p) << 32) | <uint64_t><uint32_t>_i32(p + 4))


cdef object _host_of(const unsigned char* p):
    return (
        PyUnicode_FromFormat("%d.%d.%d.%d", <int>p[0], <int>p[1], <int>p[2], <int>p[3]),
        _i32(p + 4),
    )


# Building a message by writing its slots where they lie. ``object.__new__(cls)`` called
# from C goes through the generic call path (argument tuple, tp_new_wrapper's checks)
# and each descriptor set through PyMember_SetOne: together about half of the scan's
# instructions per message. For a class whose ``__new__`` is object's, that call comes
# down to ``tp_alloc(cls, 0)``, and a writable object slot of a fresh instance is a NULL
# pointer at the descriptor's offset; both are checked before the scan relies on them.
cdef extern from "Python.h":
    ctypedef struct _MemberDef "PyMemberDef":
        int type
        Py_ssize_t offset
        int flags
    ctypedef struct _MemberDescr "PyMemberDescrObject":
        _MemberDef* d_member
    ctypedef object (*_allocfunc)(void*, Py_ssize_t)
    ctypedef struct _AllocType "PyTypeObject":
        _allocfunc tp_alloc
    void Py_INCREF(object o)

cdef enum:
    _T_OBJECT_EX = 16  # structmember.h: an object slot, AttributeError when unset
    _READONLY = 1

cdef bint _slot_offsets(object cls, tuple descrs, Py_ssize_t* out) except -1:
    """Fill ``out`` with the slots' offsets; False when any is not a plain object slot."""
    cdef Py_ssize_t i
    cdef _MemberDef* member
    if cls.__new__ is not object.__new__:
        return False
    for i in range(len(descrs)):
        descr = descrs[i]
        if type(descr).__name__ != "member_descriptor" or not issubclass(
            cls, descr.__objclass__
        ):
            return False
        member = (<_MemberDescr*><PyObject*>descr).d_member
        if member.type != _T_OBJECT_EX or member.flags & _READONLY:
            return False
        out[i] = member.offset
    return True


cdef inline object _alloc(object cls):
    return (<_AllocType*><PyObject*>cls).tp_alloc(<void*><PyObject*>cls, 0)


cdef inline void _put(object obj, Py_ssize_t offset, object value) noexcept:
    # The slot of a fresh instance holds NULL: nothing to release.
    Py_INCREF(value)
    (<PyObject**>((<char*><PyObject*>obj) + offset))[0] = <PyObject*>value


def scan_records(
    bytes data, Py_ssize_t pos, cls, tuple slots, props_cls, tuple props_slots, broker_name
):
    """Twin of ``rocklet.protocol.records.scan_records_py`` building by slot.

    Args:
        data: Back-to-back records.
        pos: Where the first record starts.
        cls: The message class.
        slots: Its member descriptors in ``RECORD_FIELDS`` order.
        props_cls: ``LazyProperties``.
        props_slots: Its ``_raw`` and ``_parsed`` descriptors.
        broker_name: The last field of every message.

    Returns:
        ``(messages, where the scan stopped)``, as the Python twin; None when ``cls``
        or ``props_cls`` cannot be built by writing its slots at their offsets (a
        ``__new__`` of its own, a slot that is not a plain object slot).

    Raises:
        MessageFormatError: The same records and messages as the Python twin.
    """
    from rocklet.protocol.errors import MessageFormatError

    cdef const unsigned char* base = <const unsigned char*>PyBytes_AS_STRING(data)
    cdef Py_ssize_t end_of_data = PyBytes_GET_SIZE(data)
    cdef const unsigned char* p
    cdef int32_t size, magic, sys_flag, body_len, props_len
    cdef Py_ssize_t end, body_at, body_end, topic_end, topic_len
    cdef uint64_t born_key = 0, store_key = 0, key
    cdef Py_ssize_t last_topic_at = -1, last_topic_len = -1
    cdef Py_ssize_t at[17]
    cdef Py_ssize_t props_at[2]
    if len(slots) != 17 or len(props_slots) != 2:
        raise ValueError("scan_records needs 17 message slots and 2 property slots")
    if not (_slot_offsets(cls, slots, at) and _slot_offsets(props_cls, props_slots, props_at)):
        return None  # a class it cannot build by offset: the caller's Python twin does
    out = []
    born_host = None
    store_host = None
    topic = None
    while pos < end_of_data:
        if pos + _FIXED_SIZE > end_of_data:
            raise MessageFormatError(f"record at {pos} is truncated in its fixed fields")
        p = base + pos
        size = _i32(p)
        magic = _i32(p + 4)
        end = pos + size
        if magic != _MAGIC or end > end_of_data or size < _FIXED_SIZE:
            raise MessageFormatError(f"bad record at {pos} (size {size}, magic {magic:#x})")
        sys_flag = _i32(p + 36)
        if sys_flag & _UNUSUAL_FLAGS:
            break
        body_len = _i32(p + 84)
        body_at = pos + _FIXED_SIZE
        body_end = body_at + body_len
        if body_len < 0 or body_end + 3 > end:
            raise MessageFormatError(f"body length {body_len} overruns the record at {pos}")
        topic_len = base[body_end]
        topic_end = body_end + 1 + topic_len
        if topic_end + 2 > end:
            raise MessageFormatError(f"record at {pos} does not add up to its size")
        props_len = _i16(base + topic_end)
        if topic_end + 2 + props_len != end:
            raise MessageFormatError(f"record at {pos} does not add up to its size")
        if topic is None or topic_len != last_topic_len or (
            topic_len and memcmp(base + last_topic_at, base + body_end + 1, topic_len) != 0
        ):
            topic = PyUnicode_DecodeUTF8(<const char*>base + body_end + 1, topic_len, "replace")
            last_topic_at = body_end + 1
            last_topic_len = topic_len
        key = <uint64_t>_i64(p + 48)
        if born_host is None or key != born_key:
            born_host = _host_of(p + 48)
            born_key = key
        key = <uint64_t>_i64(p + 64)
        if store_host is None or key != store_key:
            store_host = _host_of(p + 64)
            store_key = key
        props = _alloc(props_cls)
        _put(props, props_at[0], PyBytes_FromStringAndSize(
            <const char*>base + topic_end + 2, props_len))
        _put(props, props_at[1], None)
        msg = _alloc(cls)
        _put(msg, at[0], topic)
        _put(msg, at[1], PyBytes_FromStringAndSize(<const char*>base + body_at, body_len))
        _put(msg, at[2], props)
        _put(msg, at[3], _i32(p + 16))
        _put(msg, at[4], _i32(p + 12))
        _put(msg, at[5], _i64(p + 20))
        _put(msg, at[6], _i64(p + 28))
        _put(msg, at[7], sys_flag)
        _put(msg, at[8], _i64(p + 40))
        _put(msg, at[9], born_host)
        _put(msg, at[10], _i64(p + 56))
        _put(msg, at[11], store_host)
        _put(msg, at[12], _i32(p + 72))
        _put(msg, at[13], _i64(p + 76))
        _put(msg, at[14], size)
        _put(msg, at[15], _i32(p + 8))
        _put(msg, at[16], broker_name)
        # Every field is a str, bytes, int, a tuple of those or the raw properties, so
        # neither object can be part of a reference cycle: the collector need not
        # track them (CPython untracks tuples and dicts of such values the same way).
        # A consumer keeps thousands cached; tracked, each collection would walk them.
        PyObject_GC_UnTrack(<PyObject*>props)
        PyObject_GC_UnTrack(<PyObject*>msg)
        out.append(msg)
        pos = end
    return out, pos


# -- a producer's SEND_BATCH_MESSAGE body (rocklet.client.send_wire.encode_batch) -------

cdef extern from "Python.h":
    object PyUnicode_New(Py_ssize_t size, Py_UCS4 maxchar)

cdef const char* _HEX = b"0123456789ABCDEF"


def encode_send_batch(msgs, str topic, str prefix, counter, Py_ssize_t max_size):
    """A batch body of plain messages, each with its UNIQ_KEY (``encode_batch``'s twin).

    ``msgs`` are the SDK's messages (``topic``, ``body``, ``tags``, ``keys``,
    ``properties``, ``delay_level``, ``flag``); each one's UNIQ_KEY is ``prefix``
    followed by the next number of ``counter`` as 12 hex digits, as
    ``UniqKeyGenerator.next`` makes it. Each item's properties are UNIQ_KEY, WAIT, then
    TAGS and KEYS when set (``send_properties``).

    Returns:
        ``(body, uniq_keys)``, or None, before any number is taken, when a message is
        not plain (another topic, an empty or too large body, a delay, user
        properties, text or numbers out of the usual) and the Python twin must check
        and encode the batch.
    """
    cdef Py_ssize_t n = len(msgs), i, total = 0, plen, blen, tlen, klen
    cdef Py_ssize_t h = PyUnicode_GET_LENGTH(prefix), uniq_len = h + 12
    cdef list tags_parts = [None] * n
    cdef list keys_parts = [None] * n
    cdef list uniqs = []
    cdef object m, payload, tags, keys, t, k, uniq
    cdef int64_t flag
    cdef uint64_t number
    cdef unsigned char* w
    cdef unsigned char* u
    cdef int j
    if not PyUnicode_IS_COMPACT_ASCII(prefix):
        return None
    for i in range(n):  # check every message before any number is taken
        m = msgs[i]
        payload = m.body
        if m.topic != topic or type(payload) is not bytes:
            return None
        blen = PyBytes_GET_SIZE(payload)
        if blen == 0 or blen > max_size or m.properties:
            return None
        if type(m.delay_level) is not int or m.delay_level != 0 or type(m.flag) is not int:
            return None
        if not -2147483648 <= m.flag <= 2147483647:
            return None
        plen = 9 + uniq_len + 10  # UNIQ_KEY 0x01 uniq 0x02 WAIT 0x01 true
        tags = m.tags
        if tags:
            if type(tags) is not str:
                return None
            t = _utf8_or_none(tags)
            if t is None:
                return None
            tags_parts[i] = t
            plen += 6 + _size(t)
        keys = m.keys
        if keys:
            try:
                k = _utf8_or_none(" ".join(keys))
            except TypeError:
                return None
            if k is None:
                return None
            keys_parts[i] = k
            plen += 6 + _size(k)
        if plen > 32767:
            return None
        total += 22 + blen + plen
    body = PyBytes_FromStringAndSize(NULL, total)
    w = <unsigned char*>PyBytes_AS_STRING(body)
    for i in range(n):
        m = msgs[i]
        payload = m.body
        blen = PyBytes_GET_SIZE(payload)
        flag = m.flag
        number = <uint64_t>(<int64_t>next(counter)) & 0xFFFFFFFFFFFF
        uniq = PyUnicode_New(uniq_len, 127)
        u = <unsigned char*>PyUnicode_DATA(uniq)
        memcpy(u, PyUnicode_DATA(prefix), h)
        for j in range(12):
            u[h + j] = _HEX[(number >> (44 - 4 * j)) & 0xF]
        uniqs.append(uniq)
        plen = 9 + uniq_len + 10
        t = tags_parts[i]
        k = keys_parts[i]
        if t is not None:
            plen += 6 + _size(t)
        if k is not None:
            plen += 6 + _size(k)
        _put32(w, <uint32_t>(22 + blen + plen))
        _put32(w + 4, 0)
        _put32(w + 8, 0)
        _put32(w + 12, <uint32_t>flag)
        _put32(w + 16, <uint32_t>blen)
        memcpy(w + 20, PyBytes_AS_STRING(payload), blen)
        w += 20 + blen
        _put16(w, <uint32_t>plen)
        w += 2
        memcpy(w, b"UNIQ_KEY\x01", 9)
        memcpy(w + 9, u, uniq_len)
        memcpy(w + 9 + uniq_len, b"\x02WAIT\x01true", 10)
        w += 19 + uniq_len
        if t is not None:
            memcpy(w, b"\x02TAGS\x01", 6)
            memcpy(w + 6, _ptr(t), _size(t))
            w += 6 + _size(t)
        if k is not None:
            memcpy(w, b"\x02KEYS\x01", 6)
            memcpy(w + 6, _ptr(k), _size(k))
            w += 6 + _size(k)
    return body, uniqs
