# The usual JSON request header, parsed straight from its bytes (included by _speedups.pyx).
#
# What the official clients send: one object with int code/opaque/flag/version, a
# string language, a string or null remark, and extFields whose values are strings or
# (the C++ client) integers. Anything else (a float, a nested value, a surrogate
# escape, bytes that are not UTF-8, a key written with escapes, a field missing or out
# of range) makes _decode_json return None and the Python path decodes the header as it
# always did, errors included. So this only has to be exact on what it accepts: the
# values json.loads gives, with integer extFields values as their decimal text
# (header_codec._normalized).

cdef object _NO = object()  # "not the usual header": the Python path decides

cdef enum:
    _J_CODE = 1
    _J_OPAQUE = 2
    _J_FLAG = 4
    _J_VERSION = 8
    _J_LANGUAGE = 16
    _J_EXT = 32
    _J_ALL = 63
    # At most this many digits: an int64 cannot overflow, and no int32 field needs more.
    _J_MAX_DIGITS = 18


cdef inline Py_ssize_t _ws(const unsigned char* p, Py_ssize_t i, Py_ssize_t n) noexcept:
    while i < n and (p[i] == 32 or p[i] == 10 or p[i] == 13 or p[i] == 9):
        i += 1
    return i


cdef inline bint _key_is(const unsigned char* p, Py_ssize_t n, const char* name, Py_ssize_t size) noexcept:
    return n == size and memcmp(p, name, size) == 0


cdef inline int _hex(unsigned char c) noexcept:
    if 48 <= c <= 57:
        return c - 48
    if 97 <= c <= 102:
        return c - 87
    if 65 <= c <= 70:
        return c - 55
    return -1


cdef Py_ssize_t _string_end(const unsigned char* p, Py_ssize_t i, Py_ssize_t n, bint* escaped) noexcept:
    """Index of the closing quote of the string whose text starts at ``i``, or -1.

    -1 also for a raw control character, which strict JSON refuses.
    """
    cdef unsigned char c
    while i < n:
        c = p[i]
        if c == 34:
            return i
        if c == 92:
            escaped[0] = True
            i += 2
            continue
        if c < 32:
            return -1
        i += 1
    return -1


cdef object _unescaped(const unsigned char* p, Py_ssize_t start, Py_ssize_t end):
    """The text of a string with escapes, or _NO (a surrogate or a bad escape)."""
    cdef bytes out = PyBytes_FromStringAndSize(NULL, end - start)
    cdef unsigned char* o = <unsigned char*>PyBytes_AS_STRING(out)
    cdef Py_ssize_t i = start, k = 0
    cdef unsigned char c
    cdef int d0, d1, d2, d3
    cdef unsigned int u
    while i < end:
        c = p[i]
        if c != 92:
            o[k] = c
            k += 1
            i += 1
            continue
        if i + 1 >= end:
            return _NO
        c = p[i + 1]
        i += 2
        if c == 34 or c == 92 or c == 47:
            o[k] = c
        elif c == 110:
            o[k] = 10
        elif c == 116:
            o[k] = 9
        elif c == 114:
            o[k] = 13
        elif c == 98:
            o[k] = 8
        elif c == 102:
            o[k] = 12
        elif c == 117:
            if i + 4 > end:
                return _NO
            d0, d1, d2, d3 = _hex(p[i]), _hex(p[i + 1]), _hex(p[i + 2]), _hex(p[i + 3])
            if d0 < 0 or d1 < 0 or d2 < 0 or d3 < 0:
                return _NO
            i += 4
            u = <unsigned int>((d0 << 12) | (d1 << 8) | (d2 << 4) | d3)
            if u < 0x80:
                o[k] = <unsigned char>u
            elif u < 0x800:
                o[k] = <unsigned char>(0xC0 | (u >> 6))
                o[k + 1] = <unsigned char>(0x80 | (u & 0x3F))
                k += 1
            elif 0xD800 <= u <= 0xDFFF:
                return _NO  # surrogates (pairs or lone): the Python path
            else:
                o[k] = <unsigned char>(0xE0 | (u >> 12))
                o[k + 1] = <unsigned char>(0x80 | ((u >> 6) & 0x3F))
                o[k + 2] = <unsigned char>(0x80 | (u & 0x3F))
                k += 2
        else:
            return _NO
        k += 1
    try:
        return PyUnicode_DecodeUTF8(<const char*>o, k, NULL)
    except UnicodeDecodeError:
        return _NO


cdef object _json_string(const unsigned char* p, Py_ssize_t* at, Py_ssize_t n):
    """The string whose opening quote is at ``at[0]``; ``at[0]`` moves past it."""
    cdef bint escaped = False
    cdef Py_ssize_t start = at[0] + 1
    cdef Py_ssize_t end = _string_end(p, start, n, &escaped)
    if end < 0:
        return _NO
    at[0] = end + 1
    if escaped:
        return _unescaped(p, start, end)
    try:
        return PyUnicode_DecodeUTF8(<const char*>p + start, end - start, NULL)
    except UnicodeDecodeError:
        return _NO


cdef object _json_int(const unsigned char* p, Py_ssize_t* at, Py_ssize_t n):
    """The integer at ``at[0]`` (no fraction, no exponent); ``at[0]`` moves past it."""
    cdef Py_ssize_t i = at[0], first
    cdef bint negative = False
    cdef int64_t value = 0
    if i < n and p[i] == 45:
        negative = True
        i += 1
    first = i
    if i >= n or not 48 <= p[i] <= 57:
        return _NO
    if p[i] == 48:
        i += 1
    else:
        while i < n and 48 <= p[i] <= 57:
            if i - first == _J_MAX_DIGITS:
                return _NO  # checked before the digit is added: no int64 overflow
            value = value * 10 + (p[i] - 48)
            i += 1
    if i < n and (p[i] == 46 or p[i] == 101 or p[i] == 69 or 48 <= p[i] <= 57):
        return _NO  # a fraction or exponent (a float), or digits after a leading 0
    at[0] = i
    return -value if negative else value


cdef object _json_ext(const unsigned char* p, Py_ssize_t* at, Py_ssize_t n):
    """extFields: an object of strings and integers (as their decimal text)."""
    cdef Py_ssize_t i = at[0]
    cdef dict ext = {}
    if i >= n or p[i] != 123:
        return _NO
    i = _ws(p, i + 1, n)
    if i < n and p[i] == 125:
        at[0] = i + 1
        return ext
    while True:
        if i >= n or p[i] != 34:
            return _NO
        key = _json_string(p, &i, n)
        if key is _NO:
            return _NO
        i = _ws(p, i, n)
        if i >= n or p[i] != 58:
            return _NO
        i = _ws(p, i + 1, n)
        if i >= n:
            return _NO
        if p[i] == 34:
            value = _json_string(p, &i, n)
        else:
            value = _json_int(p, &i, n)
            if value is not _NO:
                value = str(value)
        if value is _NO:
            return _NO
        ext[key] = value
        i = _ws(p, i, n)
        if i >= n:
            return _NO
        if p[i] == 44:
            i = _ws(p, i + 1, n)
        elif p[i] == 125:
            at[0] = i + 1
            return ext
        else:
            return _NO


cdef bint _skip_scalar(const unsigned char* p, Py_ssize_t* at, Py_ssize_t n):
    """Step over a string, integer, true, false or null (a field nobody reads)."""
    cdef Py_ssize_t i = at[0]
    cdef bint escaped = False
    if p[i] == 34:
        i = _string_end(p, i + 1, n, &escaped)
        if i < 0 or (escaped and _unescaped(p, at[0] + 1, i) is _NO):
            return False
        at[0] = i + 1
        return True
    if i + 4 <= n and (memcmp(p + i, b"true", 4) == 0 or memcmp(p + i, b"null", 4) == 0):
        at[0] = i + 4
        return True
    if i + 5 <= n and memcmp(p + i, b"false", 5) == 0:
        at[0] = i + 5
        return True
    return _json_int(p, at, n) is not _NO


cdef tuple _decode_json(const unsigned char* p, Py_ssize_t n):
    """``(code, opaque, flag, remark, ext, language, version)``, or None."""
    cdef Py_ssize_t i, ks, ke
    cdef int seen = 0
    cdef bint escaped
    code = opaque = flag = version = language = remark = ext = None
    if n == 0 or p[0] != 123:
        return None
    i = _ws(p, 1, n)
    while True:
        if i >= n or p[i] != 34:
            return None
        escaped = False
        ks = i + 1
        ke = _string_end(p, ks, n, &escaped)
        if ke < 0 or escaped:
            return None
        i = _ws(p, ke + 1, n)
        if i >= n or p[i] != 58:
            return None
        i = _ws(p, i + 1, n)
        if i >= n:
            return None
        if _key_is(p + ks, ke - ks, "code", 4):
            code = _json_int(p, &i, n)
            seen |= _J_CODE
        elif _key_is(p + ks, ke - ks, "opaque", 6):
            opaque = _json_int(p, &i, n)
            seen |= _J_OPAQUE
        elif _key_is(p + ks, ke - ks, "flag", 4):
            flag = _json_int(p, &i, n)
            seen |= _J_FLAG
        elif _key_is(p + ks, ke - ks, "version", 7):
            version = _json_int(p, &i, n)
            seen |= _J_VERSION
        elif _key_is(p + ks, ke - ks, "language", 8):
            language = _json_string(p, &i, n) if p[i] == 34 else _NO
            seen |= _J_LANGUAGE
        elif _key_is(p + ks, ke - ks, "extFields", 9):
            ext = _json_ext(p, &i, n)
            seen |= _J_EXT
        elif _key_is(p + ks, ke - ks, "remark", 6):
            if i + 4 <= n and memcmp(p + i, b"null", 4) == 0:
                remark = None
                i += 4
            else:
                remark = _json_string(p, &i, n) if p[i] == 34 else _NO
        elif not _skip_scalar(p, &i, n):
            return None
        if code is _NO or opaque is _NO or flag is _NO or version is _NO:
            return None
        if language is _NO or remark is _NO or ext is _NO:
            return None
        i = _ws(p, i, n)
        if i >= n:
            return None
        if p[i] == 44:
            i = _ws(p, i + 1, n)
        elif p[i] == 125:
            break
        else:
            return None
    if _ws(p, i + 1, n) != n or seen != _J_ALL:
        return None
    if not (
        _in_i32(code) and _in_i32(opaque) and _in_i32(flag) and _in_i32(version)
    ):
        return None  # the Python path names the field out of range
    return code, opaque, flag, remark, ext, language, version


# -- the answer's side: a JSON header written straight into the frame's head ----------

cdef inline bint _plain_ascii(object text) noexcept:
    """ASCII text that JSON writes as it is (no quote, backslash or control character)."""
    cdef const unsigned char* s
    cdef Py_ssize_t i, n
    if type(text) is not str or not PyUnicode_IS_COMPACT_ASCII(text):
        return False
    s = <const unsigned char*>PyUnicode_DATA(text)
    n = PyUnicode_GET_LENGTH(text)
    for i in range(n):
        if s[i] < 32 or s[i] == 34 or s[i] == 92:
            return False
    return True


cdef inline Py_ssize_t _put_text(unsigned char* o, object text) noexcept:
    cdef Py_ssize_t n = PyUnicode_GET_LENGTH(text)
    o[0] = 34
    memcpy(o + 1, PyUnicode_DATA(text), n)
    o[n + 1] = 34
    return n + 2


cdef inline Py_ssize_t _put_raw(unsigned char* o, const char* raw, Py_ssize_t n) noexcept:
    memcpy(o, raw, n)
    return n


cdef inline Py_ssize_t _int_len(int64_t v) noexcept:
    cdef Py_ssize_t n = 1 if v < 0 else 0
    cdef uint64_t u = <uint64_t>(-v) if v < 0 else <uint64_t>v
    while True:
        n += 1
        u //= 10
        if u == 0:
            return n


cdef inline Py_ssize_t _put_int(unsigned char* o, int64_t v) noexcept:
    # Digits are written from the end back, so their count comes first.
    cdef Py_ssize_t n = _int_len(v), k = n
    cdef uint64_t u = <uint64_t>(-v) if v < 0 else <uint64_t>v
    if v < 0:
        o[0] = 45
    while True:
        k -= 1
        o[k] = <unsigned char>(48 + u % 10)
        u //= 10
        if u == 0:
            return n


cdef inline bint _plain_int(object v) noexcept:
    return isinstance(v, int) and type(v) is not bool


def encode_json_head(cmd, Py_ssize_t body_len):
    """A JSON-header command's frame up to its body: the two length words, the header.

    ``encode_command_into``'s compiled path for the usual answer: int fields within
    int32, a dict of ASCII extFields strings, ASCII language and remark, none of them
    needing an escape. The text is what ``encode_header`` writes for it, key for key.

    Args:
        cmd: The command (serialize type JSON).
        body_len: Bytes of body that follow.

    Returns:
        The bytes, or None for anything else (the Python path writes or refuses it).
    """
    code, opaque, flag, version = cmd.code, cmd.opaque, cmd.flag, cmd.version
    # ints and int enums (ResponseCode), as json writes them; not bools (true/false).
    if not (_plain_int(code) and _plain_int(opaque) and _plain_int(flag) and _plain_int(version)):
        return None
    try:
        if not (_in_i32(code) and _in_i32(opaque) and _in_i32(flag) and _in_i32(version)):
            return None
    except OverflowError:
        return None  # beyond int64: the Python path says which field is out of range
    ext, language, remark = cmd.ext_fields, cmd.language, cmd.remark
    if type(ext) is not dict or not _plain_ascii(language):
        return None
    if remark is not None and not _plain_ascii(remark):
        return None
    # {"code":,"extFields":{},"flag":,"language":"","opaque":,"serializeTypeCurrentRPC":"JSON","version":}
    # is 100 bytes; then the numbers, the texts, each entry's 5 ("":"") and the commas.
    cdef Py_ssize_t size = 100 + PyUnicode_GET_LENGTH(language), k
    size += _int_len(code) + _int_len(opaque) + _int_len(flag) + _int_len(version)
    if remark is not None:
        size += 12 + PyUnicode_GET_LENGTH(remark)  # ,"remark":""
    for key, value in (<dict>ext).items():
        if not (_plain_ascii(key) and _plain_ascii(value)):
            return None
        size += PyUnicode_GET_LENGTH(key) + PyUnicode_GET_LENGTH(value) + 6  # "":"",
    if ext:
        size -= 1  # no comma after the last entry
    if size > 0xFFFFFF or body_len < 0 or 4 + size + body_len > 0x7FFFFFFF:
        return None  # the Python path says why
    cdef bytes out = PyBytes_FromStringAndSize(NULL, 8 + size)
    cdef unsigned char* o = <unsigned char*>PyBytes_AS_STRING(out)
    k = 8
    k += _put_raw(o + k, b'{"code":', 8)
    k += _put_int(o + k, code)
    k += _put_raw(o + k, b',"extFields":{', 14)
    cdef bint first = True
    for key, value in (<dict>ext).items():
        if not first:
            o[k] = 44
            k += 1
        first = False
        k += _put_text(o + k, key)
        o[k] = 58
        k += 1
        k += _put_text(o + k, value)
    k += _put_raw(o + k, b'},"flag":', 9)
    k += _put_int(o + k, flag)
    k += _put_raw(o + k, b',"language":', 12)
    k += _put_text(o + k, language)
    k += _put_raw(o + k, b',"opaque":', 10)
    k += _put_int(o + k, opaque)
    if remark is not None:
        k += _put_raw(o + k, b',"remark":', 10)
        k += _put_text(o + k, remark)
    k += _put_raw(o + k, b',"serializeTypeCurrentRPC":"JSON","version":', 44)
    k += _put_int(o + k, version)
    o[k] = 125
    k += 1
    _put32(o, <uint32_t>(4 + size + body_len))
    _put32(o + 4, <uint32_t>size)
    return out
