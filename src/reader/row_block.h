// Parsed rows travelling from a parser thread to the consumer, and the
// bounded queue they travel in (one per thread: the consumer takes chunk k
// from thread k % num_threads, so the output order does not depend on
// timing).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "hb.h"

namespace hb {
namespace reader {

struct RowBlock {
  int epoch = 0;
  int64_t rows = 0;
  std::vector<float> labels;     // rows
  std::vector<float> dense;      // rows x num_dense
  std::vector<int64_t> ids;      // rows x num_sparse
  std::vector<uint8_t> present;  // rows x num_sparse
  // Where the stream continues after each row (reader/position.h): the
  // file offset after its newline (plain) and the lines of the source
  // passed, its own included (gzip).
  std::vector<int64_t> next_byte, next_line;
  uint64_t skipped = 0;     // malformed lines skipped before these rows' end
  bool chunk_end = false;   // the last block of its chunk
  bool stream_end = false;  // no more chunks for this thread
  hb_status error = HB_OK;  // after the rows: the thread stopped here
  std::string message;
};

class BlockQueue {
 public:
  explicit BlockQueue(size_t capacity) : cap_(capacity) {}

  // Waits for room; false when the queue was closed (the reader is going).
  bool push(std::unique_ptr<RowBlock> b) {
    std::unique_lock<std::mutex> lock(mu_);
    not_full_.wait(lock, [&] { return closed_ || q_.size() < cap_; });
    if (closed_) return false;
    q_.push_back(std::move(b));
    not_empty_.notify_one();
    return true;
  }

  // Waits for a block. The parser threads always end with a stream_end or
  // error block, so this returns.
  std::unique_ptr<RowBlock> pop() {
    std::unique_lock<std::mutex> lock(mu_);
    not_empty_.wait(lock, [&] { return !q_.empty(); });
    std::unique_ptr<RowBlock> b = std::move(q_.front());
    q_.pop_front();
    not_full_.notify_one();
    return b;
  }

  void close() {
    std::lock_guard<std::mutex> lock(mu_);
    closed_ = true;
    not_full_.notify_all();
  }

 private:
  std::mutex mu_;
  std::condition_variable not_full_, not_empty_;
  std::deque<std::unique_ptr<RowBlock>> q_;
  size_t cap_;
  bool closed_ = false;
};

}  // namespace reader
}  // namespace hb
