/* hot._syncer: fdatasync on a thread of its own that never takes the GIL (issue 34 §2).
 *
 * A Syncer owns one POSIX thread. ``submit(token, fd)`` queues an fdatasync of ``fd``
 * (the caller keeps ``fd`` open until the token comes back); the thread takes every
 * queued job at once, fdatasyncs each, moves them to the done list and then writes 1 to
 * ``wake_fd`` (an eventfd the event loop watches): one wake-up per round, however many
 * logs it covered. ``take()`` returns the done jobs as (token, errno) pairs, errno 0 for
 * success. ``drain()`` waits (without the GIL) until nothing is queued or running;
 * ``close()`` drains, stops and joins the thread. The thread touches no Python object,
 * so the event loop never hands the GIL to it, which is the point: the Python committer
 * thread it replaces took the GIL several times per flush (the ping-pong).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct {
    long long token;
    int fd;
    int err;
} Job;

typedef struct {
    Job *items;
    Py_ssize_t n, cap;
} Jobs;

typedef struct {
    PyObject_HEAD
    pthread_t thread;
    int started;
    int closing;
    int busy;
    int wake_fd;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    Jobs pending;
    Jobs done;
} Syncer;

static int jobs_push(Jobs *j, Job job) {
    if (j->n == j->cap) {
        Py_ssize_t cap = j->cap ? j->cap * 2 : 16;
        Job *items = realloc(j->items, (size_t)cap * sizeof(Job));
        if (items == NULL)
            return -1;
        j->items = items;
        j->cap = cap;
    }
    j->items[j->n++] = job;
    return 0;
}

static void *syncer_run(void *arg) {
    Syncer *s = (Syncer *)arg;
    Jobs work = {NULL, 0, 0};
    pthread_mutex_lock(&s->mu);
    for (;;) {
        while (s->pending.n == 0 && !s->closing)
            pthread_cond_wait(&s->cv, &s->mu);
        if (s->pending.n == 0)
            break; /* closing, nothing left */
        Jobs taken = s->pending; /* swap: the loop keeps queueing into the spare buffer */
        s->pending = work;
        s->pending.n = 0;
        work = taken;
        s->busy = 1;
        pthread_mutex_unlock(&s->mu);
        for (Py_ssize_t i = 0; i < work.n; i++) {
            int r;
            do {
                r = fdatasync(work.items[i].fd);
            } while (r != 0 && errno == EINTR);
            work.items[i].err = r == 0 ? 0 : errno;
        }
        pthread_mutex_lock(&s->mu);
        for (Py_ssize_t i = 0; i < work.n; i++) {
            if (jobs_push(&s->done, work.items[i]) != 0)
                abort(); /* out of memory with durability at stake: no silent loss */
        }
        work.n = 0;
        s->busy = 0;
        pthread_cond_broadcast(&s->cv);
        pthread_mutex_unlock(&s->mu);
        uint64_t one = 1;
        ssize_t w;
        do {
            w = write(s->wake_fd, &one, sizeof one);
        } while (w < 0 && errno == EINTR);
        /* EAGAIN: the eventfd's counter is saturated, the loop is woken anyway. */
        pthread_mutex_lock(&s->mu);
    }
    s->busy = 0;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    free(work.items);
    return NULL;
}

static int Syncer_init(Syncer *s, PyObject *args, PyObject *kw) {
    static char *names[] = {"wake_fd", NULL};
    int fd;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "i", names, &fd))
        return -1;
    if (s->started) {
        PyErr_SetString(PyExc_RuntimeError, "Syncer already started");
        return -1;
    }
    s->wake_fd = fd;
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    int err = pthread_create(&s->thread, NULL, syncer_run, s);
    if (err != 0) {
        errno = err;
        PyErr_SetFromErrno(PyExc_OSError);
        return -1;
    }
    s->started = 1;
    return 0;
}

static PyObject *Syncer_submit(Syncer *s, PyObject *args) {
    long long token;
    int fd;
    if (!PyArg_ParseTuple(args, "Li", &token, &fd))
        return NULL;
    if (!s->started) {
        PyErr_SetString(PyExc_RuntimeError, "Syncer not running");
        return NULL;
    }
    Job job = {token, fd, 0};
    pthread_mutex_lock(&s->mu);
    int bad = s->closing ? 1 : jobs_push(&s->pending, job) != 0 ? 2 : 0;
    if (!bad)
        pthread_cond_signal(&s->cv);
    pthread_mutex_unlock(&s->mu);
    if (bad == 1) {
        PyErr_SetString(PyExc_RuntimeError, "Syncer closed");
        return NULL;
    }
    if (bad == 2)
        return PyErr_NoMemory();
    Py_RETURN_NONE;
}

static PyObject *Syncer_take(Syncer *s, PyObject *Py_UNUSED(ignored)) {
    Jobs got = {NULL, 0, 0};
    if (s->started) {
        pthread_mutex_lock(&s->mu);
        got = s->done;
        s->done.items = NULL;
        s->done.n = s->done.cap = 0;
        pthread_mutex_unlock(&s->mu);
    }
    PyObject *out = PyList_New(got.n);
    if (out == NULL) {
        free(got.items);
        return NULL;
    }
    for (Py_ssize_t i = 0; i < got.n; i++) {
        PyObject *pair = Py_BuildValue("(Li)", got.items[i].token, got.items[i].err);
        if (pair == NULL) {
            Py_DECREF(out);
            free(got.items);
            return NULL;
        }
        PyList_SET_ITEM(out, i, pair);
    }
    free(got.items);
    return out;
}

static void syncer_wait_idle(Syncer *s) {
    pthread_mutex_lock(&s->mu);
    while (s->pending.n > 0 || s->busy)
        pthread_cond_wait(&s->cv, &s->mu);
    pthread_mutex_unlock(&s->mu);
}

static PyObject *Syncer_drain(Syncer *s, PyObject *Py_UNUSED(ignored)) {
    if (s->started) {
        Py_BEGIN_ALLOW_THREADS
        syncer_wait_idle(s);
        Py_END_ALLOW_THREADS
    }
    Py_RETURN_NONE;
}

static void syncer_stop(Syncer *s) {
    pthread_mutex_lock(&s->mu);
    s->closing = 1;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    pthread_join(s->thread, NULL);
    s->started = 0;
}

static PyObject *Syncer_close(Syncer *s, PyObject *Py_UNUSED(ignored)) {
    if (s->started) {
        Py_BEGIN_ALLOW_THREADS
        syncer_stop(s); /* the thread finishes what is queued first */
        Py_END_ALLOW_THREADS
    }
    Py_RETURN_NONE;
}

static void Syncer_dealloc(Syncer *s) {
    if (s->started) {
        Py_BEGIN_ALLOW_THREADS
        syncer_stop(s);
        Py_END_ALLOW_THREADS
    }
    free(s->pending.items);
    free(s->done.items);
    Py_TYPE(s)->tp_free((PyObject *)s);
}

static PyMethodDef Syncer_methods[] = {
    {"submit", (PyCFunction)Syncer_submit, METH_VARARGS, "submit(token, fd): queue an fdatasync of fd"},
    {"take", (PyCFunction)Syncer_take, METH_NOARGS, "take() -> [(token, errno)] of the finished jobs"},
    {"drain", (PyCFunction)Syncer_drain, METH_NOARGS, "drain(): wait until nothing is queued or running"},
    {"close", (PyCFunction)Syncer_close, METH_NOARGS, "close(): finish what is queued, stop the thread"},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject SyncerType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "hot._syncer.Syncer",
    .tp_basicsize = sizeof(Syncer),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "fdatasync on a thread of its own, one eventfd wake-up per round",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Syncer_init,
    .tp_dealloc = (destructor)Syncer_dealloc,
    .tp_methods = Syncer_methods,
};

static struct PyModuleDef syncer_module = {
    PyModuleDef_HEAD_INIT, "hot._syncer", "fdatasync off the GIL (see hot.loop_flush)", -1, NULL, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__syncer(void) {
    if (PyType_Ready(&SyncerType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&syncer_module);
    if (m == NULL)
        return NULL;
    Py_INCREF(&SyncerType);
    if (PyModule_AddObject(m, "Syncer", (PyObject *)&SyncerType) < 0) {
        Py_DECREF(&SyncerType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
