// How far a reader got: what it has *handed out* in batches (not what its
// threads parsed ahead), so that a restored reader goes on with exactly the
// lines not handed out yet (recovery/, docs/fault-tolerance.md).
#pragma once

#include <cstdint>

namespace hb {
namespace reader {

struct Position {
  // The chunk being consumed: its number in the shard's Sequence.
  int64_t chunk = 0;
  // Some of its lines were handed out: the rest starts at next_byte (plain
  // file: a line start) or after next_line lines of the file (gzip).
  bool partial = false;
  int64_t next_byte = 0;
  int64_t next_line = 0;
  // The epoch of the last block taken from the parsers (-1: none yet): no
  // line of a later epoch was handed out.
  int epoch = -1;
  uint64_t lines = 0, skipped = 0;  // hb_reader_lines / skipped_lines
};

}  // namespace reader
}  // namespace hb
