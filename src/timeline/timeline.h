// Where a step's time goes: with the option `timeline` (HB_TIMELINE=path)
// every rank records what hb does -- each collective, metric merge, data
// sync and embedding phase -- as Chrome-trace "complete" events and writes
// them to its own JSON file, to open in https://ui.perfetto.dev or
// chrome://tracing (as Horovod's HOROVOD_TIMELINE, but one file per rank).
//
// Files: "<path>" with the rank inserted before a ".json" suffix
// ("trace.json" -> "trace.0.json", "trace.1.json"), else "<path>.<rank>.json"
// (file_for_rank). Each event is {"name", "cat", "ph":"X", "ts", "dur"
// (microseconds of the host's monotonic clock, so ranks of one host line
// up), "pid": rank, "tid": a small per-thread number, "args": {"bytes": ..}
// when given}.
//
// What is recorded: each collective of the internal communicator ("comm":
// allreduce, alltoallv, ..., with its bytes), hb_context_barrier, data sync
// ("data"), metric merges ("metrics"), hb_context_synchronize ("gpu") and
// whatever modules wrap in a Span. A collective on CUDA buffers returns once
// NCCL has it enqueued, so its span is the enqueue; the GPU time shows in
// cuda_synchronize.
//
// Recording is process-wide: the first context created with the option
// starts it (its rank names the file), every later one with the option
// joins it, and it stops when the last of them is destroyed. Events are
// buffered in memory and appended to the file every 8192 events (by the
// thread that ends the 8192nd span), when the recording stops and when the
// process calls exit(). The file is a complete JSON array after every
// append, so even a process killed without either leaves a valid file
// holding everything up to the last append.
//
// Instrumenting code (thread-safe; one relaxed atomic load when off):
//
//   #include "timeline/timeline.h"
//   void Table::lookup(...) {
//     hb::timeline::Span span("lookup", "embedding");   // whole call
//     { hb::timeline::Span s("plan", "embedding"); plan(...); }
//     hb::timeline::Span x("exchange", "embedding", bytes);  // with args
//     x.arg("ids", n);  // one more integer argument
//   }
//
// `name`, `category` and argument keys must outlive the recording: pass
// string literals.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

namespace hb {
namespace timeline {

namespace detail {
extern std::atomic<bool> g_on;
int64_t now_ns();
void record(const char *name, const char *category, int64_t start_ns,
            int64_t end_ns, int64_t bytes, const char *key, int64_t value);
}  // namespace detail

// True while a recording runs.
inline bool enabled() { return detail::g_on.load(std::memory_order_relaxed); }

// One complete event from construction to destruction.
class Span {
 public:
  Span(const char *name, const char *category, int64_t bytes = -1)
      : name_(name), category_(category), bytes_(bytes) {
    if (enabled()) start_ = detail::now_ns();
  }
  ~Span() {
    if (start_ >= 0)
      detail::record(name_, category_, start_, detail::now_ns(), bytes_, key_,
                     value_);
  }
  Span(const Span &) = delete;
  Span &operator=(const Span &) = delete;

  void set_bytes(int64_t bytes) { bytes_ = bytes; }
  // One extra integer argument shown with the event (key: a literal).
  void arg(const char *key, int64_t value) {
    key_ = key;
    value_ = value;
  }

 private:
  const char *name_;
  const char *category_;
  int64_t bytes_;
  int64_t start_ = -1;  // -1: not recording
  const char *key_ = nullptr;
  int64_t value_ = 0;
};

// The file rank `rank` writes for option value `path`.
std::string file_for_rank(const std::string &path, int rank);

// Held by a context while it records (the context's destructor releases
// it). Throws HB_ERR_IO naming the file when it cannot be created.
class Recording;
std::shared_ptr<Recording> start(const std::string &path, int rank);

// Appends what is buffered to the file now (no-op when off).
void flush();

}  // namespace timeline
}  // namespace hb
