#include "reader/reader.h"

#include "abi/error.h"
#include "reader/parse_worker.h"

namespace hb {
namespace reader {

Reader::Reader(std::vector<FileInfo> files, Settings s, int shard,
               int num_shards, Sequence seq, uint64_t lines, uint64_t skipped)
    : files_(std::move(files)),
      s_(std::move(s)),
      shard_(shard),
      num_shards_(num_shards),
      seq_(std::move(seq)),
      builder_(s_.batch_size, s_.num_dense, s_.num_sparse),
      lines_(lines),
      skipped_(skipped) {
  for (int t = 0; t < s_.num_threads; ++t)
    queues_.push_back(std::make_unique<BlockQueue>(s_.queue_depth));
  try {
    for (int t = 0; t < s_.num_threads; ++t) {
      WorkerArgs a{&files_,    &s_, &seq_,          shard,
                   num_shards, t,   s_.num_threads, queues_[t].get(),
                   &stop_};
      threads_.emplace_back([a] { run_parse_worker(a); });
    }
  } catch (...) {
    stop_threads();  // those already started
    throw;
  }
}

Reader::~Reader() { stop_threads(); }

void Reader::stop_threads() {
  stop_ = true;
  for (auto &q : queues_) q->close();
  for (auto &t : threads_)
    if (t.joinable()) t.join();
}

hb_reader_batch *Reader::emit_or_drop() {
  if (builder_.rows() == 0) return nullptr;
  if (!builder_.full() && !short_batch_allowed()) {
    builder_.clear();
    return nullptr;
  }
  lines_ += static_cast<uint64_t>(builder_.rows());
  return builder_.take();
}

hb_reader_batch *Reader::next() {
  for (;;) {
    if (error_ != HB_OK) fail(error_, "%s", error_message_.c_str());
    if (builder_.full()) return emit_or_drop();
    if (done_) return emit_or_drop();
    if (!block_) {
      block_ = queues_[chunk_ % s_.num_threads]->pop();
      block_row_ = 0;
      if (!block_->stream_end || block_->rows > 0) epoch_ = block_->epoch;
      // A batch never spans epochs.
      if (block_->rows > 0 && builder_.rows() > 0 &&
          block_->epoch != builder_.epoch()) {
        if (hb_reader_batch *b = emit_or_drop()) return b;
      }
    }
    int64_t left = block_->rows - block_row_;
    if (left > 0) {
      block_row_ +=
          builder_.append(*block_, block_row_, std::min(left, builder_.room()));
      partial_ = true;
      next_byte_ = block_->next_byte[block_row_ - 1];
      next_line_ = block_->next_line[block_row_ - 1];
      continue;
    }
    // Block used up: its bookkeeping, then the next one.
    skipped_ += block_->skipped;
    if (block_->error != HB_OK) {
      error_ = block_->error;
      error_message_ = block_->message;
    } else if (block_->stream_end) {
      done_ = true;
    } else if (block_->chunk_end) {
      ++chunk_;
      partial_ = false;
    }
    block_.reset();
  }
}

Position Reader::position() const {
  Position p;
  p.chunk = chunk_;
  p.partial = partial_;
  p.next_byte = next_byte_;
  p.next_line = next_line_;
  p.epoch = epoch_;
  p.lines = lines_;
  p.skipped = skipped_;
  return p;
}

}  // namespace reader
}  // namespace hb
