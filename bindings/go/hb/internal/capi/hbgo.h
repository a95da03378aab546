/* C-side shapes shared by the SWIG wrapper and the hand-written cgo files. */
#ifndef HBGO_H
#define HBGO_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "hb.h"

/* A list of buffers in C memory (cgo forbids Go pointers in C memory). */
typedef struct {
  void **bufs;
  size_t *counts;
  size_t n;
} hbgo_buffers;

/* A list of NUL-terminated strings in C memory. */
typedef struct {
  char **v;
  size_t n;
} hbgo_strings;

#endif
