// The hb_checkpoint handle: the job's checkpoint directory, what is
// registered, and the save in flight.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "hb.h"

namespace hb {
class Exchange;
namespace recovery {
class PendingSave;

struct Buffer {
  std::string name;
  void *data = nullptr;
  size_t bytes = 0;
  int32_t flags = 0;
};

struct MetricEntry {
  std::string name;
  hb_metric *metric = nullptr;
};
}  // namespace recovery
}  // namespace hb

struct hb_checkpoint {
  hb_checkpoint();
  ~hb_checkpoint();

  hb_context *ctx = nullptr;
  std::string root;  // the job's checkpoint directory
  std::string job;
  int32_t keep = 3;
  bool async_write = false;
  // A follower (src/evaluator) restores a subset of what was saved,
  // matched by name, and never writes into the directory.
  bool follower = false;
  int64_t timeout_ms = 600000;
  std::unique_ptr<hb::Exchange> x;  // agreements (training thread)

  std::vector<hb_embedding *> tables;
  std::vector<hb::recovery::Buffer> buffers;
  std::vector<hb_reader *> readers;
  std::vector<hb::recovery::MetricEntry> metrics;
  std::map<std::string, std::string> meta;

  std::unique_ptr<hb::recovery::PendingSave> pending;
  hb_checkpoint_stats stats = HB_CHECKPOINT_STATS_INIT;
  std::string restored_path;
};
