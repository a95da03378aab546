/* hb_python.i - Python typemaps for the roles of ../hb.i (module hb.capi).
 * Buffers use the buffer protocol: a C-contiguous numpy array is passed
 * without a copy; anything else is an hb.HbTypeError or hb.HbValueError
 * (also TypeError / ValueError) naming the parameter. A device array of the
 * Python layer (hb._device.DeviceArray, from __cuda_array_interface__)
 * passes its CUDA pointer, only to the calls whose C side takes device
 * memory (hbpy_device_ok). The GIL is released around every call
 * (swig -threads). */
%module(package="hb", threads="1") capi

%{
#include <Python.h>
#include <stdarg.h>
#include "hb.h"

/* Raises hb.HbError(status, name, message). Called right after the failing
 * call, on the same thread, so hb_last_error is the failure's own text. */
static void hbpy_raise(hb_status status) {
  const char *message = hb_last_error();
  PyObject *mod = PyImport_ImportModule("hb._errors");
  PyObject *cls = mod ? PyObject_GetAttrString(mod, "HbError") : NULL;
  PyObject *exc = cls ? PyObject_CallFunction(cls, "iss", (int)status,
                                              hb_status_name(status), message)
                      : NULL;
  if (exc) PyErr_SetObject(cls, exc);
  Py_XDECREF(exc);
  Py_XDECREF(cls);
  Py_XDECREF(mod);
}

/* Raises hb.HbTypeError / hb.HbValueError / hb.HbDeviceError (cls_name)
 * with a printf-style message (PyUnicode_FromFormat's formats); falls back
 * to the builtin TypeError / ValueError if hb._errors cannot be imported. */
static void hbpy_arg_error(const char *cls_name, const char *fmt, ...) {
  va_list ap;
  PyObject *msg, *mod, *cls = NULL, *exc = NULL;
  PyErr_Clear();  /* a pending error (a failed GetBuffer ...) is replaced */
  va_start(ap, fmt);
  msg = PyUnicode_FromFormatV(fmt, ap);
  va_end(ap);
  if (!msg) return;
  mod = PyImport_ImportModule("hb._errors");
  if (mod) cls = PyObject_GetAttrString(mod, cls_name);
  if (cls) exc = PyObject_CallFunctionObjArgs(cls, msg, NULL);
  if (exc) {
    PyErr_SetObject(cls, exc);
  } else {
    PyErr_Clear();
    PyErr_SetObject(strcmp(cls_name, "HbValueError") == 0 ? PyExc_ValueError
                                                           : PyExc_TypeError,
                    msg);
  }
  Py_XDECREF(exc);
  Py_XDECREF(cls);
  Py_XDECREF(mod);
  Py_DECREF(msg);
}

/* The calls and the parameters of each whose C side takes CUDA device
 * memory: the collectives, the ids / rows of an embedding table and the
 * batch / rows of a collection (GPU tables need them; host ones are refused
 * by the Python layer). hb.i's flat hb_collection_lookup / _apply_gradients
 * read offsets on the host to split the unpooled rows, so only the
 * hbpy_collection_* wrappers below (the split passed in host memory) take
 * device arrays. Any other call would read a device pointer on the host, so
 * it never gets one. */
static int hbpy_device_ok(const char *fn, const char *param) {
  static const char *const calls[][2] = {
      {"hb_allreduce", " send recv "},
      {"hb_allgather", " send recv "},
      {"hb_allgatherv", " send recv "},
      {"hb_alltoall", " send recv "},
      {"hb_alltoallv", " send recv "},
      {"hb_broadcast", " send recv "},
      {"hb_reduce_scatter", " send recv "},
      {"hb_allreduce_many", " bufs "},
      {"hb_embedding_lookup", " ids out "},
      {"hb_embedding_lookup_version", " ids out "},
      {"hb_embedding_apply_gradients", " ids grads "},
      {"hbpy_collection_lookup", " values offsets weights out unpooled "},
      {"hbpy_collection_apply_gradients",
       " values offsets weights grad_out grad_unpooled "},
      {"hbpy_collection_lookup_start", " values offsets weights out unpooled "},
      {NULL, NULL}};
  char word[40];
  size_t i;
  if (strlen(param) + 3 > sizeof word) return 0;
  PyOS_snprintf(word, sizeof word, " %s ", param);
  for (i = 0; calls[i][0]; ++i)
    if (strcmp(fn, calls[i][0]) == 0) return strstr(calls[i][1], word) != NULL;
  return 0;
}

/* 1 and *ptr set when obj is a device array of hb's Python layer
 * (hb._DeviceArray: built from __cuda_array_interface__ and checked there,
 * it carries _hb_device_ptr and size); 0 when it is not one; -1 with an
 * HbDeviceError when fn does not take device memory. */
static int hbpy_device(PyObject *obj, const char *fn, const char *param,
                       void **ptr, size_t *count) {
  PyObject *p, *n = NULL;
  if (PyObject_CheckBuffer(obj)) return 0; /* numpy: the common case, fast */
  p = PyObject_GetAttrString(obj, "_hb_device_ptr");
  if (!p) {
    PyErr_Clear();
    return 0;
  }
  if (!hbpy_device_ok(fn, param)) {
    Py_DECREF(p);
    hbpy_arg_error("HbDeviceError",
                   "%s: CUDA device memory, but %s takes host memory only "
                   "(pass a numpy array)", param, fn);
    return -1;
  }
  *ptr = PyLong_AsVoidPtr(p);
  Py_DECREF(p);
  if (!PyErr_Occurred() && count) {
    n = PyObject_GetAttrString(obj, "size");
    *count = n ? (size_t)PyLong_AsSize_t(n) : 0;
    Py_XDECREF(n);
  }
  return PyErr_Occurred() ? -1 : 1;
}

/* kind: 'f' float, 'i' signed, 'u' unsigned, 0 any; itemsize 0: any. */
static int hbpy_get_buffer(PyObject *obj, Py_buffer *view, int writable,
                           char kind, size_t itemsize, const char *param) {
  int flags = PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | (writable ? PyBUF_WRITABLE : 0);
  if (!PyObject_CheckBuffer(obj)) {
    if (PyObject_HasAttrString(obj, "__cuda_array_interface__"))
      hbpy_arg_error("HbDeviceError", "%s: a CUDA array (%s) reaches hb.capi "
                     "unchecked: pass it to hb's Python API (hb.Context, "
                     "hb.Embedding), which checks it", param,
                     Py_TYPE(obj)->tp_name);
    else
      hbpy_arg_error("HbTypeError", "%s: expected a numpy array, got %s", param,
                     Py_TYPE(obj)->tp_name);
    return -1;
  }
  if (PyObject_GetBuffer(obj, view, flags) < 0) {
    PyErr_Clear();
    if (writable && PyObject_GetBuffer(obj, view, PyBUF_C_CONTIGUOUS) == 0) {
      PyBuffer_Release(view);
      hbpy_arg_error("HbValueError", "%s: the array is read-only", param);
    } else {
      hbpy_arg_error("HbValueError", "%s: the array is not C-contiguous (pass np.ascontiguousarray(x))", param);
    }
    return -1;
  }
  if (kind || itemsize) {
    const char *f = view->format ? view->format : "B";
    char c;
    char got;
    if (*f == '<' || *f == '=' || *f == '@') ++f;
    c = *f;
    got = strchr("efd", c) && c ? 'f' : strchr("bhilq", c) && c ? 'i'
        : strchr("BHILQ", c) && c ? 'u' : '?';
    if ((kind && got != kind) || (itemsize && (size_t)view->itemsize != itemsize)) {
      hbpy_arg_error("HbTypeError", "%s: expected %s%d elements, got format '%s'",
                   param, kind == 'f' ? "float" : kind == 'u' ? "uint" : "int",
                   (int)(itemsize * 8), view->format ? view->format : "B");
      PyBuffer_Release(view);
      return -1;
    }
  }
  return 0;
}

static void hbpy_listener(hb_context *ctx, int32_t event, const char *path,
                          void *user_data) {
  PyGILState_STATE gil = PyGILState_Ensure();
  PyObject *r = PyObject_CallFunction((PyObject *)user_data, "is", (int)event,
                                      path ? path : "");
  (void)ctx;
  if (r) {
    Py_DECREF(r);
  } else {
    PyErr_WriteUnraisable((PyObject *)user_data);  /* cannot cross C */
  }
  PyGILState_Release(gil);
}
%}

/* ---- hb_status ----------------------------------------------------------- */
%typemap(out) hb_status {
  if ($1 != HB_OK) {
    hbpy_raise($1);
    SWIG_fail;
  }
  $result = SWIG_Py_Void();
}

/* ---- Handles: integers (0 / None is NULL) -------------------------------- */
%typemap(in) void *HB_HANDLE {
  if ($input == Py_None) {
    $1 = NULL;
  } else {
    $1 = ($1_ltype)PyLong_AsVoidPtr($input);
    if (PyErr_Occurred()) SWIG_fail;
  }
}
%typemap(in, numinputs=0) void **HB_HANDLE_OUT ($*1_ltype handle = NULL) {
  $1 = &handle;
}
%typemap(argout) void **HB_HANDLE_OUT {
  $result = SWIG_Python_AppendOutput($result, PyLong_FromVoidPtr(handle$argnum));
}

/* ---- Buffers -------------------------------------------------------------- */
%define HBPY_BUFFER(TYPE, WRITABLE, KIND, ITEMSIZE)
%typemap(in) TYPE (Py_buffer view, int have_view = 0, void *dptr = NULL, int dev = 0) {
  if ($input == Py_None) {
    $1 = NULL;
  } else if ((dev = hbpy_device($input, "$symname", "$1_name", &dptr, NULL)) != 0) {
    if (dev < 0) SWIG_fail;
    $1 = ($1_ltype)dptr;
  } else {
    if (hbpy_get_buffer($input, &view, WRITABLE, KIND, ITEMSIZE, "$1_name") < 0)
      SWIG_fail;
    have_view = 1;
    $1 = ($1_ltype)view.buf;
  }
}
%typemap(freearg) TYPE {
  if (have_view$argnum) PyBuffer_Release(&view$argnum);
}
%enddef
HBPY_BUFFER(const void *HB_BUFFER_IN, 0, 0, 0)
HBPY_BUFFER(void *HB_BUFFER_OUT, 1, 0, 0)
HBPY_BUFFER(const float *HB_ARRAY_IN, 0, 'f', sizeof(float))
HBPY_BUFFER(const int64_t *HB_ARRAY_IN, 0, 'i', sizeof(int64_t))
HBPY_BUFFER(int32_t *HB_ARRAY_OUT, 1, 'i', sizeof(int32_t))
HBPY_BUFFER(float *HB_ARRAY_OUT, 1, 'f', sizeof(float))

/* A list of writable arrays; each count is its length in elements. */
%typemap(in) (void *const *HB_BUFS, const size_t *HB_COUNTS, size_t HB_N)
    (PyObject *seq = NULL, Py_buffer *views = NULL, Py_ssize_t nviews = 0) {
  Py_ssize_t i, n;
  seq = PySequence_Fast($input, "bufs");
  if (!seq) {
    hbpy_arg_error("HbTypeError", "bufs: expected a list of numpy arrays, got %s",
                   Py_TYPE($input)->tp_name);
    SWIG_fail;
  }
  n = PySequence_Fast_GET_SIZE(seq);
  views = (Py_buffer *)calloc((size_t)n + 1, sizeof(Py_buffer));
  $1 = (void **)calloc((size_t)n + 1, sizeof(void *));
  $2 = (size_t *)calloc((size_t)n + 1, sizeof(size_t));
  if (!views || !$1 || !$2) {
    PyErr_NoMemory();
    SWIG_fail;
  }
  for (i = 0; i < n; ++i) {
    char param[32];
    void *dptr = NULL;
    int dev = hbpy_device(PySequence_Fast_GET_ITEM(seq, i), "$symname", "bufs",
                          &dptr, &$2[i]);
    if (dev < 0) SWIG_fail;
    if (dev) {
      $1[i] = dptr;
      continue;
    }
    PyOS_snprintf(param, sizeof param, "bufs[%zd]", i);
    if (hbpy_get_buffer(PySequence_Fast_GET_ITEM(seq, i), &views[i], 1, 0, 0,
                        param) < 0)
      SWIG_fail;
    nviews = i + 1;
    $1[i] = views[i].buf;
    $2[i] = (size_t)(views[i].len / (views[i].itemsize ? views[i].itemsize : 1));
  }
  $3 = (size_t)n;
}
%typemap(freearg) (void *const *HB_BUFS, const size_t *HB_COUNTS, size_t HB_N) {
  Py_ssize_t i;
  for (i = 0; i < nviews$argnum; ++i) PyBuffer_Release(&views$argnum[i]);
  free(views$argnum);
  free((void *)$1);
  free((void *)$2);
  Py_XDECREF(seq$argnum);
}

/* ---- Strings -------------------------------------------------------------- */
%typemap(in) (const char *const *HB_STRINGS, size_t HB_N)
    (PyObject *seq = NULL, const char **strings = NULL) {
  Py_ssize_t i, n;
  seq = PySequence_Fast($input, "$1_name");
  if (!seq) {
    hbpy_arg_error("HbTypeError", "$1_name: expected a list of str, got %s",
                   Py_TYPE($input)->tp_name);
    SWIG_fail;
  }
  n = PySequence_Fast_GET_SIZE(seq);
  strings = (const char **)calloc((size_t)n + 1, sizeof(char *));
  $1 = ($1_ltype)strings;
  if (!strings) {
    PyErr_NoMemory();
    SWIG_fail;
  }
  for (i = 0; i < n; ++i) {
    PyObject *item = PySequence_Fast_GET_ITEM(seq, i);
    if (!PyUnicode_Check(item)) {
      hbpy_arg_error("HbTypeError", "$1_name[%zd]: expected str, got %s", i,
                   Py_TYPE(item)->tp_name);
      SWIG_fail;
    }
    strings[i] = PyUnicode_AsUTF8(item);
    if (!strings[i]) SWIG_fail;
  }
  $2 = (size_t)n;
}
%typemap(freearg) (const char *const *HB_STRINGS, size_t HB_N) {
  free((void *)$1);
  Py_XDECREF(seq$argnum);
}

%typemap(in, numinputs=0) const char **HB_STATIC_STRING_OUT (const char *s = NULL) {
  $1 = ($1_ltype)&s;
}
%typemap(argout) const char **HB_STATIC_STRING_OUT {
  $result = SWIG_Python_AppendOutput($result,
      s$argnum ? PyUnicode_FromString(s$argnum) : SWIG_Py_Void());
}

%typemap(in, numinputs=0) char **HB_STRING_OUT (char *s = NULL) { $1 = &s; }
%typemap(argout) char **HB_STRING_OUT {
  $result = SWIG_Python_AppendOutput($result,
      s$argnum ? PyUnicode_FromString(s$argnum) : SWIG_Py_Void());
}
%typemap(freearg) char **HB_STRING_OUT { free(s$argnum); }

/* A blob of any bytes: a bytes object. */
%typemap(in, numinputs=0) (void **HB_BYTES_OUT, size_t *HB_BYTES_LEN)
    (void *bytes = NULL, size_t len = 0) {
  $1 = &bytes;
  $2 = &len;
}
%typemap(argout) (void **HB_BYTES_OUT, size_t *HB_BYTES_LEN) {
  PyObject *b = PyBytes_FromStringAndSize(bytes$argnum ? (const char *)bytes$argnum : "",
                                          (Py_ssize_t)len$argnum);
  if (!b) SWIG_fail;
  $result = SWIG_Python_AppendOutput($result, b);
}
%typemap(freearg) (void **HB_BYTES_OUT, size_t *HB_BYTES_LEN) { free(bytes$argnum); }

/* ---- Listener: any callable(event, path); the caller keeps it alive ------- */
%typemap(in) (hb_listener_fn HB_FN, void *HB_USER_DATA) {
  if (!PyCallable_Check($input)) {
    hbpy_arg_error("HbTypeError", "fn: expected a callable, got %s",
                 Py_TYPE($input)->tp_name);
    SWIG_fail;
  }
  $1 = hbpy_listener;
  $2 = (void *)$input;
}

%include "hb.i"

/* ---- Collections of the Python layer -------------------------------------- */
/* hb.i's flat collection calls, with the unpooled rows split by the caller:
 * row_starts (host, num_features int64) holds feature f's first element in
 * unpooled / grad_unpooled, -1 for a pooled feature; NULL when there are no
 * rows. The wrapper then reads no array on the host, so the batch and the
 * rows may be CUDA arrays (a collection of GPU tables; hb.Collection checks
 * which, and the library refuses the other kind too). */
%apply const int64_t *HB_ARRAY_IN { const int64_t *row_starts };
%{
static void hbpy_split_rows(hbw_flat *f, const hb_collection *coll,
                            float *rows, const int64_t *row_starts) {
  size_t i, n = hb_collection_num_features(coll);
  for (i = 0; rows && row_starts && i < n; ++i)
    if (row_starts[i] >= 0) f->rows[i] = rows + row_starts[i];
}
%}
%inline %{
static hb_status hbpy_collection_lookup(hb_collection *coll, int64_t batch,
                                        const int64_t *values,
                                        const int64_t *offsets,
                                        const float *weights, void *out,
                                        void *unpooled,
                                        const int64_t *row_starts) {
  hbw_flat f;
  hb_status s = hbw_flat_init(&f, coll, batch, values, offsets, weights, NULL);
  if (s == HB_OK) {
    hbpy_split_rows(&f, coll, (float *)unpooled, row_starts);
    s = hb_collection_lookup(coll, &f.b, (float *)out, f.rows);
  }
  hbw_flat_free(&f);
  return s;
}
/* hbpy_collection_apply_gradients and the dense sum of
 * hb_collection_apply_gradients_dense (host arrays: dense_send, dense_recv
 * are not in hbpy_device_ok's list). */
static hb_status hbpy_collection_apply_gradients_dense(
    hb_collection *coll, int64_t batch, const int64_t *values,
    const int64_t *offsets, const float *weights, const float *grad_out,
    const float *grad_unpooled, const int64_t *row_starts,
    const float *dense_send, void *dense_recv, size_t dense_count) {
  hbw_flat f;
  hb_collection_dense d = HB_COLLECTION_DENSE_INIT;
  hb_status s = hbw_flat_init(&f, coll, batch, values, offsets, weights, NULL);
  d.send = dense_send;
  d.recv = (float *)dense_recv;
  d.count = dense_count;
  if (s == HB_OK) {
    hbpy_split_rows(&f, coll, (float *)grad_unpooled, row_starts);
    s = hb_collection_apply_gradients_dense(
        coll, &f.b, grad_out, (const float *const *)f.rows,
        dense_send || dense_recv || dense_count ? &d : NULL);
  }
  hbw_flat_free(&f);
  return s;
}
static hb_status hbpy_collection_apply_gradients(
    hb_collection *coll, int64_t batch, const int64_t *values,
    const int64_t *offsets, const float *weights, const float *grad_out,
    const float *grad_unpooled, const int64_t *row_starts) {
  return hbpy_collection_apply_gradients_dense(coll, batch, values, offsets,
                                               weights, grad_out, grad_unpooled,
                                               row_starts, NULL, NULL, 0);
}
%}

/* The pipelined lookup (hb_collection_lookup_start / _wait). libhb reads
 * the batch's per-feature pointer arrays until the wait, so the start keeps
 * its flat batch on the heap and hands it to Python as an opaque int64
 * (pending); the wait frees it whatever its result, as does
 * hbpy_collection_pending_free when the collection is closed with a lookup
 * still started (destroy first: it drops the lookup). A failed start frees
 * it at once (libhb leaves nothing pending). The Python layer keeps the
 * numpy arrays themselves alive until then. */
%apply int64_t *OUTPUT { int64_t *pending };
%inline %{
static hb_status hbpy_collection_lookup_start(
    hb_collection *coll, int64_t batch, const int64_t *values,
    const int64_t *offsets, const float *weights, void *out, void *unpooled,
    const int64_t *row_starts, int64_t *pending) {
  hbw_flat *f = (hbw_flat *)calloc(1, sizeof *f);
  hb_status s = f ? hbw_flat_init(f, coll, batch, values, offsets, weights,
                                  NULL)
                  : HB_ERR_OUT_OF_MEMORY;
  *pending = 0;
  if (s == HB_OK) {
    hbpy_split_rows(f, coll, (float *)unpooled, row_starts);
    s = hb_collection_lookup_start(coll, &f->b, (float *)out, f->rows);
  }
  if (s == HB_OK) {
    *pending = (int64_t)(intptr_t)f;
  } else if (f) {
    hbw_flat_free(f);
    free(f);
  }
  return s;
}
static void hbpy_collection_pending_free(int64_t pending) {
  hbw_flat *f = (hbw_flat *)(intptr_t)pending;
  if (f) hbw_flat_free(f);
  free(f);
}
static hb_status hbpy_collection_lookup_wait(hb_collection *coll,
                                             int64_t pending) {
  hb_status s = hb_collection_lookup_wait(coll);
  hbpy_collection_pending_free(pending);
  return s;
}
%}
