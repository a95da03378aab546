// Gathers parsed rows (row-major, as the parser writes them) into one
// hb_reader_batch in the collection's layout (feature-major ids, one
// offsets array; see hb.h).
#pragma once

#include <cstdint>
#include <vector>

#include "reader/row_block.h"

namespace hb {
namespace reader {

class BatchBuilder {
 public:
  BatchBuilder(int64_t batch_size, int num_dense, int num_sparse);

  int64_t rows() const { return rows_; }
  int epoch() const { return epoch_; }
  bool full() const { return rows_ == batch_size_; }

  // Appends rows [from, from + count) of b (count <= room()); returns count.
  int64_t append(const RowBlock &b, int64_t from, int64_t count);
  int64_t room() const { return batch_size_ - rows_; }

  // The rows so far as a malloc'd batch (free with hb_reader_batch_free);
  // the builder is empty afterwards.
  hb_reader_batch *take();
  void clear() { rows_ = 0; }

 private:
  int64_t batch_size_;
  int num_dense_, num_sparse_;
  int64_t rows_ = 0;
  int epoch_ = 0;
  std::vector<float> labels_, dense_;
  std::vector<int64_t> ids_;
  std::vector<uint8_t> present_;
};

}  // namespace reader
}  // namespace hb
