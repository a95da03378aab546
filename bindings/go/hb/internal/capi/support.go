// Package capi is the SWIG-generated low-level binding of hb.h (capi.go,
// hb_go_wrap.c: generated at build time) plus the helpers its typemaps use.
// Use package hb instead.
package capi

/*
#include "hbgo.h"
*/
import "C"

import (
	"strconv"
	"strings"
	"unsafe"
)

// Error is a failed hb call: the hb_status, its name (e.g. "HB_ERR_TIMEOUT")
// and hb_last_error() of that same call.
type Error struct {
	Status  int32
	Name    string
	Message string
}

func (e *Error) Error() string { return e.Name + ": " + e.Message }

// newError parses the "<code>|<name>|<message>" text the C typemap built.
func newError(text string) error {
	parts := strings.SplitN(text, "|", 3)
	if len(parts) != 3 {
		return &Error{Status: int32(HB_ERR_INTERNAL), Name: "HB_ERR_INTERNAL", Message: "malformed error text: " + text}
	}
	code, err := strconv.Atoi(parts[0])
	if err != nil {
		code = int(HB_ERR_INTERNAL)
	}
	return &Error{Status: int32(code), Name: parts[1], Message: parts[2]}
}

// BufferList is a list of buffers in C memory, for hb_allreduce_many: cgo
// forbids handing C a list of Go pointers.
type BufferList struct{ l *C.hbgo_buffers }

// NewBufferList allocates len(counts) zeroed buffers of counts[i] elements of
// elemSize bytes. Free it.
func NewBufferList(counts []int, elemSize int) *BufferList {
	n := len(counts)
	l := (*C.hbgo_buffers)(C.calloc(1, C.size_t(unsafe.Sizeof(C.hbgo_buffers{}))))
	l.bufs = (*unsafe.Pointer)(C.calloc(C.size_t(n+1), C.size_t(unsafe.Sizeof(unsafe.Pointer(nil)))))
	l.counts = (*C.size_t)(C.calloc(C.size_t(n+1), C.size_t(unsafe.Sizeof(C.size_t(0)))))
	l.n = C.size_t(n)
	bufs := unsafe.Slice(l.bufs, n+1)
	sizes := unsafe.Slice(l.counts, n+1)
	for i, c := range counts {
		bufs[i] = C.calloc(C.size_t(c+1), C.size_t(elemSize))
		sizes[i] = C.size_t(c)
	}
	return &BufferList{l}
}

// Data is the start of buffer i.
func (b *BufferList) Data(i int) unsafe.Pointer { return unsafe.Slice(b.l.bufs, int(b.l.n))[i] }

func (b *BufferList) c() unsafe.Pointer { return unsafe.Pointer(b.l) }

// Free releases the C memory.
func (b *BufferList) Free() {
	if b.l == nil {
		return
	}
	for _, p := range unsafe.Slice(b.l.bufs, int(b.l.n)) {
		C.free(p)
	}
	C.free(unsafe.Pointer(b.l.bufs))
	C.free(unsafe.Pointer(b.l.counts))
	C.free(unsafe.Pointer(b.l))
	b.l = nil
}

// StringList is a list of C strings, for hb_tf_config_build. Free it.
type StringList struct{ l *C.hbgo_strings }

// NewStringList copies list into C memory.
func NewStringList(list []string) *StringList {
	l := (*C.hbgo_strings)(C.calloc(1, C.size_t(unsafe.Sizeof(C.hbgo_strings{}))))
	l.v = (**C.char)(C.calloc(C.size_t(len(list)+1), C.size_t(unsafe.Sizeof((*C.char)(nil)))))
	l.n = C.size_t(len(list))
	v := unsafe.Slice(l.v, len(list)+1)
	for i, s := range list {
		v[i] = C.CString(s)
	}
	return &StringList{l}
}

func (s *StringList) c() unsafe.Pointer { return unsafe.Pointer(s.l) }

// Free releases the C memory.
func (s *StringList) Free() {
	if s.l == nil {
		return
	}
	for _, p := range unsafe.Slice(s.l.v, int(s.l.n)) {
		C.free(unsafe.Pointer(p))
	}
	C.free(unsafe.Pointer(s.l.v))
	C.free(unsafe.Pointer(s.l))
	s.l = nil
}
