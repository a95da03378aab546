// The hb_reader handle (internal: a checkpoint restore replaces its Reader).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "reader/reader.h"

struct hb_reader {
  std::unique_ptr<hb::reader::Reader> impl;
  // Reading a dynamic split (hb_reader_seek_split): its end, in the bytes
  // of the files laid end to end, and each file's offset there.
  bool split = false;
  int64_t split_end = 0;
  std::vector<int64_t> file_start;
};
