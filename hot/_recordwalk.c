/*
 * hot._recordwalk: the record walk of hot.record_validation.check_records, in C.
 *
 * Same rules, same order, same first error and the same message text as the pure-Python walk
 * (_check_records_py, the reference; tests/hot/test_record_walk_native.py fuzzes one against
 * the other). The records are read in place through the buffer protocol: a memoryview of a
 * produce request is walked without copying it.
 *
 * walk(data, records_count, last_offset_delta, base_timestamp, require_keys) returns the batch's
 * max timestamp (an int), or, when only the key rule fails, the list of keyless record indexes;
 * a bad record raises InvalidRecord(index, message) for the Python wrapper to turn into
 * hot.errors.InvalidRecordError.
 *
 * The input is untrusted network data: every read is preceded by a bounds check against the
 * buffer's length, and every position is a signed 64-bit value that never exceeds that length
 * plus a 32-bit length, so no addition can overflow. Where the Python walk reports an index past
 * the end (IndexError) and where its varint decoders report a truncation differ; both are
 * reproduced exactly (see RUN_PAST_END and read_unsigned).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <errno.h>
#include <sys/uio.h>
#include <unistd.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include <nmmintrin.h>
#define HAVE_SSE42_CRC 1
#endif

static PyObject *InvalidRecord; /* hot._recordwalk.InvalidRecord(index, message) */

#define MIN_RECORD_BODY 6
#define MSG_SIZE 256

typedef struct {
    const unsigned char *data;
    int64_t end;
    int64_t index;       /* the record being walked */
    char message[MSG_SIZE];
    int failed;          /* message holds the error for record `index` */
} Walk;

static void fail(Walk *w, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(w->message, MSG_SIZE, fmt, ap);
    va_end(ap);
    w->failed = 1;
}

/* hot.records._read_unsigned + decode_varint / decode_varlong: at most max_bytes bytes, then
 * the 32- or 64-bit range, then zigzag. Returns 0 and sets w->failed on error. */
static int read_unsigned(Walk *w, int64_t *pos, int is_long, int64_t *value) {
    const int max_bytes = is_long ? 10 : 5;
    const char *what = is_long ? "varlong" : "varint";
    const int64_t start = *pos;
    int64_t p = start;
    uint64_t u = 0;
    int overflow = 0;
    for (int k = 0; k < max_bytes; k++) {
        if (p >= w->end) {
            fail(w, "%s truncated at byte %lld", what, (long long)p);
            return 0;
        }
        unsigned int b = w->data[p];
        p++;
        uint64_t bits = b & 0x7F;
        int shift = 7 * k;
        /* shift <= 63; bits shifted out of 64 bits make the value overflow (the Python
         * check u >> 64 on an unbounded int). */
        if (shift > 0 && (bits >> (64 - shift)) != 0) {
            overflow = 1;
        }
        u |= bits << shift;
        if (b < 0x80) {
            if (overflow || (!is_long && (u >> 32) != 0)) {
                fail(w, "%s at byte %lld overflows %d bits", what, (long long)start, is_long ? 64 : 32);
                return 0;
            }
            *value = (int64_t)(u >> 1) ^ -(int64_t)(u & 1);
            *pos = p;
            return 1;
        }
    }
    fail(w, "%s longer than %d bytes at byte %lld", what, max_bytes, (long long)(p - max_bytes));
    return 0;
}

/* The Python walk's inline decoding of length, key length and value length: one- and two-byte
 * varints directly (an index past the end is IndexError there, reported as RUN_PAST_END),
 * longer ones through decode_varint. Returns 1, 0 (w->failed) or -1 (past the end). */
static int read_inline_varint(Walk *w, int64_t *pos, int64_t *value) {
    int64_t p = *pos;
    if (p >= w->end) {
        return -1;
    }
    unsigned int b = w->data[p];
    if (b < 0x80) {
        *value = (int64_t)(b >> 1) ^ -(int64_t)(b & 1);
        *pos = p + 1;
        return 1;
    }
    if (p + 1 >= w->end) {
        return -1;
    }
    if (w->data[p + 1] < 0x80) {
        uint64_t u = (b & 0x7F) | ((uint64_t)w->data[p + 1] << 7);
        *value = (int64_t)(u >> 1) ^ -(int64_t)(u & 1);
        *pos = p + 2;
        return 1;
    }
    return read_unsigned(w, pos, 0, value);
}

/* Python's "utf-8" codec, strict: ASCII is scanned here, anything else decoded by CPython
 * itself so that acceptance is identical (surrogates, overlongs, > U+10FFFF refused).
 * Returns 1 valid, 0 invalid, -1 with a Python error set (memory). */
static int utf8_valid(const unsigned char *s, int64_t n) {
    int64_t k = 0;
    while (k < n && s[k] < 0x80) {
        k++;
    }
    if (k == n) {
        return 1;
    }
    PyObject *text = PyUnicode_DecodeUTF8((const char *)s, (Py_ssize_t)n, "strict");
    if (text != NULL) {
        Py_DECREF(text);
        return 1;
    }
    if (PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) {
        PyErr_Clear();
        return 0;
    }
    return -1;
}

/* _check_headers. Returns 1 with *pos after the headers, 0 (w->failed), -1 (Python error). */
static int check_headers(Walk *w, int64_t *pos, int64_t rec_end) {
    int64_t count, n;
    if (!read_unsigned(w, pos, 0, &count)) {
        return 0;
    }
    if (count < 0 || count * 2 > rec_end - *pos) {
        fail(w, "header count %lld invalid", (long long)count);
        return 0;
    }
    for (int64_t h = 0; h < count; h++) {
        if (!read_unsigned(w, pos, 0, &n)) {
            return 0;
        }
        if (n < 0 || *pos + n > rec_end) {
            fail(w, "header key length %lld invalid", (long long)n);
            return 0;
        }
        /* *pos + n <= rec_end <= end: the key lies within the buffer. */
        int ok = utf8_valid(w->data + *pos, n);
        if (ok < 0) {
            return -1;
        }
        if (!ok) {
            fail(w, "header key is not valid UTF-8");
            return 0;
        }
        *pos += n;
        if (!read_unsigned(w, pos, 0, &n)) {
            return 0;
        }
        if (n >= 0) {
            *pos += n;
            if (*pos > rec_end) {
                fail(w, "header value length %lld invalid", (long long)n);
                return 0;
            }
        } else if (n != -1) {
            fail(w, "header value length %lld", (long long)n);
            return 0;
        }
    }
    return 1;
}

static PyObject *raise_invalid(int64_t index, const char *message) {
    PyObject *args = Py_BuildValue("(Ls)", (long long)index, message);
    if (args != NULL) {
        PyErr_SetObject(InvalidRecord, args);
        Py_DECREF(args);
    }
    return NULL;
}

#define RUN_PAST_END (-1)
#define STEP(call)                                                                                 \
    do {                                                                                           \
        int rc_ = (call);                                                                          \
        if (rc_ == RUN_PAST_END) {                                                                 \
            goto past_end;                                                                         \
        }                                                                                          \
        if (rc_ == 0) {                                                                            \
            goto failed;                                                                           \
        }                                                                                          \
    } while (0)

static PyObject *walk_records(Walk *w, int64_t count, int64_t last_delta, int64_t base_ts,
                              int require_keys) {
    const unsigned char *data = w->data;
    const int64_t end = w->end;
    PyObject *keyless = NULL;
    int64_t max_delta = INT64_MIN;
    int64_t prev = -1;
    int64_t pos = 0;
    int64_t i = 0;
    int64_t length, rec_end, n, ts_delta, off_delta;

    if (count == 0 && end == 0) {
        return PyLong_FromLong(-1);
    }
    /* count is an int32 and end a Py_ssize_t: no overflow. */
    if (count * (MIN_RECORD_BODY + 1) > end) {
        snprintf(w->message, MSG_SIZE, "recordsCount %lld cannot fit in %lld bytes of records",
                 (long long)count, (long long)end);
        return raise_invalid(0, w->message);
    }
    const int dense = count == last_delta + 1;

    for (i = 0; i < count; i++) {
        w->index = i;
        STEP(read_inline_varint(w, &pos, &length));
        rec_end = pos + length;
        if (length < MIN_RECORD_BODY || rec_end > end) {
            fail(w, "length %lld invalid with %lld bytes remaining", (long long)length,
                 (long long)(end - pos));
            goto failed;
        }
        /* From here pos + 6 <= rec_end <= end. */
        if (data[pos]) {
            fail(w, "attributes 0x%02x: record attributes are unused and must be 0", data[pos]);
            goto failed;
        }
        {
            unsigned int b = data[pos + 1];
            if (b < 0x80) {
                ts_delta = (int64_t)(b >> 1) ^ -(int64_t)(b & 1);
                pos += 2;
            } else if (data[pos + 2] < 0x80) {
                uint64_t u = (b & 0x7F) | ((uint64_t)data[pos + 2] << 7);
                ts_delta = (int64_t)(u >> 1) ^ -(int64_t)(u & 1);
                pos += 3;
            } else {
                pos += 1;
                STEP(read_unsigned(w, &pos, 1, &ts_delta));
            }
        }
        if (ts_delta > max_delta) {
            max_delta = ts_delta;
        }
        STEP(read_unsigned(w, &pos, 0, &off_delta));
        if (dense) {
            if (off_delta != i) {
                fail(w,
                     "offsetDelta %lld where %lld was expected: with recordsCount = "
                     "lastOffsetDelta + 1 the deltas are 0, 1, 2, ...",
                     (long long)off_delta, (long long)i);
                goto failed;
            }
        } else {
            if (off_delta <= prev || off_delta > last_delta) {
                fail(w,
                     "offsetDelta %lld not in (%lld, lastOffsetDelta %lld]: "
                     "offset deltas must increase within the batch",
                     (long long)off_delta, (long long)prev, (long long)last_delta);
                goto failed;
            }
            prev = off_delta;
        }
        /* key */
        STEP(read_inline_varint(w, &pos, &n));
        if (n < 0) {
            if (n != -1) {
                fail(w, "key length %lld", (long long)n);
                goto failed;
            }
            if (require_keys) {
                if (keyless == NULL && (keyless = PyList_New(0)) == NULL) {
                    return NULL;
                }
                PyObject *k = PyLong_FromLongLong((long long)i);
                if (k == NULL || PyList_Append(keyless, k) < 0) {
                    Py_XDECREF(k);
                    Py_DECREF(keyless);
                    return NULL;
                }
                Py_DECREF(k);
            }
        } else {
            pos += n; /* n < 2**31, pos <= end */
            if (pos > rec_end) {
                fail(w, "key length %lld overruns the record", (long long)n);
                goto failed;
            }
        }
        /* value */
        STEP(read_inline_varint(w, &pos, &n));
        if (n >= 0) {
            pos += n;
            if (pos > rec_end) {
                fail(w, "value length %lld overruns the record", (long long)n);
                goto failed;
            }
        } else if (n != -1) {
            fail(w, "value length %lld", (long long)n);
            goto failed;
        }
        /* headers */
        if (pos >= end) {
            goto past_end;
        }
        if (data[pos] == 0) {
            pos += 1;
        } else {
            int rc = check_headers(w, &pos, rec_end);
            if (rc < 0) {
                Py_XDECREF(keyless);
                return NULL;
            }
            if (rc == 0) {
                goto failed;
            }
        }
        if (pos != rec_end) {
            fail(w, "declared length %lld but its fields end %+lld bytes off", (long long)length,
                 (long long)(pos - rec_end));
            goto failed;
        }
    }
    if (pos != end) {
        Py_XDECREF(keyless);
        snprintf(w->message, MSG_SIZE, "%lld trailing bytes after the last of %lld records",
                 (long long)(end - pos), (long long)count);
        return raise_invalid(count - 1, w->message);
    }
    int64_t max_ts;
    if (__builtin_add_overflow(base_ts, max_delta, &max_ts)) {
        Py_XDECREF(keyless);
        snprintf(w->message, MSG_SIZE, "baseTimestamp %lld + timestampDelta %lld overflows int64",
                 (long long)base_ts, (long long)max_delta);
        return raise_invalid(0, w->message);
    }
    if (keyless != NULL) {
        return keyless;
    }
    return PyLong_FromLongLong((long long)(max_ts > -1 ? max_ts : -1));

past_end:
    snprintf(w->message, MSG_SIZE, "runs past the end of the %lld-byte records data", (long long)end);
failed:
    Py_XDECREF(keyless);
    return raise_invalid(w->index, w->message);
}

static PyObject *walk(PyObject *module, PyObject *args) {
    Py_buffer buf;
    int count, last_delta, require_keys;
    long long base_ts;
    (void)module;
    if (!PyArg_ParseTuple(args, "y*iiLp:walk", &buf, &count, &last_delta, &base_ts, &require_keys)) {
        return NULL;
    }
    Walk w;
    w.data = (const unsigned char *)buf.buf;
    w.end = (int64_t)buf.len;
    w.index = 0;
    w.message[0] = '\0';
    w.failed = 0;
    PyObject *result = walk_records(&w, count, last_delta, base_ts, require_keys);
    PyBuffer_Release(&buf);
    return result;
}

/* ---------------------------------------------------------------------------------------------
 * scan(data, max_size, log_append_time, require_keys, max_uncompressed) -> list[tuple] | None
 *
 * The accepting half of hot.log_append.validate_batches for a leader, in one call: every batch of
 * a produce payload framed, checked (iter_client_batches' checks in order), its CRC-32C computed,
 * its records walked (walk_records) and its stored maxTimestamp/attributes decided (check_batch).
 * It only ever accepts: anything the Python path would refuse or treat specially (any error, a
 * compressed batch, the LogAppendTime bit set by the client, keyless records of a compacted topic,
 * records larger than max_uncompressed) returns None and the caller runs the Python path, which
 * raises the one canonical error. So errors and their text exist in one place only.
 *
 * An accepted payload gives one tuple per batch, AppendBatch's fields in order:
 * (position, size, batch_length, last_offset_delta, max_timestamp, records_count, base_offset,
 *  producer_id, producer_epoch, base_sequence, is_control (always False), leader_epoch,
 *  is_transactional, attributes to store or -1).
 * ------------------------------------------------------------------------------------------- */

#define HDR_SIZE 61
#define MIN_BATCH_LEN 49
#define CRC_FROM 21
#define ATTR_CODEC 0x07
#define ATTR_TS_TYPE 0x08
#define ATTR_TXN 0x10
#define ATTR_CONTROL 0x20

static uint32_t crc_table[256];

static void crc_table_init(void) {
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) {
            c = c & 1 ? (c >> 1) ^ 0x82F63B78u : c >> 1;
        }
        crc_table[i] = c;
    }
}

static uint32_t crc32c_sw(const unsigned char *p, size_t n) {
    uint32_t crc = 0xFFFFFFFFu;
    while (n--) {
        crc = crc_table[(crc ^ *p++) & 0xFF] ^ (crc >> 8);
    }
    return ~crc;
}

#ifdef HAVE_SSE42_CRC
static int have_sse42 = 0;

__attribute__((target("sse4.2"))) static uint32_t crc32c_hw(const unsigned char *p, size_t n) {
    uint64_t c = 0xFFFFFFFFu;
    while (n >= 8) {
        uint64_t v;
        memcpy(&v, p, 8);
        c = _mm_crc32_u64(c, v);
        p += 8;
        n -= 8;
    }
    uint32_t crc = (uint32_t)c;
    while (n--) {
        crc = _mm_crc32_u8(crc, *p++);
    }
    return ~crc;
}
#endif

static uint32_t crc32c(const unsigned char *p, size_t n) {
#ifdef HAVE_SSE42_CRC
    if (have_sse42) {
        return crc32c_hw(p, n);
    }
#endif
    return crc32c_sw(p, n);
}

static inline int64_t be64(const unsigned char *p) {
    uint64_t v = 0;
    for (int k = 0; k < 8; k++) {
        v = (v << 8) | p[k];
    }
    return (int64_t)v;
}

static inline int32_t be32(const unsigned char *p) {
    return (int32_t)(((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3]);
}

static inline int16_t be16(const unsigned char *p) { return (int16_t)(((unsigned)p[0] << 8) | p[1]); }

static PyObject *scan(PyObject *module, PyObject *args) {
    Py_buffer buf;
    long long max_size, max_uncompressed;
    int log_append_time, require_keys;
    (void)module;
    if (!PyArg_ParseTuple(args, "y*LppL:scan", &buf, &max_size, &log_append_time, &require_keys,
                          &max_uncompressed)) {
        return NULL;
    }
    const unsigned char *data = (const unsigned char *)buf.buf;
    const int64_t end = (int64_t)buf.len;
    PyObject *out = PyList_New(0);
    if (out == NULL) {
        PyBuffer_Release(&buf);
        return NULL;
    }
    int64_t pos = 0;
    while (pos < end) {
        if (end - pos < HDR_SIZE) {
            goto decline;
        }
        const unsigned char *h = data + pos;
        if (h[16] != 2) {
            goto decline;
        }
        int32_t batch_length = be32(h + 8);
        if (batch_length < MIN_BATCH_LEN) {
            goto decline;
        }
        int64_t size = (int64_t)batch_length + 12;
        if ((max_size >= 0 && size > max_size) || pos + size > end) {
            goto decline;
        }
        uint32_t stored_crc = (uint32_t)be32(h + 17);
        if (crc32c(h + CRC_FROM, (size_t)(size - CRC_FROM)) != stored_crc) {
            goto decline;
        }
        int16_t attributes = be16(h + 21);
        int32_t last_delta = be32(h + 23);
        int64_t base_ts = be64(h + 27);
        int64_t max_ts = be64(h + 35);
        int64_t producer_id = be64(h + 43);
        int16_t producer_epoch = be16(h + 51);
        int32_t base_sequence = be32(h + 53);
        int32_t records = be32(h + 57);
        if (records <= 0 || last_delta < 0 || (int64_t)records != (int64_t)last_delta + 1) {
            goto decline;
        }
        if (attributes & (ATTR_CONTROL | ATTR_TS_TYPE | ATTR_CODEC)) {
            goto decline; /* control (refused), client LogAppendTime, compressed: Python's */
        }
        if (producer_id >= 0) {
            if (base_sequence < 0 || producer_epoch < 0) {
                goto decline;
            }
        } else if (attributes & ATTR_TXN) {
            goto decline;
        }
        if (size - HDR_SIZE > max_uncompressed) {
            goto decline;
        }
        Walk w;
        w.data = h + HDR_SIZE;
        w.end = size - HDR_SIZE;
        w.index = 0;
        w.message[0] = '\0';
        w.failed = 0;
        PyObject *walked = walk_records(&w, records, last_delta, base_ts, require_keys);
        if (walked == NULL) {
            if (PyErr_ExceptionMatches(InvalidRecord)) {
                PyErr_Clear();
                goto decline;
            }
            goto error;
        }
        if (!PyLong_Check(walked)) { /* keyless records of a compacted topic */
            Py_DECREF(walked);
            goto decline;
        }
        long long walked_ts = PyLong_AsLongLong(walked);
        Py_DECREF(walked);
        long long store_ts = log_append_time ? max_ts : walked_ts;
        int store_attributes = (!log_append_time && walked_ts != max_ts) ? attributes : -1;
        PyObject *t = Py_BuildValue("(LLiiLiLLiiOiOi)", (long long)pos, (long long)size, batch_length,
                                    last_delta, store_ts, records, (long long)be64(h), (long long)producer_id,
                                    (int)producer_epoch, base_sequence, Py_False, be32(h + 12),
                                    (attributes & ATTR_TXN) ? Py_True : Py_False, store_attributes);
        if (t == NULL || PyList_Append(out, t) < 0) {
            Py_XDECREF(t);
            goto error;
        }
        Py_DECREF(t);
        pos += size;
    }
    PyBuffer_Release(&buf);
    return out;

decline:
    PyBuffer_Release(&buf);
    Py_DECREF(out);
    Py_RETURN_NONE;
error:
    PyBuffer_Release(&buf);
    Py_DECREF(out);
    return NULL;
}

/* The 16 bytes a leader rewrites in front of a batch: baseOffset, batchLength, partitionLeaderEpoch. */
static inline void put_be64(unsigned char *p, uint64_t v) {
    for (int k = 7; k >= 0; k--) {
        p[k] = (unsigned char)(v & 0xFF);
        v >>= 8;
    }
}

static inline void put_be32(unsigned char *p, uint32_t v) {
    p[0] = (unsigned char)(v >> 24);
    p[1] = (unsigned char)(v >> 16);
    p[2] = (unsigned char)(v >> 8);
    p[3] = (unsigned char)v;
}

/* Writes above this size release the GIL (a small write to the page cache takes less time
 * than handing the GIL over and taking it back). */
#define WRITE_NOGIL_ABOVE (64 * 1024)

/*
 * write_stamped(fd, data, position, size, file_position, base_offset, leader_epoch) -> None
 *
 * A leader's write of one validated batch (hot.leader_append's one-batch path): the batch at
 * data[position:position + size] with baseOffset and partitionLeaderEpoch replaced (both
 * outside the CRC; batchLength kept), written at file_position by pwritev, a short write
 * continued until every byte is written. OSError on failure (the caller undoes the write).
 * The same bytes as hot.log_append.leader_iov's plain case followed by hot.segment's append.
 */
static PyObject *write_stamped(PyObject *module, PyObject *args) {
    Py_buffer buf;
    int fd;
    long long position, size, file_pos, base_offset;
    int leader_epoch;
    (void)module;
    if (!PyArg_ParseTuple(args, "iy*LLLLi:write_stamped", &fd, &buf, &position, &size, &file_pos,
                          &base_offset, &leader_epoch)) {
        return NULL;
    }
    if (position < 0 || size < 16 || position > (long long)buf.len - size || file_pos < 0) {
        PyBuffer_Release(&buf);
        PyErr_SetString(PyExc_ValueError, "write_stamped: batch out of the buffer's bounds");
        return NULL;
    }
    const unsigned char *batch = (const unsigned char *)buf.buf + position;
    unsigned char prefix[16];
    put_be64(prefix, (uint64_t)base_offset);
    memcpy(prefix + 8, batch + 8, 4);
    put_be32(prefix + 12, (uint32_t)leader_epoch);
    struct iovec iov[2];
    iov[0].iov_base = prefix;
    iov[0].iov_len = 16;
    iov[1].iov_base = (void *)(batch + 16);
    iov[1].iov_len = (size_t)(size - 16);
    int nogil = size > WRITE_NOGIL_ABOVE;
    int err = 0;
    long long done = 0;
    PyThreadState *ts = nogil ? PyEval_SaveThread() : NULL;
    while (done < size) {
        ssize_t n;
        if (done < 16) {
            struct iovec rest[2] = {{prefix + done, (size_t)(16 - done)}, iov[1]};
            n = pwritev(fd, rest, 2, (off_t)(file_pos + done));
        } else {
            n = pwrite(fd, batch + done, (size_t)(size - done), (off_t)(file_pos + done));
        }
        if (n < 0) {
            if (errno == EINTR) {
                continue;
            }
            err = errno;
            break;
        }
        if (n == 0) {
            err = EIO;
            break;
        }
        done += n;
    }
    if (ts != NULL) {
        PyEval_RestoreThread(ts);
    }
    PyBuffer_Release(&buf);
    if (err) {
        errno = err;
        return PyErr_SetFromErrno(PyExc_OSError);
    }
    Py_RETURN_NONE;
}

static PyObject *crc(PyObject *module, PyObject *args) {
    Py_buffer buf;
    (void)module;
    if (!PyArg_ParseTuple(args, "y*:crc32c", &buf)) {
        return NULL;
    }
    uint32_t c = crc32c((const unsigned char *)buf.buf, (size_t)buf.len);
    PyBuffer_Release(&buf);
    return PyLong_FromUnsignedLong(c);
}

/*
 * The Produce fast path's codec (api.handlers.produce_fast; issue 34 round 5): the request
 * parse and the answer's encode for a request to one partition of one topic, one call each.
 * The Python functions there stay the reference (tests/api/test_produce_codec_c.py feeds
 * both the same frames and requires the same answers).
 */

/* An unsigned varint as produce_fast._uvarint reads it (at most 5 bytes); -1 past the end
 * or too long. */
static int64_t pc_uvarint(const unsigned char *b, Py_ssize_t n, Py_ssize_t *pos) {
    Py_ssize_t p = *pos;
    if (p >= n) {
        return -1;
    }
    uint64_t v = b[p] & 0x7F;
    if (b[p] < 0x80) {
        *pos = p + 1;
        return (int64_t)v;
    }
    int shift = 7;
    for (;;) {
        p++;
        if (p >= n) {
            return -1;
        }
        v |= (uint64_t)(b[p] & 0x7F) << shift;
        if (b[p] < 0x80) {
            *pos = p + 1;
            return (int64_t)v;
        }
        shift += 7;
        if (shift > 28) {
            return -1;
        }
    }
}

static int pc_i16(const unsigned char *b, Py_ssize_t n, Py_ssize_t pos, int *out) {
    if (pos < 0 || pos + 2 > n) {
        return -1;
    }
    *out = be16(b + pos);
    return 0;
}

static int pc_i32(const unsigned char *b, Py_ssize_t n, Py_ssize_t pos, int32_t *out) {
    if (pos < 0 || pos + 4 > n) {
        return -1;
    }
    *out = be32(b + pos);
    return 0;
}

/* An array's count or a bytes field's length as the version lays it out: a compact
 * (flexible) unsigned varint less one, or an int32. -1 for null, below -1 past the end. */
static int64_t pc_count(const unsigned char *b, Py_ssize_t n, Py_ssize_t *pos, int flexible) {
    int32_t v32;
    if (flexible) {
        int64_t v = pc_uvarint(b, n, pos);
        return v < 0 ? -2 : v - 1;
    }
    if (pc_i32(b, n, *pos, &v32) < 0) {
        return -2;
    }
    *pos += 4;
    return v32;
}

/* A string's length: a compact unsigned varint less one, or an int16. -1 for null, below
 * -1 past the end. */
static int64_t pc_strlen(const unsigned char *b, Py_ssize_t n, Py_ssize_t *pos, int flexible) {
    int v16;
    if (flexible) {
        int64_t v = pc_uvarint(b, n, pos);
        return v < 0 ? -2 : v - 1;
    }
    if (pc_i16(b, n, *pos, &v16) < 0) {
        return -2;
    }
    *pos += 2;
    return v16;
}

/*
 * produce_one(frame) -> (version, acks, timeout_ms, name, index, start, size) | None
 *
 * produce_fast.parse of a Produce frame (no size prefix) that carries one partition of one
 * topic, the fields as parse returns them (name: the topic's bytes, the records at
 * frame[start:start + size]); None for everything else (parse then judges the frame: more
 * partitions, or not for the fast path at all).
 */
static PyObject *produce_one(PyObject *module, PyObject *arg) {
    Py_buffer buf;
    (void)module;
    if (PyObject_GetBuffer(arg, &buf, PyBUF_SIMPLE) < 0) {
        return NULL;
    }
    const unsigned char *b = (const unsigned char *)buf.buf;
    Py_ssize_t n = buf.len, pos;
    int version, client_len, txn_len, acks, flexible;
    int32_t timeout_ms, index;
    int64_t nlen, size;
    Py_ssize_t name_at, start;
    if (n < 10 || b[2] != 0) {
        goto none;
    }
    version = b[3];
    if (version < 3 || version > 11) {
        goto none;
    }
    flexible = version >= 9;
    pc_i16(b, n, 8, &client_len);
    if (client_len < -1) {
        goto none;
    }
    pos = 10 + (client_len > 0 ? client_len : 0);
    if (flexible) {
        if (pos + 2 > n || b[pos] != 0 || b[pos + 1] != 0) {
            goto none; /* header tagged fields, or a transactional id */
        }
        pos += 2;
    } else {
        if (pc_i16(b, n, pos, &txn_len) < 0 || txn_len != -1) {
            goto none;
        }
        pos += 2;
    }
    if (pc_i16(b, n, pos, &acks) < 0 || pc_i32(b, n, pos + 2, &timeout_ms) < 0) {
        goto none;
    }
    if (acks < -1 || acks > 1) {
        goto none;
    }
    pos += 6;
    if (pc_count(b, n, &pos, flexible) != 1) {
        goto none; /* not one topic */
    }
    nlen = pc_strlen(b, n, &pos, flexible);
    if (nlen < 0 || pos + nlen > n) {
        goto none;
    }
    name_at = pos;
    pos += (Py_ssize_t)nlen;
    if (pc_count(b, n, &pos, flexible) != 1 || pc_i32(b, n, pos, &index) < 0) {
        goto none; /* not one partition */
    }
    pos += 4;
    size = pc_count(b, n, &pos, flexible); /* the records' length */
    if (size <= 0 || pos + size > n) {
        goto none; /* a null or empty batch: the general path refuses it */
    }
    start = pos;
    pos += (Py_ssize_t)size;
    if (flexible) {
        /* the partition's, the topic's and the body's tagged fields, all empty */
        if (pos + 3 != n || b[pos] != 0 || b[pos + 1] != 0 || b[pos + 2] != 0) {
            goto none;
        }
    } else if (pos != n) {
        goto none;
    }
    PyObject *name = PyBytes_FromStringAndSize((const char *)b + name_at, (Py_ssize_t)nlen);
    PyBuffer_Release(&buf);
    if (name == NULL) {
        return NULL;
    }
    return Py_BuildValue("(iiiNinn)", version, acks, (int)timeout_ms, name, (int)index, start,
                         (Py_ssize_t)size);
none:
    PyBuffer_Release(&buf);
    Py_RETURN_NONE;
}

/*
 * produce_answer(correlation, head, tail, version, index, base_offset, log_append_time_ms,
 *                log_start_offset) -> bytes
 *
 * produce_fast.encode_one's answer (no size prefix): correlation (4 bytes), the template's
 * head, the partition's fields without an error as the version lays them out, the tail.
 */
static PyObject *produce_answer(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    if (nargs != 8 || !PyBytes_Check(args[0]) || !PyBytes_Check(args[1]) || !PyBytes_Check(args[2])) {
        PyErr_SetString(PyExc_TypeError, "produce_answer(correlation, head, tail, version, index, "
                                         "base_offset, log_append_time_ms, log_start_offset)");
        return NULL;
    }
    long version = PyLong_AsLong(args[3]);
    long index = PyLong_AsLong(args[4]);
    long long base = PyLong_AsLongLong(args[5]);
    long long lat = PyLong_AsLongLong(args[6]);
    long long lso = PyLong_AsLongLong(args[7]);
    if (PyErr_Occurred()) {
        return NULL;
    }
    Py_ssize_t nc = PyBytes_GET_SIZE(args[0]), nh = PyBytes_GET_SIZE(args[1]),
               nt = PyBytes_GET_SIZE(args[2]);
    /* index, error_code 0, base_offset, log_append_time_ms (v3+); log_start_offset (v5+);
     * empty record_errors and null error_message (v8, classic encoding) */
    Py_ssize_t np = version >= 8 && version < 9 ? 36 : version >= 5 ? 30 : 22;
    PyObject *out = PyBytes_FromStringAndSize(NULL, nc + nh + np + nt);
    if (out == NULL) {
        return NULL;
    }
    unsigned char *o = (unsigned char *)PyBytes_AS_STRING(out);
    memcpy(o, PyBytes_AS_STRING(args[0]), (size_t)nc);
    o += nc;
    memcpy(o, PyBytes_AS_STRING(args[1]), (size_t)nh);
    o += nh;
    put_be32(o, (uint32_t)index);
    o[4] = 0;
    o[5] = 0;
    put_be64(o + 6, (uint64_t)base);
    put_be64(o + 14, (uint64_t)lat);
    if (np >= 30) {
        put_be64(o + 22, (uint64_t)lso);
    }
    if (np == 36) {
        put_be32(o + 30, 0);
        o[34] = 0xFF;
        o[35] = 0xFF;
    }
    memcpy(o + np, PyBytes_AS_STRING(args[2]), (size_t)nt);
    return out;
}

/*
 * fetch_one(frame) -> (api_key, version, correlation_id, client_id, max_wait_ms, min_bytes,
 *                      max_bytes, read_committed, opens_session, name, topic_id, partition,
 *                      current_leader_epoch, fetch_offset, partition_max_bytes) | None
 *
 * api.handlers.fetch_fast._Request's parse of a Fetch frame (no size prefix, versions
 * 4-17) that asks for one partition of one topic (issue 34 round 6): client_id a str or
 * None; name the topic's str (versions below 13) or None, topic_id its 16 bytes (13+) or
 * b"". None for everything else: the Python parse then judges the frame (more partitions,
 * or not for the fast path at all). The same checks in the same order as the Python
 * parse, which stays the reference (tests/api/test_fetch_codec_c.py).
 */
static PyObject *fetch_one(PyObject *module, PyObject *arg) {
    Py_buffer buf;
    (void)module;
    if (PyObject_GetBuffer(arg, &buf, PyBUF_SIMPLE) < 0) {
        return NULL;
    }
    const unsigned char *b = (const unsigned char *)buf.buf;
    Py_ssize_t n = buf.len, pos, name_at = 0, rack_at;
    int api_key, version, client_len, flexible, opens_session = 0;
    int32_t correlation, max_wait, min_bytes, max_bytes, v32, index, epoch = -1, part_max;
    int64_t nlen = 0, rlen, offset;
    PyObject *client = NULL, *name = NULL, *topic_id = NULL;
    if (n < 10) {
        goto none;
    }
    api_key = be16(b);
    version = be16(b + 2);
    correlation = be32(b + 4);
    client_len = be16(b + 8);
    if (version < 4 || version > 17) {
        goto none;
    }
    pos = 10;
    if (client_len >= 0) {
        if (pos + client_len > n) {
            goto none;
        }
        client = PyUnicode_DecodeUTF8((const char *)b + pos, client_len, NULL);
        if (client == NULL) {
            PyErr_Clear();
            goto none;
        }
        pos += client_len;
    } else if (client_len != -1) {
        goto none;
    }
    flexible = version >= 12;
    if (flexible) {
        if (pos >= n || b[pos] != 0) {
            goto none; /* header tagged fields */
        }
        pos += 1;
    }
    if (version < 15) {
        if (pc_i32(b, n, pos, &v32) < 0 || v32 >= 0) {
            goto none; /* a follower's fetch */
        }
        pos += 4;
    }
    if (pos + 13 > n) {
        goto none;
    }
    max_wait = be32(b + pos);
    min_bytes = be32(b + pos + 4);
    max_bytes = be32(b + pos + 8);
    int read_committed = (signed char)b[pos + 12] == 1;
    pos += 13;
    if (version >= 7) {
        int32_t session_id, session_epoch;
        if (pc_i32(b, n, pos, &session_id) < 0 || pc_i32(b, n, pos + 4, &session_epoch) < 0) {
            goto none;
        }
        if (session_id != 0 || (session_epoch != -1 && session_epoch != 0)) {
            goto none; /* an incremental session's request */
        }
        opens_session = session_epoch == 0;
        pos += 8;
    }
    /* one topic */
    if (pc_count(b, n, &pos, flexible) != 1 || pos >= n) {
        goto none;
    }
    if (version >= 13) {
        if (pos + 16 > n) {
            goto none;
        }
        name_at = pos;
        pos += 16;
    } else {
        nlen = pc_strlen(b, n, &pos, flexible);
        if (nlen < 0 || pos + nlen > n) {
            goto none;
        }
        name_at = pos;
        pos += (Py_ssize_t)nlen;
    }
    /* one partition */
    if (pc_count(b, n, &pos, flexible) != 1 || pos >= n) {
        goto none;
    }
    /* partition, current_leader_epoch (9+), fetch_offset, last_fetched_epoch (12+),
     * log_start_offset (5+), partition_max_bytes */
    Py_ssize_t size = 4 + (version >= 9 ? 4 : 0) + 8 + (version >= 12 ? 4 : 0) + (version >= 5 ? 8 : 0) + 4;
    if (pos + size > n) {
        goto none;
    }
    index = be32(b + pos);
    pos += 4;
    if (version >= 9) {
        epoch = be32(b + pos);
        pos += 4;
    }
    offset = be64(b + pos);
    pos += 8 + (version >= 12 ? 4 : 0) + (version >= 5 ? 8 : 0);
    part_max = be32(b + pos);
    pos += 4;
    if (flexible) {
        /* the partition's and the topic's tagged fields, empty */
        if (pos + 2 > n || b[pos] != 0 || b[pos + 1] != 0) {
            goto none;
        }
        pos += 2;
    }
    /* one partition: below broker.fetch_sessions.MIN_CONSUMER_PARTITIONS, so a new session
     * asked for (opens_session) is answered without one, as the Python parse lets it be */
    if (version >= 7 && pc_count(b, n, &pos, flexible) != 0) {
        goto none; /* forgotten topics */
    }
    if (version >= 11) { /* rack_id: read, a UTF-8 string as the Python parse requires */
        rlen = pc_strlen(b, n, &pos, flexible);
        if (rlen < 0 || pos + rlen > n) {
            goto none;
        }
        rack_at = pos;
        pos += (Py_ssize_t)rlen;
        if (rlen > 0) {
            PyObject *rack = PyUnicode_DecodeUTF8((const char *)b + rack_at, (Py_ssize_t)rlen, NULL);
            if (rack == NULL) {
                PyErr_Clear();
                goto none;
            }
            Py_DECREF(rack);
        }
    }
    if (flexible) {
        if (pos >= n || b[pos] != 0) {
            goto none; /* the body's tagged fields (cluster_id, replica_state) */
        }
        pos += 1;
    }
    /* trailing bytes are tolerated, as by the Python parse */
    if (version >= 13) {
        topic_id = PyBytes_FromStringAndSize((const char *)b + name_at, 16);
        name = Py_None;
        Py_INCREF(name);
    } else {
        name = PyUnicode_DecodeUTF8((const char *)b + name_at, (Py_ssize_t)nlen, NULL);
        if (name == NULL) {
            PyErr_Clear();
            goto none;
        }
        topic_id = PyBytes_FromStringAndSize(NULL, 0);
    }
    if (topic_id == NULL) {
        Py_XDECREF(client);
        Py_DECREF(name);
        PyBuffer_Release(&buf);
        return NULL;
    }
    if (client == NULL) {
        client = Py_None;
        Py_INCREF(client);
    }
    PyBuffer_Release(&buf);
    return Py_BuildValue("(iiiNiiiNNNNiiLi)", api_key, version, (int)correlation, client, (int)max_wait,
                         (int)min_bytes, (int)max_bytes, PyBool_FromLong(read_committed),
                         PyBool_FromLong(opens_session), name, topic_id, (int)index, (int)epoch,
                         (long long)offset, (int)part_max);
none:
    Py_XDECREF(client);
    PyBuffer_Release(&buf);
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"walk", walk, METH_VARARGS,
     "walk(data, records_count, last_offset_delta, base_timestamp, require_keys) -> int | list[int]\n\n"
     "The max timestamp of the records, or the indexes of the keyless records when only\n"
     "require_keys fails; InvalidRecord(index, message) for the first bad record."},
    {"scan", scan, METH_VARARGS,
     "scan(data, max_size, log_append_time, require_keys, max_uncompressed) -> list[tuple] | None\n\n"
     "Every batch of a produce payload checked and walked, AppendBatch's fields per batch; None\n"
     "when the Python path must judge it (any error, compression, client LogAppendTime)."},
    {"write_stamped", write_stamped, METH_VARARGS,
     "write_stamped(fd, data, position, size, file_position, base_offset, leader_epoch) -> None\n\n"
     "One batch of data written at file_position with baseOffset and partitionLeaderEpoch\n"
     "replaced (pwritev, short writes continued); OSError on failure."},
    {"crc32c", crc, METH_VARARGS, "crc32c(data) -> int: the CRC-32C scan computes (tests)."},
    {"produce_one", produce_one, METH_O,
     "produce_one(frame) -> (version, acks, timeout_ms, name, index, start, size) | None\n\n"
     "api.handlers.produce_fast.parse of a one-partition Produce frame; None otherwise."},
    {"produce_answer", (PyCFunction)(void (*)(void))produce_answer, METH_FASTCALL,
     "produce_answer(correlation, head, tail, version, index, base_offset, log_append_time_ms,\n"
     "log_start_offset) -> bytes: api.handlers.produce_fast.encode_one's answer."},
    {"fetch_one", fetch_one, METH_O,
     "fetch_one(frame) -> (api_key, version, correlation_id, client_id, max_wait_ms, min_bytes,\n"
     "max_bytes, read_committed, opens_session, name, topic_id, partition, current_leader_epoch,\n"
     "fetch_offset, partition_max_bytes) | None: api.handlers.fetch_fast's parse of a\n"
     "one-partition Fetch frame; None otherwise."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "hot._recordwalk", "The record walk of hot.record_validation, in C.", -1,
    methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__recordwalk(void) {
    crc_table_init();
#ifdef HAVE_SSE42_CRC
    __builtin_cpu_init();
    have_sse42 = __builtin_cpu_supports("sse4.2");
#endif
    PyObject *m = PyModule_Create(&module_def);
    if (m == NULL) {
        return NULL;
    }
    InvalidRecord = PyErr_NewException("hot._recordwalk.InvalidRecord", PyExc_ValueError, NULL);
    if (InvalidRecord == NULL || PyModule_AddObject(m, "InvalidRecord", InvalidRecord) < 0) {
        Py_XDECREF(InvalidRecord);
        Py_DECREF(m);
        return NULL;
    }
    Py_INCREF(InvalidRecord);
    return m;
}
