package capi

/*
#include <stdint.h>
*/
import "C"

import "runtime/cgo"

// goHbListener runs a listener registered with NewListener; hb calls it
// through hbgo_listener (hb_go.i) on the thread of the save or load.
//
//export goHbListener
func goHbListener(handle C.uintptr_t, event C.int32_t, path *C.char) {
	fn := cgo.Handle(handle).Value().(func(int32, string))
	fn(int32(event), C.GoString(path))
}

// NewListener wraps fn for Context_add_listener; Delete the handle once the
// context is destroyed.
func NewListener(fn func(event int32, path string)) cgo.Handle { return cgo.NewHandle(fn) }
