// The hb_reader handle (internal: a checkpoint restore replaces its Reader).
#pragma once

#include <memory>

#include "reader/reader.h"

struct hb_reader {
  std::unique_ptr<hb::reader::Reader> impl;
};
