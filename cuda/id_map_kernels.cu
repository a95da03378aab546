// A dynamic GPU table's id -> row map on the device (driver:
// src/embedding/device_id_map.h; layout: src/embedding/id_map_math.h) and
// the initialization of the rows it creates.
//
// emb_idmap_assign is deterministic although threads insert concurrently:
// where a key lands in the table may depend on timing (it changes no
// lookup), but which rows new ids get does not: every position of a new id
// records itself with atomicMax(pending(i)), so the first occurrence wins;
// a scan over "is the first occurrence of a new id" numbers the new ids in
// input order, exactly as the host shard creates rows one id at a time.
#include "embedding/id_map_math.h"
#include "embedding/init_math.h"
#include "embedding/optimizer_math.h"
#include "plugin_entries.h"
#include "sort_util.cuh"

namespace hb_cuda {
namespace {

using hb::idmap::kEmptyKey;
using hb::idmap::kNoRow;
using hb::idmap::pending;

constexpr unsigned kBlock = 256;

__device__ int64_t load_volatile(const int64_t *p) {
  return *static_cast<const volatile int64_t *>(p);
}

// The slot of id, claiming an empty one when it is absent; -1 when every
// slot is taken by other ids. Keys only ever go from kEmptyKey to an id,
// so a key read as an id is final.
__device__ int64_t claim(int64_t *keys, int64_t capacity, int bits,
                         int64_t id) {
  if (id == kEmptyKey) return capacity;  // its own slot: no probing
  const int64_t mask = capacity - 1;
  int64_t s = hb::idmap::home_slot(id, bits);
  for (int64_t probe = 0; probe < capacity; ++probe, s = (s + 1) & mask) {
    int64_t cur = load_volatile(keys + s);
    if (cur == kEmptyKey) {
      cur = static_cast<int64_t>(
          atomicCAS(reinterpret_cast<unsigned long long *>(keys + s),
                    static_cast<unsigned long long>(kEmptyKey),
                    static_cast<unsigned long long>(id)));
      if (cur == kEmptyKey) return s;
    }
    if (cur == id) return s;
  }
  return -1;
}

__device__ int64_t bounded(const int64_t *num_ids, int64_t n) {
  return num_ids && *num_ids < n ? *num_ids : n;
}

__global__ void clear_kernel(int64_t *keys, int64_t *vals, int64_t slots) {
  HB_GRID_STRIDE(s, slots) {
    keys[s] = kEmptyKey;
    vals[s] = kNoRow;
  }
}

__global__ void build_kernel(int64_t *keys, int64_t *vals, int64_t capacity,
                             int bits, const int64_t *row_ids, int64_t rows) {
  HB_GRID_STRIDE(r, rows) {
    int64_t s = claim(keys, capacity, bits, row_ids[r]);
    if (s >= 0) vals[s] = r;  // rows <= capacity / 2: always a slot
  }
}

// state[0]: overflow flag.
__global__ void assign_begin_kernel(const int64_t *num_rows, int64_t *first_new,
                                    int64_t *state) {
  *first_new = *num_rows;
  state[0] = 0;
}

__global__ void assign_claim_kernel(int64_t *keys, int64_t *vals,
                                    int64_t capacity, int bits,
                                    const int64_t *ids, int64_t n,
                                    const int64_t *num_ids,
                                    const int64_t *num_rows, int64_t *slot_of,
                                    int64_t *state) {
  if (*num_rows < 0) return;  // failed before: the map is unusable
  const int64_t k = bounded(num_ids, n);
  HB_GRID_STRIDE(i, k) {
    int64_t s = claim(keys, capacity, bits, ids[i]);
    slot_of[i] = s;
    if (s < 0) {
      state[0] = 1;
      continue;
    }
    // Rows (>= 0) never change here, so a row read is final; any other
    // value is kNoRow or a pending position, which atomicMax settles.
    if (load_volatile(vals + s) < 0)
      atomicMax(reinterpret_cast<long long *>(vals + s),
                static_cast<long long>(pending(i)));
  }
}

__global__ void assign_flags_kernel(const int64_t *vals, const int64_t *slot_of,
                                    int64_t n, const int64_t *num_ids,
                                    const int64_t *num_rows, int64_t *flags) {
  const int64_t k = *num_rows < 0 ? 0 : bounded(num_ids, n);
  HB_GRID_STRIDE(i, n) {
    flags[i] = i < k && slot_of[i] >= 0 && vals[slot_of[i]] == pending(i);
  }
}

// scan: inclusive count of first occurrences of new ids.
__device__ bool no_room(const int64_t *scan, int64_t n, int64_t base,
                        int64_t row_capacity, const int64_t *state) {
  return base < 0 || state[0] != 0 || base + scan[n - 1] > row_capacity;
}

__global__ void assign_rows_kernel(int64_t *vals, const int64_t *ids,
                                   const int64_t *slot_of, const int64_t *flags,
                                   const int64_t *scan, int64_t n,
                                   const int64_t *num_rows, int64_t *row_ids,
                                   int64_t row_capacity, const int64_t *state) {
  const int64_t base = *num_rows;
  if (no_room(scan, n, base, row_capacity, state)) return;
  HB_GRID_STRIDE(i, n) {
    if (!flags[i]) continue;
    const int64_t r = base + scan[i] - 1;
    vals[slot_of[i]] = r;
    row_ids[r] = ids[i];
  }
}

__global__ void assign_count_kernel(const int64_t *scan, int64_t n,
                                    int64_t *num_rows, int64_t row_capacity,
                                    const int64_t *state) {
  const int64_t base = *num_rows;
  *num_rows =
      no_room(scan, n, base, row_capacity, state) ? -1 : base + scan[n - 1];
}

__global__ void assign_out_kernel(const int64_t *vals, const int64_t *slot_of,
                                  int64_t n, const int64_t *num_ids,
                                  const int64_t *num_rows, int64_t *out_rows) {
  const bool ok = *num_rows >= 0;
  const int64_t k = bounded(num_ids, n);
  HB_GRID_STRIDE(i, k) {
    out_rows[i] = ok && slot_of[i] >= 0 ? vals[slot_of[i]] : -1;
  }
}

// One thread per (row, column): the weight, and the row's slots from the
// column-0 thread (optmath::init_slots, as the host shard).
__global__ void init_rows_kernel(hb_cuda_init init, float *records,
                                 int64_t record_words, int64_t table_rows,
                                 const int64_t *row_ids,
                                 const int64_t *first_row,
                                 const int64_t *end_row, int64_t max_rows) {
  const int64_t first = *first_row;
  int64_t count = *end_row - first;
  if (first < 0 || count <= 0) return;
  if (count > max_rows) count = max_rows;
  const hb::initmath::Params p = {init.initializer, init.init_a, init.init_b,
                                  init.table_key};
  const float init_acc = static_cast<float>(init.initial_accumulator);
  const int64_t dim = init.dim;
  HB_GRID_STRIDE(e, count * dim) {
    const int64_t r = first + e / dim, c = e % dim;
    if (r >= table_rows) continue;
    float *rec = records + r * record_words;
    rec[c] = hb::initmath::weight(p, hb::initmath::row_key(p, row_ids[r]), c);
    if (c == 0) hb::optmath::init_slots(init.optimizer, rec, dim, init_acc);
  }
}

bool valid_capacity(int64_t capacity) {
  return capacity >= hb::idmap::kMinCapacity &&
         (capacity & (capacity - 1)) == 0;
}

}  // namespace

int32_t emb_idmap_build(int64_t *keys, int64_t *vals, int64_t capacity,
                        const int64_t *row_ids, int64_t rows, void *stream,
                        char *errbuf, size_t errcap) {
  HB_CUDA_CHECK_ARG(valid_capacity(capacity),
                    "emb_idmap_build: capacity %lld is not a power of two >= "
                    "16",
                    static_cast<long long>(capacity));
  HB_CUDA_CHECK_ARG(rows >= 0 && rows <= capacity / 2,
                    "emb_idmap_build: %lld rows exceed half the capacity %lld",
                    static_cast<long long>(rows),
                    static_cast<long long>(capacity));
  cudaStream_t s = static_cast<cudaStream_t>(stream);
  clear_kernel<<<grid_for(capacity + 1, kBlock), kBlock, 0, s>>>(keys, vals,
                                                                 capacity + 1);
  if (rows > 0)
    build_kernel<<<grid_for(rows, kBlock), kBlock, 0, s>>>(
        keys, vals, capacity, hb::idmap::capacity_bits(capacity), row_ids,
        rows);
  return launch_status("emb_idmap_build", errbuf, errcap);
}

int32_t emb_idmap_assign(int64_t *keys, int64_t *vals, int64_t capacity,
                         const int64_t *ids, size_t n, const int64_t *num_ids,
                         int64_t *row_ids, int64_t row_capacity,
                         int64_t *num_rows, int64_t *first_new,
                         int64_t *out_rows, void *stream, char *errbuf,
                         size_t errcap) {
  HB_CUDA_CHECK_ARG(valid_capacity(capacity),
                    "emb_idmap_assign: capacity %lld is not a power of two >= "
                    "16",
                    static_cast<long long>(capacity));
  HB_CUDA_CHECK_ARG(num_rows && first_new,
                    "emb_idmap_assign: num_rows or first_new is NULL");
  cudaStream_t s = static_cast<cudaStream_t>(stream);
  Scratch scratch(s);
  int64_t *state = nullptr;
  HB_CUDA_TRY(scratch.alloc(&state, 1), "emb_idmap_assign: scratch");
  assign_begin_kernel<<<1, 1, 0, s>>>(num_rows, first_new, state);
  if (n == 0) return launch_status("emb_idmap_assign", errbuf, errcap);
  const int64_t nn = static_cast<int64_t>(n);
  int64_t *slot_of = nullptr, *flags = nullptr, *scan = nullptr;
  HB_CUDA_TRY(scratch.alloc(&slot_of, n), "emb_idmap_assign: scratch");
  HB_CUDA_TRY(scratch.alloc(&flags, n), "emb_idmap_assign: scratch");
  HB_CUDA_TRY(scratch.alloc(&scan, n), "emb_idmap_assign: scratch");
  const unsigned g = grid_for(n, kBlock);
  assign_claim_kernel<<<g, kBlock, 0, s>>>(
      keys, vals, capacity, hb::idmap::capacity_bits(capacity), ids, nn,
      num_ids, num_rows, slot_of, state);
  assign_flags_kernel<<<g, kBlock, 0, s>>>(vals, slot_of, nn, num_ids, num_rows,
                                           flags);
  HB_CUDA_TRY(inclusive_sum(scratch, flags, scan, nn, s),
              "emb_idmap_assign: scan");
  assign_rows_kernel<<<g, kBlock, 0, s>>>(vals, ids, slot_of, flags, scan, nn,
                                          num_rows, row_ids, row_capacity,
                                          state);
  assign_count_kernel<<<1, 1, 0, s>>>(scan, nn, num_rows, row_capacity, state);
  assign_out_kernel<<<g, kBlock, 0, s>>>(vals, slot_of, nn, num_ids, num_rows,
                                         out_rows);
  return launch_status("emb_idmap_assign", errbuf, errcap);
}

int32_t emb_init_rows(const hb_cuda_init *init, float *records,
                      int64_t record_words, int64_t table_rows,
                      const int64_t *row_ids, const int64_t *first_row,
                      const int64_t *end_row, size_t max_rows, void *stream,
                      char *errbuf, size_t errcap) {
  HB_CUDA_CHECK_ARG(init && first_row && end_row,
                    "emb_init_rows: init, first_row or end_row is NULL");
  HB_CUDA_CHECK_ARG(
      init->dim > 0 &&
          record_words >= hb::optmath::record_words(init->optimizer, init->dim),
      "emb_init_rows: dim %lld with record_words %lld",
      static_cast<long long>(init->dim), static_cast<long long>(record_words));
  if (max_rows == 0) return HB_OK;
  init_rows_kernel<<<grid_for(max_rows * init->dim, kBlock), kBlock, 0,
                     static_cast<cudaStream_t>(stream)>>>(
      *init, records, record_words, table_rows, row_ids, first_row, end_row,
      static_cast<int64_t>(max_rows));
  return launch_status("emb_init_rows", errbuf, errcap);
}

}  // namespace hb_cuda
