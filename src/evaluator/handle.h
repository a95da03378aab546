// The hb_evaluator handle: a follower checkpoint handle (what each
// checkpoint restores), the metrics it reports, and how far it has got.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "evaluator/json_log.h"
#include "hb.h"
#include "ps/split_queue.h"
#include "recovery/handle.h"

struct hb_evaluator {
  hb_context *ctx = nullptr;
  // follower = true: restores the tables and buffers added, by name.
  std::unique_ptr<hb_checkpoint> ckpt;
  std::vector<hb::recovery::MetricEntry> metrics;
  std::unique_ptr<hb::evaluator::JsonLog> log;  // rank 0, when configured
  int64_t poll_ms = 200, timeout_ms = 600000;
  hb_evaluator_stats stats = HB_EVALUATOR_STATS_INIT;
  bool restored = false;  // a checkpoint is loaded and not yet reported
  // The open splits of the last restored checkpoint's split queue.
  std::vector<hb::ps::SplitLease> open_splits;
};
