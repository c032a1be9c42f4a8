/* The record decoding of spark.columnar._decode_group in C, for the common case.
 *
 * decode_records(payloads, counts, base_offsets, last_deltas, base_ts, max_ts, log_append,
 *                start_offset, end_offset, out)
 *
 * payloads: a list of buffers, the records of one data batch each (decompressed);
 * counts .. max_ts: contiguous int64 arrays, one element per batch (the batch header's
 * recordsCount, baseOffset, lastOffsetDelta, baseTimestamp, maxTimestamp); log_append: one
 * byte per batch (timestamp type LogAppendTime). Walks every record once and writes the
 * Arrow buffers of the rows with offsets in [start_offset, end_offset) directly, with no
 * Python object per record, into the 9 writable buffers of the list ``out``, sized for n
 * records (the sum of counts) and p payload bytes (their total length):
 *
 *   offsets int64[n], timestamps int64[n] (microseconds), timestamp types int32[n],
 *   key offsets int32[n + 1], key bytes [p], key validity bitmap [(n + 7) / 8],
 *   value offsets int32[n + 1], value bytes [p], value validity bitmap [(n + 7) / 8]
 *
 * and returns (rows, key bytes, key nulls, value bytes, value nulls): what of them holds
 * rows. The caller allocates them from Arrow's memory pool, which keeps freed pages for
 * the next chunk: fresh pages from the system for every chunk cost a page fault each,
 * more than the decoding itself. It returns None, having decided nothing, for anything but
 * well-formed records without headers: a record with headers, a malformed or truncated
 * field, a record or chain that does not end where its length says. The caller then
 * runs the vectorized Python decoder, which decodes headers and raises the reference
 * codec's exact error for damage. So this path only has to be at least as strict as
 * that one (it is stricter: any header sends the whole group there), and give the same
 * rows when it accepts: tests/spark/test_columnar.py compares both on generated input.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#define MIN_RECORD_BODY 6
#define MAX_MS (INT64_MAX / 1000)

/* A zigzag varint of at most 5 bytes (int32) in [p, end): 0 when malformed, running past
 * end, or beyond 32 bits; else the position after it. Checks as spark.columnar._vvarint. */
static inline const uint8_t *varint32(const uint8_t *p, const uint8_t *end, int64_t *out) {
    uint64_t u = 0;
    for (int i = 0; i < 5; i++) {
        if (p >= end)
            return NULL;
        uint8_t b = *p++;
        if (i == 4 && (b & 0x7F) > 0x0F)
            return NULL;
        u |= (uint64_t)(b & 0x7F) << (7 * i);
        if (b < 0x80) {
            *out = (int64_t)(u >> 1) ^ -(int64_t)(u & 1);
            return p;
        }
    }
    return NULL;
}

/* A zigzag varlong of at most 10 bytes (int64), as varint32. */
static inline const uint8_t *varint64(const uint8_t *p, const uint8_t *end, int64_t *out) {
    uint64_t u = 0;
    for (int i = 0; i < 10; i++) {
        if (p >= end)
            return NULL;
        uint8_t b = *p++;
        if (i == 9 && (b & 0x7F) > 0x01)
            return NULL;
        u |= (uint64_t)(b & 0x7F) << (7 * i);
        if (b < 0x80) {
            *out = (int64_t)((u >> 1) ^ (0 - (u & 1)));
            return p;
        }
    }
    return NULL;
}

typedef struct {
    Py_buffer view;
    int held;
} Buf;

static int get_i64(PyObject *obj, Buf *b, Py_ssize_t n, const char *what) {
    if (PyObject_GetBuffer(obj, &b->view, PyBUF_C_CONTIGUOUS) < 0)
        return -1;
    b->held = 1;
    if (b->view.len != n * 8) {
        PyErr_Format(PyExc_ValueError, "%s: %zd bytes for %zd batches", what, b->view.len, n);
        return -1;
    }
    return 0;
}

static void release(Buf *b) {
    if (b->held) {
        PyBuffer_Release(&b->view);
        b->held = 0;
    }
}

static PyObject *decode_records(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 10) {
        PyErr_SetString(PyExc_TypeError, "decode_records takes 10 arguments");
        return NULL;
    }
    PyObject *payloads = args[0];
    if (!PyList_Check(payloads)) {
        PyErr_SetString(PyExc_TypeError, "payloads must be a list");
        return NULL;
    }
    int64_t start_offset = PyLong_AsLongLong(args[7]);
    int64_t end_offset = PyLong_AsLongLong(args[8]);
    if (PyErr_Occurred())
        return NULL;
    Py_ssize_t nb = PyList_GET_SIZE(payloads);
    Buf arr[5];
    Buf la;
    memset(arr, 0, sizeof arr);
    memset(&la, 0, sizeof la);
    Buf *views = PyMem_Calloc(nb ? (size_t)nb : 1, sizeof(Buf));
    PyObject *result = NULL;
    Buf outs[9];
    memset(outs, 0, sizeof outs);
    if (!PyList_Check(args[9]) || PyList_GET_SIZE(args[9]) != 9) {
        PyErr_SetString(PyExc_TypeError, "out must be a list of 9 buffers");
        PyMem_Free(views);
        return NULL;
    }
    if (views == NULL) {
        PyErr_NoMemory();
        return NULL;
    }
    static const char *names[5] = {"counts", "base_offsets", "last_deltas", "base_ts", "max_ts"};
    for (int i = 0; i < 5; i++)
        if (get_i64(args[1 + i], &arr[i], nb, names[i]) < 0)
            goto done;
    if (PyObject_GetBuffer(args[6], &la.view, PyBUF_C_CONTIGUOUS) < 0)
        goto done;
    la.held = 1;
    if (la.view.len != nb) {
        PyErr_SetString(PyExc_ValueError, "log_append: one byte per batch");
        goto done;
    }
    const int64_t *counts = arr[0].view.buf, *base_off = arr[1].view.buf, *last_delta = arr[2].view.buf;
    const int64_t *base_ts = arr[3].view.buf, *max_ts = arr[4].view.buf;
    const uint8_t *log_append = la.view.buf;
    int64_t n = 0, total = 0;
    for (Py_ssize_t i = 0; i < nb; i++) {
        if (PyObject_GetBuffer(PyList_GET_ITEM(payloads, i), &views[i].view, PyBUF_SIMPLE) < 0)
            goto done;
        views[i].held = 1;
        if (counts[i] < 0 || counts[i] > views[i].view.len) { /* a record takes 7 bytes at least */
            result = Py_None;
            Py_INCREF(result);
            goto done;
        }
        n += counts[i];
        total += views[i].view.len;
    }
    if (total > INT32_MAX) {
        PyErr_SetString(PyExc_ValueError, "payloads over 2 GiB: decode in groups");
        goto done;
    }
    size_t bitmap = (size_t)(n + 7) / 8;
    const Py_ssize_t need[9] = {n * 8, n * 8, n * 4, (n + 1) * 4, total, (Py_ssize_t)bitmap,
                                (n + 1) * 4, total, (Py_ssize_t)bitmap};
    for (int i = 0; i < 9; i++) {
        if (PyObject_GetBuffer(PyList_GET_ITEM(args[9], i), &outs[i].view, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS) < 0)
            goto done;
        outs[i].held = 1;
        if (outs[i].view.len < need[i]) {
            PyErr_Format(PyExc_ValueError, "out[%d]: %zd bytes, %zd needed", i, outs[i].view.len, need[i]);
            goto done;
        }
    }
    int64_t *offs = outs[0].view.buf;
    int64_t *tss = outs[1].view.buf;
    int32_t *tts = outs[2].view.buf;
    int32_t *koff = outs[3].view.buf;
    uint8_t *kdata = outs[4].view.buf;
    uint8_t *kvalid = outs[5].view.buf;
    int32_t *voff = outs[6].view.buf;
    uint8_t *vdata = outs[7].view.buf;
    uint8_t *vvalid = outs[8].view.buf;
    memset(kvalid, 0, bitmap);
    memset(vvalid, 0, bitmap);
    int64_t m = 0, kpos = 0, vpos = 0, knull = 0, vnull = 0;
    int bad = 0;
    koff[0] = voff[0] = 0;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t bi = 0; bi < nb && !bad; bi++) {
        const uint8_t *p = views[bi].view.buf;
        const uint8_t *bend = p + views[bi].view.len;
        int la_b = log_append[bi] != 0;
        for (int64_t r = 0; r < counts[bi]; r++) {
            int64_t len, ts_delta, off_delta, klen, vlen, hcount;
            p = varint32(p, bend, &len);
            if (p == NULL || len < MIN_RECORD_BODY || len > bend - p) {
                bad = 1;
                break;
            }
            const uint8_t *e = p + len;
            p++; /* attributes: unused */
            if (!(p = varint64(p, e, &ts_delta)) || !(p = varint32(p, e, &off_delta)) || off_delta < 0 ||
                off_delta > last_delta[bi] || !(p = varint32(p, e, &klen)) || klen < -1 ||
                (klen > 0 && klen > e - p)) {
                bad = 1;
                break;
            }
            const uint8_t *key = p;
            if (klen > 0)
                p += klen;
            if (!(p = varint32(p, e, &vlen)) || vlen < -1 || (vlen > 0 && vlen > e - p)) {
                bad = 1;
                break;
            }
            const uint8_t *value = p;
            if (vlen > 0)
                p += vlen;
            /* headers: only none here (the Python path decodes them) */
            if (!(p = varint32(p, e, &hcount)) || hcount != 0 || p != e) {
                bad = 1;
                break;
            }
            p = e;
            /* numpy's int64 arithmetic wraps: so does this (unsigned) */
            int64_t offset = (int64_t)((uint64_t)base_off[bi] + (uint64_t)off_delta);
            if (offset < start_offset || offset >= end_offset)
                continue;
            int64_t ts = la_b ? max_ts[bi] : (int64_t)((uint64_t)base_ts[bi] + (uint64_t)ts_delta);
            ts = ts < -MAX_MS ? -MAX_MS : (ts > MAX_MS ? MAX_MS : ts);
            offs[m] = offset;
            tss[m] = ts * 1000;
            tts[m] = la_b;
            if (klen >= 0) {
                memcpy(kdata + kpos, key, (size_t)klen);
                kpos += klen;
                kvalid[m >> 3] |= (uint8_t)(1u << (m & 7));
            } else {
                knull++;
            }
            if (vlen >= 0) {
                memcpy(vdata + vpos, value, (size_t)vlen);
                vpos += vlen;
                vvalid[m >> 3] |= (uint8_t)(1u << (m & 7));
            } else {
                vnull++;
            }
            m++;
            koff[m] = (int32_t)kpos;
            voff[m] = (int32_t)vpos;
        }
        if (!bad && p != bend)
            bad = 1;
    }
    Py_END_ALLOW_THREADS
    if (bad) {
        result = Py_None;
        Py_INCREF(result);
        goto done;
    }
    result = Py_BuildValue("(LLLLL)", (long long)m, (long long)kpos, (long long)knull, (long long)vpos,
                           (long long)vnull);
done:
    for (int i = 0; i < 9; i++)
        release(&outs[i]);
    for (Py_ssize_t i = 0; i < nb; i++)
        release(&views[i]);
    PyMem_Free(views);
    for (int i = 0; i < 5; i++)
        release(&arr[i]);
    release(&la);
    return result;
}

static PyMethodDef methods[] = {
    {"decode_records", (PyCFunction)(void (*)(void))decode_records, METH_FASTCALL,
     "Arrow buffers of the rows of header-less records, or None (see the module's source)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "spark._decode", NULL, -1, methods,
                                    NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__decode(void) { return PyModule_Create(&module); }
