package capi

/*
#define HB_EXPERIMENTAL 1
#include <stdio.h>
#include "hbgo.h"

// A serving lookup's result by value: a pointer to a Go variable for the
// version would escape to the heap on every call.
typedef struct {
  int64_t version;
  int32_t status;
  char *text; // "<code>|<name>|<message>" (malloc'd) when status != HB_OK
} hbgo_lookup_result;

static hbgo_lookup_result hbgo_lookup_version(uintptr_t emb, const int64_t *ids,
                                              size_t n, float *out) {
  hbgo_lookup_result r = {0, HB_OK, NULL};
  r.status = hb_embedding_lookup_version((hb_embedding *)emb, ids, n, out,
                                         &r.version);
  if (r.status != HB_OK) { // the message of this call, on this thread
    const char *msg = hb_last_error();
    const char *name = hb_status_name(r.status);
    size_t len = strlen(msg) + strlen(name) + 32;
    r.text = (char *)malloc(len);
    if (r.text) snprintf(r.text, len, "%d|%s|%s", (int)r.status, name, msg);
  }
  return r;
}
*/
import "C"

import "unsafe"

// LookupVersion is hb_embedding_lookup_version in one cgo call with no
// allocation: ids (n int64) and out (n x dim float32) point to Go memory
// without pointers. It returns the version the rows came from.
func LookupVersion(emb uintptr, ids unsafe.Pointer, n int, out unsafe.Pointer) (int64, error) {
	r := C.hbgo_lookup_version(C.uintptr_t(emb), (*C.int64_t)(ids), C.size_t(n), (*C.float)(out))
	if r.status == C.HB_OK {
		return int64(r.version), nil
	}
	if r.text == nil {
		return 0, &Error{Status: int32(r.status), Name: "HB_ERR_OUT_OF_MEMORY", Message: "no memory for the message"}
	}
	defer C.free(unsafe.Pointer(r.text))
	return 0, newError(C.GoString(r.text))
}
