// A host implementation of DeviceOps (src/embedding/device_ops.h) with the
// documented semantics of the CUDA plugin functions, so the GPU table's
// orchestration runs in the normal test suite without a GPU:
//
// - "device" memory is separate host blocks from alloc(); every operation
//   checks that its device pointers lie inside a live block (bounds
//   included) and aborts with a message otherwise;
// - a stream: operations are queued and run in order at sync() (or before
//   an alltoallv), so a result read on the host before sync() is stale and a
//   buffer freed with work pending aborts -- the orchestration must wait
//   where the real stream would need it; host sources are read at enqueue
//   time (cudaMemcpyAsync from pageable memory);
// - kernels: host loops written from cuda/plugin_api.h (gather, segment sum
//   in input order, optimizer steps with src/embedding/optimizer_math.h,
//   the plan's sort-based dedup, first-occurrence order, bounded stable
//   partition, send slots, range check and dense rows, the device id map
//   and row initialization with src/embedding/init_math.h, a collection's
//   bags, pooling, gradient shares and id comparison); counts the kernels
//   read on the device are read when the operation runs, not when it is
//   enqueued;
// - several ops may share one Device (memory and stream), as the GPU tables
//   of one context do;
// - alltoallv: over the in-process thread exchange.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <vector>

#include "common/agreement.h"
#include "embedding/device_ops.h"
#include "embedding/id_map_math.h"
#include "embedding/init_math.h"
#include "embedding/optimizer_math.h"
#include "embedding/wire.h"

namespace hbtest {

class HostDeviceOps : public hb::emb::DeviceOps {
 public:
  struct Block {
    std::unique_ptr<unsigned char[]> mem;
    size_t bytes;
  };
  // One device: its memory and its stream. Ops that share it see each
  // other's blocks and run in one order, as the GPU tables of a context
  // share its device and stream.
  struct Device {
    std::map<uintptr_t, Block> blocks;
    std::vector<std::function<void()>> queue;
    size_t ops_run = 0, d2h_bytes = 0;
  };

  explicit HostDeviceOps(std::unique_ptr<hb::Exchange> x,
                         std::shared_ptr<Device> d = std::make_shared<Device>())
      : x_(std::move(x)),
        d_(std::move(d)),
        blocks_(d_->blocks),
        queue_(d_->queue),
        ops_run_(d_->ops_run),
        d2h_bytes_(d_->d2h_bytes) {}
  ~HostDeviceOps() override {
    if (d_.use_count() == 1 && !blocks_.empty())
      die("%zu device blocks leaked", blocks_.size());
  }

  int device() const override { return 0; }
  void make_current() override {}
  bool is_device(const void *p) override { return block_of(p, 0) != nullptr; }
  size_t live_blocks() const { return blocks_.size(); }
  std::shared_ptr<Device> shared_device() const { return d_; }
  size_t ops_run() const { return ops_run_; }
  // Bytes copied from device to host memory so far.
  size_t d2h_bytes() const { return d2h_bytes_; }

  void *alloc(size_t bytes) override {
    if (bytes == 0) die("alloc(0)");
    std::unique_ptr<unsigned char[]> b(new unsigned char[bytes]);
    std::memset(b.get(), 0xA5, bytes);  // garbage, as cudaMalloc's
    void *p = b.get();
    blocks_[reinterpret_cast<uintptr_t>(p)] = {std::move(b), bytes};
    return p;
  }
  void free(void *p) override {
    if (!queue_.empty()) die("free with %zu operations pending", queue_.size());
    auto it = blocks_.find(reinterpret_cast<uintptr_t>(p));
    if (it == blocks_.end()) die("free of a pointer alloc() did not return");
    blocks_.erase(it);
  }
  void copy(void *dst, const void *src, size_t bytes) override {
    if (bytes == 0) return;
    bool dd = is_device(dst), sd = is_device(src);
    if (dd) dev(dst, bytes, "copy dst");
    if (sd) dev(src, bytes, "copy src");
    if (sd && !dd) d2h_bytes_ += bytes;
    if (!sd) {  // read now, write in stream order
      auto snap = std::make_shared<std::vector<unsigned char>>(
          static_cast<const unsigned char *>(src),
          static_cast<const unsigned char *>(src) + bytes);
      enqueue([=] { std::memcpy(dst, snap->data(), bytes); });
    } else {
      enqueue([=] { std::memcpy(dst, src, bytes); });
    }
  }
  void sync() override {
    std::vector<std::function<void()>> q;
    q.swap(queue_);
    for (auto &f : q) f();
    ops_run_ += q.size();
  }

  void gather(const float *table, int64_t table_rows, int64_t row_stride,
              int64_t dim, const int64_t *rows, size_t n, float *out) override {
    if (dim <= 0 || row_stride < dim) die("gather: bad dim/stride");
    dev(rows, n * 8, "gather rows");
    dev(out, n * dim * 4, "gather out");
    enqueue([=] {
      for (size_t i = 0; i < n; ++i) {
        int64_t r = rows[i];
        bool in = r >= 0 && r < table_rows;
        if (in) dev(table + r * row_stride, dim * 4, "gather table row");
        for (int64_t d = 0; d < dim; ++d)
          out[i * dim + d] = in ? table[r * row_stride + d] : 0.0f;
      }
    });
  }
  void segment_sum(const float *grads, int64_t dim, const int64_t *order,
                   const int64_t *seg, const int64_t *num_unique,
                   size_t max_segments, float *out) override {
    dev(num_unique, 8, "segment_sum num_unique");
    dev(seg, (max_segments + 1) * 8, "segment_sum seg");
    dev(out, max_segments * dim * 4, "segment_sum out");
    enqueue([=] {
      int64_t segs = std::min<int64_t>(*num_unique, max_segments);
      for (int64_t u = 0; u < segs; ++u) {
        dev(order + seg[u], (seg[u + 1] - seg[u]) * 8, "segment_sum order");
        for (int64_t d = 0; d < dim; ++d) {
          int64_t j = seg[u];
          dev(grads + order[j] * dim, dim * 4, "segment_sum grads");
          float acc = grads[order[j] * dim + d];
          for (++j; j < seg[u + 1]; ++j) {
            dev(grads + order[j] * dim, dim * 4, "segment_sum grads");
            acc = acc + grads[order[j] * dim + d];
          }
          out[u * dim + d] = acc;
        }
      }
    });
  }
  void apply(const hb_cuda_optimizer &opt, float *records, int64_t record_words,
             int64_t table_rows, int64_t dim, const int64_t *rows,
             const int64_t *num_rows, size_t max_rows,
             const float *grads) override {
    if (record_words < hb::optmath::record_words(opt.kind, dim))
      die("apply: record_words too small");
    dev(num_rows, 8, "apply num_rows");
    dev(rows, max_rows * 8, "apply rows");
    dev(grads, max_rows * dim * 4, "apply grads");
    hb_cuda_optimizer o = opt;
    enqueue([=] {
      const hb::optmath::Hyper h = hb::optmath::make_hyper(
          o.learning_rate, o.epsilon, o.initial_accumulator, o.beta1, o.beta2,
          o.l1, o.l2, o.lr_power);
      int64_t count = std::min<int64_t>(*num_rows, max_rows);
      for (int64_t k = 0; k < count; ++k) {
        int64_t r = rows[k];
        if (r < 0 || r >= table_rows) continue;
        float *rec = records + r * record_words;
        dev(rec, record_words * 4, "apply record");
        float lr_t = 0.0f;
        int64_t t = 0;
        if (o.kind == HB_OPT_ADAM) {
          t = hb::optmath::record_steps(rec, dim) + 1;
          lr_t = hb::optmath::adam_lr(h, t);
        }
        for (int64_t c = 0; c < dim; ++c)
          hb::optmath::step_element(o.kind, rec, dim, c, grads[k * dim + c],
                                    lr_t, h);
        if (o.kind == HB_OPT_ADAM) hb::optmath::set_record_steps(rec, dim, t);
      }
    });
  }
  void wire_encode(const float *src, size_t n, hb_dtype dtype,
                   uint16_t *dst) override {
    if (dtype != HB_FLOAT16 && dtype != HB_BFLOAT16) die("wire_encode dtype");
    dev(src, n * 4, "wire_encode src");
    dev(dst, n * 2, "wire_encode dst");
    enqueue([=] { hb::emb::wire_encode(src, n, dtype, dst); });
  }
  void wire_decode(const uint16_t *src, size_t n, hb_dtype dtype,
                   float *dst) override {
    if (dtype != HB_FLOAT16 && dtype != HB_BFLOAT16) die("wire_decode dtype");
    dev(src, n * 2, "wire_decode src");
    dev(dst, n * 4, "wire_decode dst");
    enqueue([=] { hb::emb::wire_decode(src, n, dtype, dst); });
  }
  void dedup(const int64_t *ids, size_t n, int64_t *unique, int64_t *inverse,
             int64_t *num_unique, int64_t *order, int64_t *seg) override {
    if (n) dev(ids, n * 8, "dedup ids");
    dev(num_unique, 8, "dedup num_unique");
    if (unique && n) dev(unique, n * 8, "dedup unique");
    if (inverse && n) dev(inverse, n * 8, "dedup inverse");
    if (order && n) dev(order, n * 8, "dedup order");
    if (seg) dev(seg, (n + 1) * 8, "dedup seg");
    enqueue([=] {
      std::vector<int64_t> pos(n);
      for (size_t i = 0; i < n; ++i) pos[i] = static_cast<int64_t>(i);
      std::stable_sort(pos.begin(), pos.end(),
                       [&](int64_t a, int64_t b) { return ids[a] < ids[b]; });
      int64_t u = -1;
      for (size_t j = 0; j < n; ++j) {
        if (j == 0 || ids[pos[j]] != ids[pos[j - 1]]) {
          ++u;
          if (unique) unique[u] = ids[pos[j]];
          if (seg) seg[u] = static_cast<int64_t>(j);
        }
        if (inverse) inverse[pos[j]] = u;
        if (order) order[j] = pos[j];
      }
      *num_unique = u + 1;
      if (seg) seg[u + 1] = static_cast<int64_t>(n);
    });
  }
  void first_occurrence(const int64_t *ids, size_t n, const int64_t *inverse,
                        const int64_t *order, const int64_t *seg,
                        int64_t *unique, int64_t *first_inverse) override {
    if (n == 0) return;
    for (const void *p :
         {(const void *)ids, (const void *)inverse, (const void *)order,
          (const void *)unique, (const void *)first_inverse})
      dev(p, n * 8, "first_occurrence buffer");
    dev(seg, 8, "first_occurrence seg");
    enqueue([=] {
      // The contract, not the kernel's algorithm: number the sorted
      // segments (inverse) as they are first met in input order.
      std::vector<int64_t> number(n, -1);
      int64_t next = 0;
      for (size_t i = 0; i < n; ++i) {
        int64_t &k = number.at(static_cast<size_t>(inverse[i]));
        if (k < 0) {
          k = next++;
          unique[k] = ids[i];
        }
        first_inverse[i] = k;
      }
    });
  }
  void partition(const int64_t *ids, size_t n, const int64_t *num_ids,
                 int32_t world, int32_t mode, int64_t rows_per_shard,
                 int32_t *owner, int64_t *counts, int64_t *order) override {
    if (world <= 0 || (mode != HB_CUDA_PARTITION_MOD &&
                       (mode != HB_CUDA_PARTITION_DIV || rows_per_shard <= 0)))
      die("partition: world %d mode %d rows_per_shard %lld", world, mode,
          (long long)rows_per_shard);
    if (n) dev(ids, n * 8, "partition ids");
    if (n) dev(owner, n * 4, "partition owner");
    if (num_ids) dev(num_ids, 8, "partition num_ids");
    if (counts) dev(counts, world * 8, "partition counts");
    if (order && n) dev(order, n * 8, "partition order");
    enqueue([=] {
      int64_t valid = num_ids ? std::min<int64_t>(*num_ids, n) : n;
      if (counts) std::fill(counts, counts + world, 0);
      for (size_t i = 0; i < n; ++i) {
        int64_t id = ids[i];
        int32_t o = -1;
        if (static_cast<int64_t>(i) >= valid)
          o = -1;
        else if (mode == HB_CUDA_PARTITION_MOD)
          o = static_cast<int32_t>(static_cast<uint64_t>(id) %
                                   static_cast<uint64_t>(world));
        else if (id >= 0 && id / rows_per_shard < world)
          o = static_cast<int32_t>(id / rows_per_shard);
        owner[i] = o;
        if (counts && o >= 0) ++counts[o];
      }
      if (!order) return;
      std::vector<int64_t> pos(n);
      for (size_t i = 0; i < n; ++i) pos[i] = static_cast<int64_t>(i);
      auto key = [&](int64_t i) { return owner[i] < 0 ? world : owner[i]; };
      std::stable_sort(pos.begin(), pos.end(),
                       [&](int64_t a, int64_t b) { return key(a) < key(b); });
      std::copy(pos.begin(), pos.end(), order);
    });
  }
  void send_slots(const int64_t *unique, const int64_t *order,
                  const int64_t *num_unique, const int64_t *inverse, size_t n,
                  int64_t *send_ids, int64_t *slots) override {
    dev(num_unique, 8, "send_slots num_unique");
    if (n == 0) return;
    for (const void *p :
         {(const void *)unique, (const void *)order, (const void *)inverse,
          (const void *)send_ids, (const void *)slots})
      dev(p, n * 8, "send_slots buffer");
    enqueue([=] {
      const int64_t k = std::min<int64_t>(*num_unique, n);
      std::vector<int64_t> slot_of(static_cast<size_t>(k), -1);
      for (int64_t j = 0; j < k; ++j) {
        if (order[j] < 0 || order[j] >= k)
          die("send_slots: order[%lld] = %lld", (long long)j,
              (long long)order[j]);
        send_ids[j] = unique[order[j]];
        slot_of[static_cast<size_t>(order[j])] = j;
      }
      for (size_t i = 0; i < n; ++i) {
        if (inverse[i] < 0 || inverse[i] >= k || slot_of[inverse[i]] < 0)
          die("send_slots: inverse[%zu] = %lld", i, (long long)inverse[i]);
        slots[i] = slot_of[static_cast<size_t>(inverse[i])];
      }
    });
  }
  void find_out_of_range(const int64_t *ids, size_t n, int64_t num_rows,
                         int64_t *first_bad) override {
    if (n) dev(ids, n * 8, "find_out_of_range ids");
    dev(first_bad, 8, "find_out_of_range first_bad");
    enqueue([=] {
      size_t i = 0;
      while (i < n && ids[i] >= 0 && ids[i] < num_rows) ++i;
      *first_bad = static_cast<int64_t>(i);
    });
  }
  void local_rows(const int64_t *ids, size_t n, const int64_t *num_ids,
                  int32_t world, int32_t mode, int64_t rows_per_shard,
                  int64_t *rows) override {
    if (world <= 0 || (mode == HB_CUDA_PARTITION_DIV && rows_per_shard <= 0))
      die("local_rows: world %d mode %d", world, mode);
    if (n == 0) return;
    dev(ids, n * 8, "local_rows ids");
    dev(rows, n * 8, "local_rows rows");
    if (num_ids) dev(num_ids, 8, "local_rows num_ids");
    enqueue([=] {
      int64_t k = num_ids ? std::min<int64_t>(*num_ids, n) : n;
      for (int64_t i = 0; i < k; ++i)
        rows[i] = mode == HB_CUDA_PARTITION_DIV ? ids[i] % rows_per_shard
                                                : ids[i] / world;
    });
  }
  void idmap_build(int64_t *keys, int64_t *vals, int64_t capacity,
                   const int64_t *row_ids, int64_t rows) override {
    check_capacity(capacity, "idmap_build");
    if (rows < 0 || rows > capacity / 2)
      die("idmap_build: %lld rows for capacity %lld", (long long)rows,
          (long long)capacity);
    dev(keys, (capacity + 1) * 8, "idmap_build keys");
    dev(vals, (capacity + 1) * 8, "idmap_build vals");
    if (rows) dev(row_ids, rows * 8, "idmap_build row_ids");
    enqueue([=] {
      std::fill(keys, keys + capacity + 1, hb::idmap::kEmptyKey);
      std::fill(vals, vals + capacity + 1, hb::idmap::kNoRow);
      for (int64_t r = 0; r < rows; ++r) {
        int64_t s = slot_of(keys, capacity, row_ids[r]);
        if (s < 0) die("idmap_build: no free slot");
        vals[s] = r;
      }
    });
  }
  void idmap_assign(int64_t *keys, int64_t *vals, int64_t capacity,
                    const int64_t *ids, size_t n, const int64_t *num_ids,
                    int64_t *row_ids, int64_t row_capacity, int64_t *num_rows,
                    int64_t *first_new, int64_t *out_rows) override {
    check_capacity(capacity, "idmap_assign");
    dev(keys, (capacity + 1) * 8, "idmap_assign keys");
    dev(vals, (capacity + 1) * 8, "idmap_assign vals");
    dev(num_rows, 8, "idmap_assign num_rows");
    dev(first_new, 8, "idmap_assign first_new");
    if (num_ids) dev(num_ids, 8, "idmap_assign num_ids");
    if (n) {
      dev(ids, n * 8, "idmap_assign ids");
      dev(out_rows, n * 8, "idmap_assign out_rows");
      dev(row_ids, row_capacity * 8, "idmap_assign row_ids");
    }
    enqueue([=] {
      // The contract, sequentially: new ids numbered as first met.
      *first_new = *num_rows;
      const int64_t k = num_ids ? std::min<int64_t>(*num_ids, n) : n;
      bool ok = *num_rows >= 0;
      for (int64_t i = 0; i < k && ok; ++i) {
        int64_t s = slot_of(keys, capacity, ids[i]);
        if (s >= 0 && vals[s] < 0 && *num_rows < row_capacity) {
          vals[s] = (*num_rows)++;
          row_ids[vals[s]] = ids[i];
        }
        ok = s >= 0 && vals[s] >= 0;
        out_rows[i] = ok ? vals[s] : -1;
      }
      if (!ok) {
        *num_rows = -1;
        std::fill(out_rows, out_rows + k, -1);
      }
    });
  }
  void init_rows(const hb_cuda_init &init, float *records, int64_t record_words,
                 int64_t table_rows, const int64_t *row_ids,
                 const int64_t *first_row, const int64_t *end_row,
                 size_t max_rows) override {
    if (init.dim <= 0 ||
        record_words < hb::optmath::record_words(init.optimizer, init.dim))
      die("init_rows: dim %lld record_words %lld", (long long)init.dim,
          (long long)record_words);
    dev(first_row, 8, "init_rows first_row");
    dev(end_row, 8, "init_rows end_row");
    const hb_cuda_init in = init;
    enqueue([=] {
      const int64_t first = *first_row;
      const int64_t end =
          std::min<int64_t>(*end_row, first + static_cast<int64_t>(max_rows));
      const hb::initmath::Params p = {in.initializer, in.init_a, in.init_b,
                                      in.table_key};
      for (int64_t r = std::max<int64_t>(first, 0);
           r < std::min(end, table_rows); ++r) {
        dev(row_ids + r, 8, "init_rows row_ids");
        float *rec = records + r * record_words;
        dev(rec, record_words * 4, "init_rows record");
        const uint64_t key = hb::initmath::row_key(p, row_ids[r]);
        for (int64_t c = 0; c < in.dim; ++c)
          rec[c] = hb::initmath::weight(p, key, c);
        hb::optmath::init_slots(in.optimizer, rec, in.dim,
                                static_cast<float>(in.initial_accumulator));
      }
    });
  }
  void bags(const int64_t *offsets, const int64_t *lengths, int64_t batch,
            int64_t *bag, int64_t *info) override {
    if (batch < 0 || (batch > 0 && !offsets && !lengths))
      die("bags: batch %lld", (long long)batch);
    if (offsets) dev(offsets, (batch + 1) * 8, "bags offsets");
    if (!offsets && batch) dev(lengths, batch * 8, "bags lengths");
    dev(bag, (batch + 1) * 8, "bags bag");
    dev(info, 5 * 8, "bags info");
    enqueue([=] {
      int64_t e[5] = {0, offsets ? offsets[0] : 0, 0, 0, 0};
      bag[0] = 0;
      if (offsets && offsets[0] < 0) e[2] = 1, e[4] = offsets[0];
      for (int64_t b = 0; b < batch; ++b) {
        int64_t step = offsets ? offsets[b + 1] - offsets[b] : lengths[b];
        bool bad = offsets ? step < 0 : step < 0 || step >= (int64_t{1} << 32);
        if (bad && !e[2]) e[2] = offsets ? 2 : 3, e[3] = b, e[4] = step;
        bag[b + 1] = offsets ? offsets[b + 1] - offsets[0] : bag[b] + step;
      }
      if (e[2] == 2) e[4] = 0;
      if (e[2] == 3) e[4] = lengths[e[3]];
      e[0] = bag[batch];
      std::memcpy(info, e, sizeof e);
    });
  }
  void pool(const float *rows, int64_t dim, const int64_t *slot, const float *w,
            size_t n, const int64_t *bag, int64_t batch, int32_t pooling,
            float *out, int64_t out_stride) override {
    if (dim <= 0 || out_stride < dim || pooling < 0 || pooling > 3)
      die("pool: dim %lld pooling %d", (long long)dim, pooling);
    const size_t outs = pooling == 0 ? n : static_cast<size_t>(batch);
    if (outs == 0) return;
    if (n) dev(slot, n * 8, "pool slot");
    if (n && w) dev(w, n * 4, "pool weights");
    if (pooling) dev(bag, (batch + 1) * 8, "pool bag");
    dev(out, ((outs - 1) * out_stride + dim) * 4, "pool out");
    enqueue([=] {
      auto term = [&](size_t k, int64_t c) {
        dev(rows + slot[k] * dim, dim * 4, "pool row");
        float r = rows[slot[k] * dim + c];
        return w ? w[k] * r : r;
      };
      for (size_t o = 0; o < outs; ++o)
        for (int64_t c = 0; c < dim; ++c) {
          if (pooling == 0) {
            out[o * out_stride + c] = term(o, c);
            continue;
          }
          const int64_t lo = bag[o], hi = bag[o + 1];
          float acc = 0.0f;
          for (int64_t k = lo; k < hi; ++k)
            acc = k == lo ? term(k, c) : acc + term(k, c);
          if (hi > lo && pooling != 1) acc = acc / divisor(pooling, hi - lo);
          out[o * out_stride + c] = acc;
        }
    });
  }
  void expand_grads(const float *grad, int64_t grad_stride, int64_t dim,
                    const float *w, size_t n, const int64_t *bag, int64_t batch,
                    int32_t pooling, float *out) override {
    if (dim <= 0 || grad_stride < dim || pooling < 0 || pooling > 3)
      die("expand_grads: dim %lld pooling %d", (long long)dim, pooling);
    if (n == 0) return;
    if (w) dev(w, n * 4, "expand_grads weights");
    dev(out, n * dim * 4, "expand_grads out");
    const size_t rows = pooling == 0 ? n : static_cast<size_t>(batch);
    dev(grad, ((rows - 1) * grad_stride + dim) * 4, "expand_grads grad");
    if (pooling) dev(bag, (batch + 1) * 8, "expand_grads bag");
    enqueue([=] {
      for (int64_t b = 0; b < (pooling ? batch : 1); ++b) {
        const size_t lo = pooling ? bag[b] : 0, hi = pooling ? bag[b + 1] : n;
        for (size_t k = lo; k < hi; ++k)
          for (int64_t c = 0; c < dim; ++c) {
            const float g = grad[(pooling ? b : k) * grad_stride + c];
            float sc = w ? w[k] : 1.0f;
            if (pooling > 1) sc = sc / divisor(pooling, hi - lo);
            out[k * dim + c] = pooling <= 1 && !w ? g : g * sc;
          }
      }
    });
  }
  void ids_equal(const int64_t *a, const int64_t *b, size_t n,
                 int64_t *differ) override {
    dev(differ, 8, "ids_equal differ");
    if (n == 0) return;
    dev(a, n * 8, "ids_equal a");
    dev(b, n * 8, "ids_equal b");
    enqueue([=] {
      if (std::memcmp(a, b, n * 8)) *differ = 1;
    });
  }
  void alltoallv(const void *send, const int64_t *send_bytes, void *recv,
                 const int64_t *recv_bytes) override {
    int64_t sb = 0, rb = 0;
    for (int p = 0; p < x_->world(); ++p)
      sb += send_bytes[p], rb += recv_bytes[p];
    if (sb) dev(send, sb, "alltoallv send");
    if (rb) dev(recv, rb, "alltoallv recv");
    sync();  // the collective runs in stream order
    x_->alltoallv(send, send_bytes, recv, recv_bytes);
  }

 private:
  [[noreturn]] static void die(const char *fmt, ...)
      __attribute__((format(printf, 1, 2))) {
    va_list ap;
    va_start(ap, fmt);
    std::fprintf(stderr, "HostDeviceOps: ");
    std::vfprintf(stderr, fmt, ap);
    std::fprintf(stderr, "\n");
    va_end(ap);
    std::abort();
  }
  static float divisor(int32_t pooling, int64_t count) {
    float n = static_cast<float>(count);
    return pooling == 2 ? n : std::sqrt(n);
  }
  const Block *block_of(const void *p, size_t bytes) const {
    uintptr_t a = reinterpret_cast<uintptr_t>(p);
    auto it = blocks_.upper_bound(a);
    if (it == blocks_.begin()) return nullptr;
    --it;
    if (a < it->first || a + bytes > it->first + it->second.bytes ||
        a >= it->first + it->second.bytes)
      return nullptr;
    return &it->second;
  }
  void dev(const void *p, size_t bytes, const char *what) const {
    if (!block_of(p, bytes))
      die("%s: %zu bytes at %p are not inside one device block", what, bytes,
          p);
  }
  void enqueue(std::function<void()> f) { queue_.push_back(std::move(f)); }
  static void check_capacity(int64_t capacity, const char *what) {
    if (capacity < hb::idmap::kMinCapacity || (capacity & (capacity - 1)))
      die("%s: capacity %lld", what, (long long)capacity);
  }
  // The slot of id in a device id map (id_map_math.h), claimed when
  // absent; -1 when full.
  static int64_t slot_of(int64_t *keys, int64_t capacity, int64_t id) {
    if (id == hb::idmap::kEmptyKey) return capacity;
    const int bits = hb::idmap::capacity_bits(capacity);
    int64_t s = hb::idmap::home_slot(id, bits);
    for (int64_t probe = 0; probe < capacity;
         ++probe, s = (s + 1) & (capacity - 1)) {
      if (keys[s] == hb::idmap::kEmptyKey) keys[s] = id;
      if (keys[s] == id) return s;
    }
    return -1;
  }

  std::unique_ptr<hb::Exchange> x_;
  std::shared_ptr<Device> d_;
  std::map<uintptr_t, Block> &blocks_;
  std::vector<std::function<void()>> &queue_;
  size_t &ops_run_, &d2h_bytes_;
};

}  // namespace hbtest
