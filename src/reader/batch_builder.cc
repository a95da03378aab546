#include "reader/batch_builder.h"

#include <cstdlib>
#include <cstring>
#include <new>

namespace hb {
namespace reader {
namespace {

inline size_t align8(size_t n) { return (n + 7) & ~size_t{7}; }

}  // namespace

BatchBuilder::BatchBuilder(int64_t batch_size, int num_dense, int num_sparse)
    : batch_size_(batch_size),
      num_dense_(num_dense),
      num_sparse_(num_sparse),
      labels_(batch_size),
      dense_(batch_size * num_dense),
      ids_(batch_size * num_sparse),
      present_(batch_size * num_sparse) {}

int64_t BatchBuilder::append(const RowBlock &b, int64_t from, int64_t count) {
  if (rows_ == 0) epoch_ = b.epoch;
  std::memcpy(&labels_[rows_], &b.labels[from], count * sizeof(float));
  // A layout without dense or sparse columns has empty vectors: skip them
  // (indexing one, or memcpy from its null data(), is undefined).
  if (num_dense_ > 0)
    std::memcpy(&dense_[rows_ * num_dense_], &b.dense[from * num_dense_],
                count * num_dense_ * sizeof(float));
  if (num_sparse_ > 0) {
    std::memcpy(&ids_[rows_ * num_sparse_], &b.ids[from * num_sparse_],
                count * num_sparse_ * sizeof(int64_t));
    std::memcpy(&present_[rows_ * num_sparse_], &b.present[from * num_sparse_],
                count * num_sparse_);
  }
  rows_ += count;
  return count;
}

hb_reader_batch *BatchBuilder::take() {
  const int64_t n = rows_, F = num_sparse_, D = num_dense_;
  int64_t num_ids = 0;
  for (int64_t i = 0; i < n * F; ++i) num_ids += present_[i];
  // One allocation: header, labels, dense, offsets, ids (8-byte aligned).
  const size_t head = align8(sizeof(hb_reader_batch));
  const size_t lab = align8(n * sizeof(float));
  const size_t den = align8(n * D * sizeof(float));
  const size_t off = (F * n + 1) * sizeof(int64_t);
  const size_t idb = num_ids * sizeof(int64_t);
  char *mem = static_cast<char *>(std::malloc(head + lab + den + off + idb));
  if (!mem) throw std::bad_alloc();
  hb_reader_batch *b = reinterpret_cast<hb_reader_batch *>(mem);
  std::memset(b, 0, sizeof *b);
  b->size = n;
  b->num_dense = num_dense_;
  b->num_sparse = num_sparse_;
  b->epoch = epoch_;
  b->labels = reinterpret_cast<float *>(mem + head);
  b->dense = reinterpret_cast<float *>(mem + head + lab);
  b->offsets = reinterpret_cast<int64_t *>(mem + head + lab + den);
  b->ids = reinterpret_cast<int64_t *>(mem + head + lab + den + off);
  b->num_ids = num_ids;
  if (n > 0) {
    std::memcpy(b->labels, labels_.data(), n * sizeof(float));
    if (D > 0) std::memcpy(b->dense, dense_.data(), n * D * sizeof(float));
  }
  // Feature-major: feature f's bags are samples 0..n-1 in order.
  int64_t k = 0;
  for (int64_t f = 0; f < F; ++f) {
    for (int64_t i = 0; i < n; ++i) {
      b->offsets[f * n + i] = k;
      if (present_[i * F + f]) b->ids[k++] = ids_[i * F + f];
    }
  }
  b->offsets[F * n] = k;
  rows_ = 0;
  return b;
}

}  // namespace reader
}  // namespace hb
