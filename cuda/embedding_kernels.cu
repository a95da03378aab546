// Kernels of the embedding GPU path: partition ids by owner, dedup, gather
// rows, deterministic segment sums of gradients, the optimizer steps and
// the wire dtype rounding.
#include "abi/half_math.h"
#include "embedding/optimizer_math.h"
#include "plugin_entries.h"
#include "sort_util.cuh"

namespace hb_cuda {
namespace {

constexpr unsigned kBlock = 256;

__global__ void owner_kernel(const int64_t *ids, int64_t n,
                             const int64_t *num_ids, int32_t world,
                             int32_t mode, int64_t rows_per_shard,
                             int32_t *owner, int64_t *sort_key) {
  const int64_t valid = num_ids && *num_ids < n ? *num_ids : n;
  HB_GRID_STRIDE(i, n) {
    int64_t id = ids[i];
    int32_t o;
    if (i >= valid) {
      o = -1;  // past the device-side count: no owner
    } else if (mode == HB_CUDA_PARTITION_MOD) {
      o = static_cast<int32_t>(static_cast<uint64_t>(id) %
                               static_cast<uint64_t>(world));
    } else {
      o = id >= 0 && id / rows_per_shard < world
              ? static_cast<int32_t>(id / rows_per_shard)
              : -1;
    }
    owner[i] = o;
    if (sort_key)
      sort_key[i] = o < 0 ? world : o;  // ids without an owner sort last
  }
}

__global__ void count_owners_kernel(const int32_t *owner, int64_t n,
                                    int64_t *counts) {
  HB_GRID_STRIDE(i, n) {
    if (owner[i] >= 0)
      atomicAdd(reinterpret_cast<unsigned long long *>(&counts[owner[i]]),
                1ull);  // exact
  }
}

__global__ void gather_kernel(const float *table, int64_t table_rows,
                              int64_t row_stride, int64_t dim,
                              const int64_t *rows, int64_t n, float *out) {
  HB_GRID_STRIDE(k, n * dim) {
    int64_t i = k / dim, d = k - i * dim;
    int64_t r = rows[i];
    out[k] = r >= 0 && r < table_rows ? table[r * row_stride + d] : 0.0f;
  }
}

// out[u, d] = grads[order[seg[u]], d] + grads[order[seg[u] + 1], d] + ...
// in that order: one thread per (segment, column).
__global__ void segment_sum_kernel(const float *grads, int64_t dim,
                                   const int64_t *order, const int64_t *seg,
                                   const int64_t *num_unique,
                                   int64_t max_segments, float *out) {
  int64_t segments = *num_unique < max_segments ? *num_unique : max_segments;
  HB_GRID_STRIDE(k, segments * dim) {
    int64_t u = k / dim, d = k - u * dim;
    int64_t j = seg[u], end = seg[u + 1];
    float acc = grads[order[j] * dim + d];
    for (++j; j < end; ++j) acc = acc + grads[order[j] * dim + d];
    out[k] = acc;
  }
}

// One warp row (threadIdx.y) per record, lanes over its columns, so the
// Adam step count is read by all lanes before lane 0 stores the new one.
__global__ void apply_kernel(hb_cuda_optimizer opt, float *records,
                             int64_t record_words, int64_t table_rows,
                             int64_t dim, const int64_t *rows,
                             const int64_t *num_rows, int64_t max_rows,
                             const float *grads) {
  const hb::optmath::Hyper h = hb::optmath::make_hyper(
      opt.learning_rate, opt.epsilon, opt.initial_accumulator, opt.beta1,
      opt.beta2, opt.l1, opt.l2, opt.lr_power);
  int64_t count = *num_rows < max_rows ? *num_rows : max_rows;
  int64_t stride = static_cast<int64_t>(blockDim.y) * gridDim.x;
  for (int64_t k = blockIdx.x * static_cast<int64_t>(blockDim.y) + threadIdx.y;
       k < count; k += stride) {
    int64_t r = rows[k];
    if (r < 0 || r >= table_rows) continue;  // uniform across the warp row
    float *record = records + r * record_words;
    float lr_t = 0.0f;
    int64_t t = 0;
    if (opt.kind == HB_OPT_ADAM) {
      t = hb::optmath::record_steps(record, dim) + 1;
      lr_t = hb::optmath::adam_lr(h, t);
    }
    for (int64_t c = threadIdx.x; c < dim; c += blockDim.x)
      hb::optmath::step_element(opt.kind, record, dim, c, grads[k * dim + c],
                                lr_t, h);
    __syncwarp();
    if (opt.kind == HB_OPT_ADAM && threadIdx.x == 0)
      hb::optmath::set_record_steps(record, dim, t);
  }
}

__global__ void wire_encode_kernel(const float *src, int64_t n, bool bf16,
                                   uint16_t *dst) {
  HB_GRID_STRIDE(i, n) {
    dst[i] = bf16 ? hb::halfmath::float_to_bf16(src[i])
                  : hb::halfmath::float_to_half(src[i]);
  }
}

__global__ void wire_decode_kernel(const uint16_t *src, int64_t n, bool bf16,
                                   float *dst) {
  HB_GRID_STRIDE(i, n) {
    dst[i] = bf16 ? hb::halfmath::bf16_to_float(src[i])
                  : hb::halfmath::half_to_float(src[i]);
  }
}

int bits_for(int64_t max_value) {
  int b = 1;
  while (b < 63 && (int64_t{1} << b) <= max_value) ++b;
  return b;
}

}  // namespace

int32_t emb_partition_bounded(const int64_t *ids, size_t n,
                              const int64_t *num_ids, int32_t world,
                              int32_t mode, int64_t rows_per_shard,
                              int32_t *owner, int64_t *counts, int64_t *order,
                              void *stream, char *errbuf, size_t errcap) {
  HB_CUDA_CHECK_ARG(world > 0, "emb_partition: world size %d must be > 0",
                    world);
  HB_CUDA_CHECK_ARG(
      mode == HB_CUDA_PARTITION_MOD || mode == HB_CUDA_PARTITION_DIV,
      "emb_partition: unknown partition mode %d", mode);
  HB_CUDA_CHECK_ARG(
      mode == HB_CUDA_PARTITION_MOD || rows_per_shard > 0,
      "emb_partition: DIV partition needs rows_per_shard > 0 (got %lld)",
      static_cast<long long>(rows_per_shard));
  cudaStream_t s = static_cast<cudaStream_t>(stream);
  Scratch scratch(s);
  int64_t nn = static_cast<int64_t>(n);
  if (counts)
    HB_CUDA_TRY(cudaMemsetAsync(counts, 0, sizeof(int64_t) * world, s),
                "emb_partition");
  if (n == 0) return HB_OK;
  int64_t *keys = nullptr;
  if (order) HB_CUDA_TRY(scratch.alloc(&keys, n), "emb_partition: scratch");
  unsigned g = grid_for(n, kBlock);
  owner_kernel<<<g, kBlock, 0, s>>>(ids, nn, num_ids, world, mode,
                                    rows_per_shard, owner, keys);
  if (counts) count_owners_kernel<<<g, kBlock, 0, s>>>(owner, nn, counts);
  if (order) {
    int64_t *pos = nullptr, *sorted = nullptr;
    HB_CUDA_TRY(scratch.alloc(&pos, n), "emb_partition: scratch");
    HB_CUDA_TRY(scratch.alloc(&sorted, n), "emb_partition: scratch");
    iota_kernel<<<g, kBlock, 0, s>>>(pos, nn);
    HB_CUDA_TRY(
        sort_pairs(scratch, keys, sorted, pos, order, nn, bits_for(world), s),
        "emb_partition: sort");
  }
  return launch_status("emb_partition", errbuf, errcap);
}

int32_t emb_partition(const int64_t *ids, size_t n, int32_t world, int32_t mode,
                      int64_t rows_per_shard, int32_t *owner, int64_t *counts,
                      int64_t *order, void *stream, char *errbuf,
                      size_t errcap) {
  return emb_partition_bounded(ids, n, nullptr, world, mode, rows_per_shard,
                               owner, counts, order, stream, errbuf, errcap);
}

int32_t emb_dedup(const int64_t *ids, size_t n, int64_t *unique,
                  int64_t *inverse, int64_t *num_unique, int64_t *order,
                  int64_t *seg, void *stream, char *errbuf, size_t errcap) {
  HB_CUDA_CHECK_ARG(num_unique, "emb_dedup: num_unique is NULL");
  cudaStream_t s = static_cast<cudaStream_t>(stream);
  Scratch scratch(s);
  HB_CUDA_TRY(group_keys(scratch, ids, static_cast<int64_t>(n), 64, unique,
                         inverse, num_unique, order, seg, s),
              "emb_dedup");
  return HB_OK;
}

int32_t emb_gather(const float *table, int64_t table_rows, int64_t row_stride,
                   int64_t dim, const int64_t *rows, size_t n, float *out,
                   void *stream, char *errbuf, size_t errcap) {
  HB_CUDA_CHECK_ARG(dim > 0, "emb_gather: dim %lld must be > 0",
                    static_cast<long long>(dim));
  HB_CUDA_CHECK_ARG(
      row_stride >= dim, "emb_gather: row_stride %lld is less than dim %lld",
      static_cast<long long>(row_stride), static_cast<long long>(dim));
  if (n == 0) return HB_OK;
  cudaStream_t s = static_cast<cudaStream_t>(stream);
  int64_t total = static_cast<int64_t>(n) * dim;
  gather_kernel<<<grid_for(static_cast<size_t>(total), kBlock), kBlock, 0, s>>>(
      table, table_rows, row_stride, dim, rows, static_cast<int64_t>(n), out);
  return launch_status("emb_gather", errbuf, errcap);
}

int32_t emb_segment_sum(const float *grads, int64_t dim, const int64_t *order,
                        const int64_t *seg, const int64_t *num_unique,
                        size_t max_segments, float *out, void *stream,
                        char *errbuf, size_t errcap) {
  HB_CUDA_CHECK_ARG(dim > 0, "emb_segment_sum: dim %lld must be > 0",
                    static_cast<long long>(dim));
  if (max_segments == 0) return HB_OK;
  cudaStream_t s = static_cast<cudaStream_t>(stream);
  size_t total = max_segments * static_cast<size_t>(dim);
  segment_sum_kernel<<<grid_for(total, kBlock), kBlock, 0, s>>>(
      grads, dim, order, seg, num_unique, static_cast<int64_t>(max_segments),
      out);
  return launch_status("emb_segment_sum", errbuf, errcap);
}

int32_t emb_apply(const hb_cuda_optimizer *opt, float *records,
                  int64_t record_words, int64_t table_rows, int64_t dim,
                  const int64_t *rows, const int64_t *num_rows, size_t max_rows,
                  const float *grads, void *stream, char *errbuf,
                  size_t errcap) {
  HB_CUDA_CHECK_ARG(opt && opt->kind >= HB_OPT_SGD && opt->kind <= HB_OPT_FTRL,
                    "emb_apply: unknown optimizer %d", opt ? opt->kind : -1);
  HB_CUDA_CHECK_ARG(dim > 0, "emb_apply: dim %lld must be > 0",
                    static_cast<long long>(dim));
  int64_t need = hb::optmath::record_words(opt->kind, dim);
  HB_CUDA_CHECK_ARG(record_words >= need,
                    "emb_apply: record_words %lld < %lld needed by optimizer "
                    "%d at dim %lld",
                    static_cast<long long>(record_words),
                    static_cast<long long>(need), opt->kind,
                    static_cast<long long>(dim));
  if (max_rows == 0) return HB_OK;
  cudaStream_t s = static_cast<cudaStream_t>(stream);
  dim3 block(32, 8);
  unsigned g = grid_for(max_rows, block.y);
  apply_kernel<<<g, block, 0, s>>>(*opt, records, record_words, table_rows, dim,
                                   rows, num_rows,
                                   static_cast<int64_t>(max_rows), grads);
  return launch_status("emb_apply", errbuf, errcap);
}

int32_t emb_wire_encode(const float *src, size_t n, int32_t dtype,
                        uint16_t *dst, void *stream, char *errbuf,
                        size_t errcap) {
  HB_CUDA_CHECK_ARG(dtype == HB_FLOAT16 || dtype == HB_BFLOAT16,
                    "emb_wire_encode: dtype %d is not float16 or bfloat16",
                    dtype);
  if (n == 0) return HB_OK;
  wire_encode_kernel<<<grid_for(n, kBlock), kBlock, 0,
                       static_cast<cudaStream_t>(stream)>>>(
      src, static_cast<int64_t>(n), dtype == HB_BFLOAT16, dst);
  return launch_status("emb_wire_encode", errbuf, errcap);
}

int32_t emb_wire_decode(const uint16_t *src, size_t n, int32_t dtype,
                        float *dst, void *stream, char *errbuf, size_t errcap) {
  HB_CUDA_CHECK_ARG(dtype == HB_FLOAT16 || dtype == HB_BFLOAT16,
                    "emb_wire_decode: dtype %d is not float16 or bfloat16",
                    dtype);
  if (n == 0) return HB_OK;
  wire_decode_kernel<<<grid_for(n, kBlock), kBlock, 0,
                       static_cast<cudaStream_t>(stream)>>>(
      src, static_cast<int64_t>(n), dtype == HB_BFLOAT16, dst);
  return launch_status("emb_wire_decode", errbuf, errcap);
}

}  // namespace hb_cuda
