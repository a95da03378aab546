#include "reader/parse_worker.h"

#include "abi/error.h"
#include "reader/byte_source.h"
#include "reader/chunk_cursor.h"
#include "reader/line_parser.h"
#include "reader/line_splitter.h"

namespace hb {
namespace reader {
namespace {

class ChunkParser {
 public:
  ChunkParser(const WorkerArgs &a) : a_(a), s_(*a.settings) {}

  // false: the reader is stopping.
  bool parse(const Chunk &c) {
    const FileInfo &f = (*a_.files)[c.file];
    epoch_ = c.epoch;
    fresh();
    std::unique_ptr<ByteSource> src =
        f.gzip ? open_gzip(f.path) : open_plain(f.path, c.begin);
    int64_t last = f.gzip ? INT64_MAX : c.end;
    LineSplitter lines(src.get(), f.gzip ? 0 : c.begin, !f.gzip && c.begin > 0,
                       last, s_.max_line_bytes);
    Line line;
    while (lines.next(&line)) {
      if (line.index < c.skip_lines) continue;         // read before a restore
      if (line.size == 0 && !line.too_long) continue;  // blank line
      ParseError err;
      int64_t r = block_->rows;
      bool ok = false;
      if (line.too_long) {
        err.what = "line is longer than max_line_bytes";
      } else {
        // data() + offset: with no dense or sparse column those vectors
        // are empty (indexing them would bind a reference to null).
        ok = parse_line(s_, line.data, line.size, &block_->labels[r],
                        block_->dense.data() + r * s_.num_dense,
                        block_->ids.data() + r * s_.num_sparse,
                        block_->present.data() + r * s_.num_sparse, &err);
      }
      if (!ok) {
        if (!s_.skip_bad_lines) fail_line(f, line, err);
        ++block_->skipped;
        continue;
      }
      block_->next_byte[r] = line.end;
      block_->next_line[r] = line.index + 1;
      if (++block_->rows == kBlockRows && !flush(false)) return false;
    }
    return flush(true);
  }

  bool finish(hb_status error, const std::string &message) {
    if (!block_) fresh();
    block_->stream_end = true;
    block_->error = error;
    block_->message = message;
    return flush_raw();
  }

 private:
  void fresh() {
    block_ = std::make_unique<RowBlock>();
    block_->epoch = epoch_;
    block_->labels.resize(kBlockRows);
    block_->dense.resize(kBlockRows * s_.num_dense);
    block_->ids.resize(kBlockRows * s_.num_sparse);
    block_->present.resize(kBlockRows * s_.num_sparse);
    block_->next_byte.resize(kBlockRows);
    block_->next_line.resize(kBlockRows);
  }

  bool flush(bool chunk_end) {
    block_->chunk_end = chunk_end;
    if (!flush_raw()) return false;
    if (!chunk_end) fresh();
    return true;
  }

  bool flush_raw() {
    if (a_.stop->load(std::memory_order_relaxed)) return false;
    return a_.queue->push(std::move(block_));
  }

  [[noreturn]] void fail_line(const FileInfo &f, const Line &line,
                              const ParseError &err) {
    int64_t number =
        f.gzip ? line.index + 1 : count_newlines(f.path, line.offset) + 1;
    std::string extra;
    if (err.fields > 0)
      extra = format(" (%lld columns, expected %zu)",
                     static_cast<long long>(err.fields), s_.columns.size());
    if (line.too_long)
      extra = format(" (cap %lld bytes)",
                     static_cast<long long>(s_.max_line_bytes));
    std::string column =
        err.column > 0 ? format(", column %d", err.column) : "";
    fail(HB_ERR_CORRUPT, "hb_reader: %s: line %lld%s: %s%s", f.path.c_str(),
         static_cast<long long>(number), column.c_str(), err.what,
         extra.c_str());
  }

  const WorkerArgs &a_;
  const Settings &s_;
  int epoch_ = 0;
  std::unique_ptr<RowBlock> block_;
};

}  // namespace

void run_parse_worker(const WorkerArgs &a) noexcept {
  ChunkParser parser(a);
  hb_status status = HB_OK;
  std::string message;
  try {
    ChunkCursor cursor(a.files, a.settings, a.shard, a.num_shards, a.sequence);
    Chunk c;
    for (int64_t k = a.thread; cursor.seek(k, &c); k += a.num_threads)
      if (!parser.parse(c)) return;
  } catch (...) {
    status = status_from_current_exception();
    message = hb_last_error();
  }
  parser.finish(status, message);
}

}  // namespace reader
}  // namespace hb
