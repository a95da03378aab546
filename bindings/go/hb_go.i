/* hb_go.i - Go typemaps for the roles of ../hb.i (package hb/internal/capi,
 * generated with swig -go -cgo -intgosize 64). The public API is the
 * hand-written package hb on top of it.
 *
 * cgo rules shape these typemaps: C may receive Go pointers only to memory
 * without Go pointers, and hb_last_error() must be read in the same C call
 * that failed (consecutive cgo calls may run on different OS threads), so a
 * failing call returns its error text from C ("<code>|<name>|<message>").
 * Buffers, scalar and handle results are unsafe.Pointer / typed pointers to
 * Go memory; lists and strings handed to C live in C memory (hbgo.h). */
%module capi
%rename("%(strip:[hb_])s") "";

%{
#include "hbgo.h"

/* Exported by listener.go. */
extern void goHbListener(uintptr_t handle, int32_t event, char *path);

static void hbgo_listener(hb_context *ctx, int32_t event, const char *path,
                          void *user_data) {
  (void)ctx;
  goHbListener((uintptr_t)user_data, event, (char *)(path ? path : ""));
}
%}

%include <stdint.i>
%include <typemaps.i>  /* first: its OUTPUT typemaps must not replace ours */

/* int32_t is int32 in Go (SWIG's default is int). */
%typemap(gotype) int32_t, const int32_t & "int32"
%typemap(imtype) int32_t, const int32_t & "int32"
%typemap(ctype) int32_t, const int32_t & "int32_t"

/* ---- hb_status: nil, or an *Error built from this call's message ---------- */
%fragment("hbgo_status_text", "header", fragment="AllocateString") %{
static _gostring_ hbgo_status_text(hb_status status) {
  _gostring_ none = {0, 0};
  char head[64];
  const char *message;
  size_t nhead, nmessage;
  _gostring_ text;
  if (status == HB_OK) return none;
  message = hb_last_error();
  nhead = (size_t)snprintf(head, sizeof head, "%d|%s|", (int)status,
                           hb_status_name(status));
  nmessage = strlen(message);
  text.p = (char *)malloc(nhead + nmessage);
  if (!text.p) nmessage = 0;  /* out of memory: the status alone */
  if (!text.p) text.p = (char *)malloc(nhead);
  if (!text.p) return none;
  memcpy(text.p, head, nhead);
  memcpy(text.p + nhead, message, nmessage);
  text.n = (intgo)(nhead + nmessage);
  return text;
}
%}
%typemap(gotype) hb_status "error"
%typemap(imtype) hb_status "string"
%typemap(ctype) hb_status "_gostring_"
%typemap(out, fragment="hbgo_status_text") hb_status %{ $result = hbgo_status_text($1); %}
%typemap(goout, fragment="CopyString") hb_status %{
  if len($1) == 0 {
    $result = nil
  } else {
    $result = newError(swigCopyString($1))
  }
%}

/* hb_status_name's argument is a plain int32. */
%typemap(gotype) hb_status status "int32"
%typemap(imtype) hb_status status "int32"
%typemap(ctype) hb_status status "int32_t"
%typemap(in) hb_status status %{ $1 = (hb_status)$input; %}

/* ---- Handles: uintptr ------------------------------------------------------ */
%typemap(gotype) void *HB_HANDLE "uintptr"
%typemap(imtype) void *HB_HANDLE "uintptr"
%typemap(ctype) void *HB_HANDLE "uintptr_t"
%typemap(in) void *HB_HANDLE %{ $1 = ($1_ltype)$input; %}

/* ---- Pointers into Go memory: results and buffers -------------------------- */
%define HBGO_POINTER(TYPE, GOTYPE)
%typemap(gotype) TYPE "GOTYPE"
%typemap(imtype) TYPE "unsafe.Pointer"
%typemap(ctype) TYPE "void *"
%typemap(goin) TYPE %{ $result = unsafe.Pointer($input) %}
%typemap(in) TYPE %{ $1 = ($1_ltype)$input; %}
%typemap(argout) TYPE ""
%enddef
HBGO_POINTER(void **HB_HANDLE_OUT, *uintptr)
HBGO_POINTER(int32_t *OUTPUT, *int32)
HBGO_POINTER(int64_t *OUTPUT, *int64)
HBGO_POINTER(double *OUTPUT, *float64)
HBGO_POINTER(const void *HB_BUFFER_IN, unsafe.Pointer)
HBGO_POINTER(void *HB_BUFFER_OUT, unsafe.Pointer)
HBGO_POINTER(const float *HB_ARRAY_IN, unsafe.Pointer)
HBGO_POINTER(const int64_t *HB_ARRAY_IN, unsafe.Pointer)
HBGO_POINTER(int32_t *HB_ARRAY_OUT, unsafe.Pointer)
HBGO_POINTER(float *HB_ARRAY_OUT, unsafe.Pointer)

/* ---- Lists staged in C memory by NewBufferList / NewStringList ----------- */
%typemap(gotype) (void *const *HB_BUFS, const size_t *HB_COUNTS, size_t HB_N) "*BufferList"
%typemap(imtype) (void *const *HB_BUFS, const size_t *HB_COUNTS, size_t HB_N) "unsafe.Pointer"
%typemap(ctype) (void *const *HB_BUFS, const size_t *HB_COUNTS, size_t HB_N) "void *"
%typemap(goin) (void *const *HB_BUFS, const size_t *HB_COUNTS, size_t HB_N) %{ $result = $input.c() %}
%typemap(in) (void *const *HB_BUFS, const size_t *HB_COUNTS, size_t HB_N) {
  hbgo_buffers *l = (hbgo_buffers *)$input;
  $1 = ($1_ltype)l->bufs;
  $2 = ($2_ltype)l->counts;
  $3 = l->n;
}

%typemap(gotype) (const char *const *HB_STRINGS, size_t HB_N) "*StringList"
%typemap(imtype) (const char *const *HB_STRINGS, size_t HB_N) "unsafe.Pointer"
%typemap(ctype) (const char *const *HB_STRINGS, size_t HB_N) "void *"
%typemap(goin) (const char *const *HB_STRINGS, size_t HB_N) %{ $result = $input.c() %}
%typemap(in) (const char *const *HB_STRINGS, size_t HB_N) {
  hbgo_strings *l = (hbgo_strings *)$input;
  $1 = ($1_ltype)l->v;
  $2 = l->n;
}

/* ---- String results: written into a Go string as C memory, then copied ---- */
%define HBGO_STRING_OUT(TYPE, FREE)
%typemap(gotype) TYPE "*string"
%typemap(imtype) TYPE "unsafe.Pointer"
%typemap(ctype) TYPE "void *"
%typemap(goin) TYPE %{ $result = unsafe.Pointer($input) %}
%typemap(in) TYPE ($*1_ltype s = NULL) %{ $1 = ($1_ltype)&s; %}
%typemap(argout, fragment="AllocateString") TYPE %{
  if (s$argnum && *s$argnum)
    *(_gostring_ *)$input = Swig_AllocateString(s$argnum, strlen(s$argnum));
%}
%typemap(goargout, fragment="CopyString") TYPE %{
  if len(*$1) > 0 {
    *$1 = swigCopyString(*$1)
  }
%}
%typemap(freearg) TYPE %{ FREE; %}
%enddef
HBGO_STRING_OUT(const char **HB_STATIC_STRING_OUT, (void)0)
HBGO_STRING_OUT(char **HB_STRING_OUT, free(s$argnum))

/* A blob of any bytes: written into a Go string as C memory, then copied
 * (the package turns it into a []byte). */
%typemap(gotype) (void **HB_BYTES_OUT, size_t *HB_BYTES_LEN) "*string"
%typemap(imtype) (void **HB_BYTES_OUT, size_t *HB_BYTES_LEN) "unsafe.Pointer"
%typemap(ctype) (void **HB_BYTES_OUT, size_t *HB_BYTES_LEN) "void *"
%typemap(goin) (void **HB_BYTES_OUT, size_t *HB_BYTES_LEN) %{ $result = unsafe.Pointer($input) %}
%typemap(in) (void **HB_BYTES_OUT, size_t *HB_BYTES_LEN) (void *bytes = NULL, size_t len = 0) %{
  $1 = &bytes;
  $2 = &len;
%}
%typemap(argout, fragment="AllocateString") (void **HB_BYTES_OUT, size_t *HB_BYTES_LEN) %{
  if (bytes$argnum && len$argnum)
    *(_gostring_ *)$input = Swig_AllocateString((const char *)bytes$argnum, len$argnum);
%}
%typemap(goargout, fragment="CopyString") (void **HB_BYTES_OUT, size_t *HB_BYTES_LEN) %{
  if len(*$1) > 0 {
    *$1 = swigCopyString(*$1)
  }
%}
%typemap(freearg) (void **HB_BYTES_OUT, size_t *HB_BYTES_LEN) %{ free(bytes$argnum); %}

/* ---- Listener: a runtime/cgo.Handle of a func(event int32, path string) --- */
%typemap(gotype) (hb_listener_fn HB_FN, void *HB_USER_DATA) "uintptr"
%typemap(imtype) (hb_listener_fn HB_FN, void *HB_USER_DATA) "uintptr"
%typemap(ctype) (hb_listener_fn HB_FN, void *HB_USER_DATA) "uintptr_t"
%typemap(in) (hb_listener_fn HB_FN, void *HB_USER_DATA) %{
  $1 = hbgo_listener;
  $2 = (void *)$input;
%}

%include "hb.i"
