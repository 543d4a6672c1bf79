# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Compiled twins of the put path's encoder (:mod:`rocklet.store._encoder`).

The Python functions stay the reference: :mod:`rocklet.store._encoder` uses these when
the module was built and ``ROCKLET_PURE_PYTHON`` is not set, and
``tests/store/test_speedups.py`` checks both give byte-identical records and dispatch
data. These handle the usual put (plain ``str`` properties, ``bytes`` bodies, fields
in range); for anything else they return ``None`` and the caller runs the Python twin,
so unusual input is never handled twice.
"""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.dict cimport PyDict_GetItem, PyDict_Next
from cpython.mem cimport PyMem_Free, PyMem_Malloc
from cpython.object cimport PyObject
from libc.stdint cimport int32_t, int64_t, uint8_t, uint16_t, uint32_t, uint64_t
from libc.string cimport memchr, memcpy


include "../protocol/_wire.pxi"


#: Status codes handed back instead of a batch (the caller maps them to PutMessageStatus).
ILLEGAL = 1
PROPERTIES_TOO_LARGE = 2

cdef int64_t _I32_MIN = -(2 ** 31)
cdef int64_t _I32_MAX = 2 ** 31 - 1
cdef Py_ssize_t _MAX_PROPERTIES = 32767


cdef struct _Rec:
    int64_t flag
    int64_t sys_flag
    int64_t born_ts
    int64_t reconsume
    int64_t prepared
    int64_t crc
    Py_ssize_t size
    Py_ssize_t props_size
    Py_ssize_t first_piece
    Py_ssize_t pieces


cdef inline bint _in32(int64_t v) noexcept:
    return _I32_MIN <= v <= _I32_MAX


cdef inline bint _has_separator(object piece) noexcept:
    cdef const char* p = _ptr(piece)
    cdef Py_ssize_t n = _size(piece)
    return memchr(p, 1, n) != NULL or memchr(p, 2, n) != NULL


def encode_each(
    msgs,
    int64_t phy,
    Py_ssize_t fixed,
    Py_ssize_t max_body,
    int64_t tran,
    bytes topic_part,
    int64_t queue_id,
    int64_t store_ts,
    int64_t qoff,
    int64_t step,
    int64_t magic,
    crc32,
):
    """The records of one put back to back (``_encoder._encode_each``'s twin).

    Returns:
        ``(data, offsets, sizes, properties)``; :data:`ILLEGAL` or
        :data:`PROPERTIES_TOO_LARGE` for the first refused message; or None when the
        input is unusual and the Python twin must encode it.

    Raises:
        ValueError: A host field is not 8 bytes.
    """
    cdef Py_ssize_t n = len(msgs), i, j, total = 0, count, pos
    cdef list pieces = []
    cdef list props_out = []
    cdef list offsets = []
    cdef list sizes = []
    cdef _Rec* recs
    cdef _Rec* r
    cdef PyObject* pk
    cdef PyObject* pv
    cdef object k, v, kb, vb, body, props, m
    cdef Py_ssize_t topic_len = PyBytes_GET_SIZE(topic_part)
    if not _in32(queue_id):
        return None
    recs = <_Rec*>PyMem_Malloc(max(n, 1) * sizeof(_Rec))
    if recs == NULL:
        raise MemoryError
    try:
        for i in range(n):
            m = msgs[i]
            r = &recs[i]
            body = m.body
            if type(body) is not bytes:
                return None
            if PyBytes_GET_SIZE(body) > max_body:
                return ILLEGAL
            props = m.properties
            if type(props) is not dict:
                return None
            r.first_piece = len(pieces)
            r.props_size = 0
            count = 0
            pos = 0
            while PyDict_Next(props, &pos, &pk, &pv):
                k = <object>pk
                v = <object>pv
                if type(k) is not str or type(v) is not str:
                    return None
                if not PyUnicode_GET_LENGTH(k) or not PyUnicode_GET_LENGTH(v):
                    continue
                kb = _utf8_or_none(k)
                vb = _utf8_or_none(v)
                if kb is None or vb is None or _has_separator(kb) or _has_separator(vb):
                    return None  # the Python twin raises or keeps what readers parse
                pieces.append(kb)
                pieces.append(vb)
                r.props_size += _size(kb) + 1 + _size(vb)
                count += 1
            if count:
                r.props_size += count - 1
            r.pieces = count * 2
            if r.props_size > _MAX_PROPERTIES:
                return PROPERTIES_TOO_LARGE
            try:
                r.sys_flag = m.sys_flag
                r.flag = m.flag
                r.born_ts = m.born_timestamp
                r.reconsume = m.reconsume_times
                r.prepared = m.prepared_transaction_offset
            except (OverflowError, TypeError):
                return None
            if r.sys_flag & 0xC != tran:
                return ILLEGAL
            born, store = m.born_host, m.store_host
            if len(born) != 8 or len(store) != 8:
                raise ValueError("born_host and store_host must be 8-byte fields from pack_host()")
            if type(born) is not bytes or type(store) is not bytes:
                return None
            if not (_in32(r.sys_flag) and _in32(r.flag) and _in32(r.reconsume)):
                return None
            r.crc = crc32(body) & 0x7FFFFFFF
            r.size = fixed + PyBytes_GET_SIZE(body) + r.props_size
            total += r.size
            props_out.append(props)
        data = PyBytes_FromStringAndSize(NULL, total)
        w = <unsigned char*>PyBytes_AS_STRING(data)
        for i in range(n):
            m = msgs[i]
            r = &recs[i]
            body = m.body
            _put32(w, <uint32_t>r.size)
            _put32(w + 4, <uint32_t>magic)
            _put32(w + 8, <uint32_t>r.crc)
            _put32(w + 12, <uint32_t>queue_id)
            _put32(w + 16, <uint32_t>r.flag)
            _put64(w + 20, <uint64_t>qoff)
            _put64(w + 28, <uint64_t>phy)
            _put32(w + 36, <uint32_t>(r.sys_flag & ~0x30))  # the V6 host bits cleared
            _put64(w + 40, <uint64_t>r.born_ts)
            memcpy(w + 48, PyBytes_AS_STRING(m.born_host), 8)
            _put64(w + 56, <uint64_t>store_ts)
            memcpy(w + 64, PyBytes_AS_STRING(m.store_host), 8)
            _put32(w + 72, <uint32_t>r.reconsume)
            _put64(w + 76, <uint64_t>r.prepared)
            _put32(w + 84, <uint32_t>PyBytes_GET_SIZE(body))
            w += 88
            memcpy(w, PyBytes_AS_STRING(body), PyBytes_GET_SIZE(body))
            w += PyBytes_GET_SIZE(body)
            memcpy(w, PyBytes_AS_STRING(topic_part), topic_len)
            w += topic_len
            w[0] = (r.props_size >> 8) & 0xFF
            w[1] = r.props_size & 0xFF
            w += 2
            for j in range(r.first_piece, r.first_piece + r.pieces, 2):
                if j != r.first_piece:
                    w[0] = 2
                    w += 1
                k = pieces[j]
                v = pieces[j + 1]
                memcpy(w, _ptr(k), _size(k))
                w += _size(k)
                w[0] = 1
                w += 1
                memcpy(w, _ptr(v), _size(v))
                w += _size(v)
            offsets.append(phy)
            sizes.append(r.size)
            phy += r.size
            qoff += step
        return data, offsets, sizes, props_out
    finally:
        PyMem_Free(recs)


cdef bint _hash_into(object text, uint32_t* h) noexcept:
    """Continue Java's String.hashCode over ``text``; False for non-BMP text."""
    cdef int kind = PyUnicode_KIND(text)
    cdef Py_ssize_t i, n = PyUnicode_GET_LENGTH(text)
    cdef void* data = PyUnicode_DATA(text)
    cdef uint32_t acc = h[0]
    if kind == 1:
        for i in range(n):
            acc = acc * 31 + (<uint8_t*>data)[i]
    elif kind == 2:
        for i in range(n):
            acc = acc * 31 + (<uint16_t*>data)[i]
    else:
        return False  # UTF-16 surrogate pairs: the Python twin
    h[0] = acc
    return True


cdef object _key_hash(str prefix, object key, index_key_hash):
    cdef uint32_t h = 0
    if not (_hash_into(prefix, &h) and _hash_into(key, &h)):
        return index_key_hash(prefix + key)
    if h & 0x80000000:
        return 0 if h == 0x80000000 else 0x100000000 - h
    return h


def dispatch_data(
    list props,
    list offsets,
    list sizes,
    bint queued,
    bint indexed,
    str prefix,
    tags_code,
    index_key_hash,
):
    """Consume-queue entries, tags codes, index key hashes and their offsets.

    ``_encoder._dispatch_data``'s twin for records that are not in the schedule topic.

    Returns:
        ``(entries, codes, key_hashes, key_offsets)``, or None when a property value is
        not text and the Python twin must decide.
    """
    cdef Py_ssize_t n = len(props), i
    cdef list codes = []
    cdef list hashes = []
    cdef list key_offsets = []
    cdef PyObject* found
    cdef object p, tags, code, offset, uniq, more
    cdef unsigned char* w
    entries = b""
    if queued:
        for i in range(n):
            p = props[i]
            found = PyDict_GetItem(p, "TAGS")
            tags = <object>found if found != NULL else None
            if tags is not None and type(tags) is not str:
                return None
            codes.append(tags_code(tags))
        entries = PyBytes_FromStringAndSize(NULL, 20 * n)
        w = <unsigned char*>PyBytes_AS_STRING(entries)
        for i in range(n):
            try:
                _put64(w, <uint64_t><int64_t>offsets[i])
                _put32(w + 8, <uint32_t><int64_t>sizes[i])
                _put64(w + 12, <uint64_t><int64_t>codes[i])
            except (OverflowError, TypeError):
                return None
            w += 20
    if indexed:
        for i in range(n):
            p = props[i]
            offset = offsets[i]
            found = PyDict_GetItem(p, "UNIQ_KEY")
            if found != NULL:
                uniq = <object>found
                if type(uniq) is not str:
                    return None
                if uniq:
                    hashes.append(_key_hash(prefix, uniq, index_key_hash))
                    key_offsets.append(offset)
            found = PyDict_GetItem(p, "KEYS")
            if found != NULL:
                more = <object>found
                if type(more) is not str:
                    return None
                if more:
                    for key in more.split():
                        hashes.append(_key_hash(prefix, key, index_key_hash))
                        key_offsets.append(offset)
    return entries, codes, hashes, key_offsets


def put_index_keys(
    unsigned char[::1] view,
    hashes,
    offsets,
    Py_ssize_t start,
    Py_ssize_t count,
    int64_t n,
    int64_t slots,
    Py_ssize_t header_size,
    Py_ssize_t pos,
    int64_t diff,
):
    """Chain ``count`` index entries into an index file's map (``IndexFile.put_keys``).

    Returns:
        How many hash slots were empty before (new chains), or None when a position
        would fall outside the map and the Python twin must report it.
    """
    cdef Py_ssize_t size = view.shape[0], i, slot_pos
    cdef int64_t h, head, new_slots = 0
    cdef unsigned char* base = &view[0] if size else NULL
    if slots <= 0 or count < 0 or pos < 0 or pos + 20 * count > size:
        return None
    if header_size < 0 or header_size + 4 * slots > size:
        return None
    for i in range(start, start + count):  # nothing is written unless all of it can be
        h = hashes[i]
        if h < 0 or h > 0x7FFFFFFF or not 0 <= offsets[i] <= 0x7FFFFFFFFFFFFFFF:
            return None
    for i in range(start, start + count):
        h = hashes[i]
        slot_pos = header_size + (h % slots) * 4
        head = _i32(base + slot_pos)
        if head <= 0 or head > n:
            head = 0  # an empty slot, or garbage from a torn write: a new chain
            new_slots += 1
        _put32(base + pos, <uint32_t>h)
        _put64(base + pos + 4, <uint64_t><int64_t>offsets[i])
        _put32(base + pos + 12, <uint32_t>diff)
        _put32(base + pos + 16, <uint32_t>head)
        _put32(base + slot_pos, <uint32_t>n)
        n += 1
        pos += 20
    return new_slots


# -- a SEND_BATCH_MESSAGE body straight into records (rocklet.store._raw_batch) ---------

from cpython.unicode cimport PyUnicode_DecodeASCII
from libc.string cimport memcmp
from posix.dlfcn cimport RTLD_LAZY, dlopen, dlsym

ctypedef unsigned long (*_crc32_fn)(unsigned long, const unsigned char*, unsigned int) noexcept nogil

# zlib's own crc32, called on the body where it lies: through zlib.crc32 each body was
# first copied into a bytes object. The process has libz loaded (Python's zlib module);
# where it is not found by this name, the Python function is called instead. CRC-32 is
# one function whoever computes it: the equivalence tests compare with zlib.crc32.
cdef _crc32_fn _zlib_crc32 = NULL
cdef void* _libz = dlopen(b"libz.so.1", RTLD_LAZY)
if _libz != NULL:
    _zlib_crc32 = <_crc32_fn>dlsym(_libz, b"crc32")

cdef enum:
    # Most properties one batch item may carry on the compiled path (more: the Python one).
    _MAX_ITEM_PROPS = 64


cdef struct _Props:
    # Where an item's TAGS, UNIQ_KEY and KEYS values are in the batch body (-1: absent).
    Py_ssize_t tags_at, tags_len, uniq_at, uniq_len, keys_at, keys_len


cdef inline bint _is(const unsigned char* p, Py_ssize_t n, const char* name, Py_ssize_t name_len) noexcept:
    return n == name_len and memcmp(p, name, n) == 0


cdef Py_ssize_t _item_props(
    const unsigned char* p,
    Py_ssize_t n,
    const unsigned char* drop,
    Py_ssize_t drop_len,
    const unsigned char* set_name,
    Py_ssize_t set_len,
    const unsigned char* set_value,
    Py_ssize_t set_value_len,
    unsigned char* w,
    Py_ssize_t base,
    _Props* found,
) noexcept:
    """Measure (``w`` NULL) or write an item's stored properties; -1: the Python path.

    The stored properties are what ``decode_properties`` then dropping ``drop`` and
    setting ``set_name`` give, encoded again. Only canonical text is taken here (ASCII,
    every item one name 0x01 value, no name twice, no DELAY or TRAN_MSG; one separator
    may end the text): anything else, and every refusal, is left to the Python path,
    which reports it as it always did.
    """
    cdef Py_ssize_t starts[_MAX_ITEM_PROPS]
    cdef Py_ssize_t seps[_MAX_ITEM_PROPS]
    cdef Py_ssize_t ends[_MAX_ITEM_PROPS]
    cdef Py_ssize_t count = 0, i, j, start = 0, sep, end, out = 0, name_len, kept = 0
    cdef bint set_seen = False
    cdef uint64_t high = 0, word
    cdef const unsigned char* hit
    # ASCII only, eight bytes at a time.
    i = 0
    while i + 8 <= n:
        memcpy(&word, p + i, 8)
        high |= word
        i += 8
    while i < n:
        high |= p[i]
        i += 1
    if high & 0x8080808080808080:
        return -1
    # start < n: a separator at the very end closes the last item (the C++ client ends
    # its properties so), as decode_properties reads it.
    while start < n:
        hit = <const unsigned char*>memchr(p + start, 2, n - start)
        end = n if hit == NULL else hit - p
        hit = <const unsigned char*>memchr(p + start, 1, end - start)
        if hit == NULL or count == _MAX_ITEM_PROPS:
            return -1  # a bare item (or too many)
        sep = hit - p
        if sep == start or sep == end - 1 or memchr(p + sep + 1, 1, end - sep - 1) != NULL:
            return -1  # an empty name or value, or 0x01 inside a value
        starts[count] = start
        seps[count] = sep
        ends[count] = end
        count += 1
        start = end + 1
    found.tags_at = found.uniq_at = found.keys_at = -1
    found.tags_len = found.uniq_len = found.keys_len = 0
    for i in range(count):
        name_len = seps[i] - starts[i]
        for j in range(i):
            if seps[j] - starts[j] == name_len and memcmp(p + starts[i], p + starts[j], name_len) == 0:
                return -1
        if _is(p + starts[i], name_len, "DELAY", 5) or _is(p + starts[i], name_len, "TRAN_MSG", 8):
            return -1  # a delayed or transactional message: the Python path
        if _is(p + starts[i], name_len, <const char*>drop, drop_len):
            continue
        if kept:
            if w != NULL:
                w[out] = 2
            out += 1
        kept += 1
        if _is(p + starts[i], name_len, <const char*>set_name, set_len):
            set_seen = True
            if w != NULL:
                memcpy(w + out, set_name, set_len)
                w[out + set_len] = 1
                memcpy(w + out + set_len + 1, set_value, set_value_len)
            out += set_len + 1 + set_value_len
            continue
        if _is(p + starts[i], name_len, "TAGS", 4):
            found.tags_at, found.tags_len = base + seps[i] + 1, ends[i] - seps[i] - 1
        elif _is(p + starts[i], name_len, "UNIQ_KEY", 8):
            found.uniq_at, found.uniq_len = base + seps[i] + 1, ends[i] - seps[i] - 1
        elif _is(p + starts[i], name_len, "KEYS", 4):
            found.keys_at, found.keys_len = base + seps[i] + 1, ends[i] - seps[i] - 1
        if w != NULL:
            memcpy(w + out, p + starts[i], ends[i] - starts[i])
        out += ends[i] - starts[i]
    if not set_seen:
        if kept:
            if w != NULL:
                w[out] = 2
            out += 1
        if w != NULL:
            memcpy(w + out, set_name, set_len)
            w[out + set_len] = 1
            memcpy(w + out + set_len + 1, set_value, set_value_len)
        out += set_len + 1 + set_value_len
    return out


cdef object _bytes_key_hash(str prefix, const unsigned char* key, Py_ssize_t n, index_key_hash):
    """``index_key_hash(prefix + key)`` for an ASCII key."""
    cdef uint32_t h = 0
    cdef Py_ssize_t i
    if not _hash_into(prefix, &h):  # a topic beyond the BMP: the Python hash
        return index_key_hash(prefix + PyUnicode_DecodeASCII(<const char*>key, n, NULL))
    for i in range(n):
        h = h * 31 + key[i]
    if h & 0x80000000:
        return 0 if h == 0x80000000 else 0x100000000 - h
    return h


def encode_raw_batch(
    bytes body,
    int64_t phy,
    Py_ssize_t fixed,
    Py_ssize_t max_body,
    int64_t segment_size,
    bytes topic_part,
    int64_t queue_id,
    int64_t sys_flag,
    int64_t born_ts,
    bytes born_host,
    bytes store_host,
    int64_t reconsume,
    int64_t store_ts,
    int64_t qoff,
    bint queued,
    bint indexed,
    int64_t magic,
    bytes drop,
    bytes set_name,
    bytes set_value,
    str prefix,
    crc32,
    tags_code,
    index_key_hash,
    Py_ssize_t max_items,
):
    """A batch body's items as stored records, with their dispatch data, in one pass.

    ``_raw_batch.encode_raw_batch``'s compiled path: the same bytes as decoding the
    body into messages and encoding those (``tests/store/test_raw_batch.py``).

    Returns:
        ``(data, offsets, cq_entries, tags_codes, key_hashes, key_offsets)``, or None
        when the body is not a canonical, acceptable batch and the Python path must
        decide (refusals included).
    """
    cdef const unsigned char* src = <const unsigned char*>PyBytes_AS_STRING(body)
    cdef Py_ssize_t end = PyBytes_GET_SIZE(body), pos = 0, size, body_len, props_len, p
    cdef Py_ssize_t count = 0, total = 0, bodies = 0, out_props, topic_len = PyBytes_GET_SIZE(topic_part)
    cdef Py_ssize_t drop_len = PyBytes_GET_SIZE(drop), set_len = PyBytes_GET_SIZE(set_name)
    cdef Py_ssize_t set_value_len = PyBytes_GET_SIZE(set_value), rec_size, i
    cdef const unsigned char* d = <const unsigned char*>PyBytes_AS_STRING(drop)
    cdef const unsigned char* sn = <const unsigned char*>PyBytes_AS_STRING(set_name)
    cdef const unsigned char* sv = <const unsigned char*>PyBytes_AS_STRING(set_value)
    cdef _Props found
    cdef unsigned char* w
    cdef unsigned char* e
    cdef list offsets = []
    cdef list codes = []
    cdef list hashes = []
    cdef list key_offsets = []
    cdef object no_tags, offset, crc
    if PyBytes_GET_SIZE(born_host) != 8 or PyBytes_GET_SIZE(store_host) != 8:
        return None
    if not (_in32(queue_id) and _in32(sys_flag) and _in32(reconsume)):
        return None
    # Pass 1: check every item as decode_batch does and measure the records.
    while pos < end:
        if pos + 20 > end:
            return None
        size = _i32(src + pos)
        if size < 22 or pos + size > end:
            return None
        body_len = _i32(src + pos + 16)
        if body_len < 0 or 22 + body_len > size:
            return None
        if body_len > max_body:
            return None
        p = pos + 20 + body_len
        props_len = _i16(src + p)
        p += 2
        if props_len < 0 or p + props_len != pos + size:
            return None
        out_props = _item_props(src + p, props_len, d, drop_len, sn, set_len, sv, set_value_len, NULL, p, &found)
        if out_props < 0 or out_props > _MAX_PROPERTIES:
            return None
        total += fixed + body_len + out_props
        bodies += body_len
        count += 1
        if count > max_items:
            return None
        pos += size
    if count == 0 or bodies + 8 + 200 * count > segment_size:
        return None
    # Pass 2: write the records and collect what the consume queue and index need.
    data = PyBytes_FromStringAndSize(NULL, total)
    w = <unsigned char*>PyBytes_AS_STRING(data)
    entries = PyBytes_FromStringAndSize(NULL, 20 * count if queued else 0)
    e = <unsigned char*>PyBytes_AS_STRING(entries)
    no_tags = tags_code(None)
    pos = 0
    for i in range(count):
        size = _i32(src + pos)
        body_len = _i32(src + pos + 16)
        p = pos + 20 + body_len
        props_len = _i16(src + p)
        p += 2
        out_props = _item_props(src + p, props_len, d, drop_len, sn, set_len, sv, set_value_len, NULL, p, &found)
        rec_size = fixed + body_len + out_props
        _put32(w, <uint32_t>rec_size)
        _put32(w + 4, <uint32_t>magic)
        if _zlib_crc32 != NULL:
            crc = <int64_t>_zlib_crc32(0, src + pos + 20, <unsigned int>body_len)
        else:  # on a bytes copy: through a memoryview slice it costs 3x as much
            crc = crc32(PyBytes_FromStringAndSize(<const char*>src + pos + 20, body_len))
        _put32(w + 8, <uint32_t>(<int64_t>crc & 0x7FFFFFFF))
        _put32(w + 12, <uint32_t>queue_id)
        memcpy(w + 16, src + pos + 12, 4)  # FLAG, as the item has it
        _put64(w + 20, <uint64_t>(qoff if queued else 0))
        _put64(w + 28, <uint64_t>phy)
        _put32(w + 36, <uint32_t>(sys_flag & ~0x30))  # the V6 host bits cleared
        _put64(w + 40, <uint64_t>born_ts)
        memcpy(w + 48, PyBytes_AS_STRING(born_host), 8)
        _put64(w + 56, <uint64_t>store_ts)
        memcpy(w + 64, PyBytes_AS_STRING(store_host), 8)
        _put32(w + 72, <uint32_t>reconsume)
        _put64(w + 76, 0)  # PREPARED TRANSACTION OFFSET
        _put32(w + 84, <uint32_t>body_len)
        memcpy(w + 88, src + pos + 20, body_len)
        w += 88 + body_len
        memcpy(w, PyBytes_AS_STRING(topic_part), topic_len)
        w += topic_len
        _put16(w, <uint32_t>out_props)
        w += 2
        _item_props(src + p, props_len, d, drop_len, sn, set_len, sv, set_value_len, w, p, &found)
        w += out_props
        offset = phy
        offsets.append(offset)
        if queued:
            if found.tags_at >= 0:
                code = tags_code(PyUnicode_DecodeASCII(<const char*>src + found.tags_at, found.tags_len, NULL))
            else:
                code = no_tags
            codes.append(code)
            _put64(e, <uint64_t>phy)
            _put32(e + 8, <uint32_t>rec_size)
            _put64(e + 12, <uint64_t><int64_t>code)
            e += 20
        if indexed:
            # IndexService.buildIndex order: UNIQ_KEY first, then each of KEYS.
            if found.uniq_at >= 0:
                hashes.append(
                    _bytes_key_hash(prefix, src + found.uniq_at, found.uniq_len, index_key_hash)
                )
                key_offsets.append(offset)
            if found.keys_at >= 0:
                for key in PyUnicode_DecodeASCII(<const char*>src + found.keys_at, found.keys_len, NULL).split():
                    hashes.append(_key_hash(prefix, key, index_key_hash))
                    key_offsets.append(offset)
        phy += rec_size
        qoff += 1
        pos += size
    return data, offsets, entries, codes, hashes, key_offsets


cdef extern from "Python.h":
    object PyUnicode_New(Py_ssize_t size, Py_UCS4 maxchar)


def offset_msg_ids(str host_hex, offsets):
    """Each offset's offset msgId (host hex, then the offset as 16 hex digits), comma-joined.

    ``_raw_batch.offset_msg_ids``'s twin; None when an offset is not a non-negative
    int64 or the host is not ASCII.
    """
    cdef Py_ssize_t n = len(offsets), h = PyUnicode_GET_LENGTH(host_hex), i, k
    cdef int64_t off
    cdef unsigned char* w
    cdef const char* digits = b"0123456789ABCDEF"
    if n == 0 or not PyUnicode_IS_COMPACT_ASCII(host_hex):
        return None
    out = PyUnicode_New(n * (h + 17) - 1, 127)
    w = <unsigned char*>PyUnicode_DATA(out)
    for i in range(n):
        try:
            off = offsets[i]
        except (OverflowError, TypeError):
            return None
        if off < 0:
            return None
        if i:
            w[0] = 44  # ','
            w += 1
        memcpy(w, PyUnicode_DATA(host_hex), h)
        w += h
        for k in range(16):
            w[k] = digits[(off >> (60 - 4 * k)) & 0xF]
        w += 16
    return out


def single_item(bytes body, str props, int64_t flag):
    """One message as a batch body of one item (:mod:`rocklet.protocol.batch`'s layout).

    ``_raw_batch.single_message_body``'s compiled path: a plain SEND_MESSAGE's body, its
    properties text and FLAG, laid out so that :func:`encode_raw_batch` stores it. None
    when the properties are not ASCII or a field does not fit the item.
    """
    cdef Py_ssize_t body_len = PyBytes_GET_SIZE(body), props_len, size
    cdef unsigned char* w
    if not PyUnicode_IS_COMPACT_ASCII(props) or not _in32(flag):
        return None
    props_len = PyUnicode_GET_LENGTH(props)
    size = 22 + body_len + props_len
    if props_len > _MAX_PROPERTIES or size > _I32_MAX:
        return None
    out = PyBytes_FromStringAndSize(NULL, size)
    w = <unsigned char*>PyBytes_AS_STRING(out)
    _put32(w, <uint32_t>size)
    _put64(w + 4, 0)  # MAGIC and BODYCRC: the walk does not read them
    _put32(w + 12, <uint32_t>flag)
    _put32(w + 16, <uint32_t>body_len)
    memcpy(w + 20, PyBytes_AS_STRING(body), body_len)
    _put16(w + 20 + body_len, <uint32_t>props_len)
    memcpy(w + 22 + body_len, PyUnicode_DATA(props), props_len)
    return out
