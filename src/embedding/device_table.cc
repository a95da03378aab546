#include "embedding/device_table.h"

#include <algorithm>
#include <string>

#include "abi/error.h"
#include "common/log.h"

namespace hb {
namespace emb {
namespace {

hb_cuda_optimizer optimizer_of(const Spec &s) {
  hb_cuda_optimizer o = {};
  o.kind = s.optimizer;
  o.learning_rate = s.learning_rate;
  o.initial_accumulator = s.initial_accumulator;
  o.beta1 = s.beta1;
  o.beta2 = s.beta2;
  o.epsilon = s.epsilon;
  o.l1 = s.l1;
  o.l2 = s.l2;
  o.lr_power = s.lr_power;
  return o;
}

}  // namespace

DeviceTable::DeviceTable(
    Table &host, const std::function<std::unique_ptr<DeviceOps>()> &make_ops)
    : host_(host),
      plan_(host.spec(), host.exchange().rank(), host.exchange().world()),
      opt_(optimizer_of(host.spec())),
      dim_(host.spec().dim),
      words_(host.shard().record_words()),
      wire_(host.spec().wire_dtype) {
  const Spec &s = host_.spec();
  std::string what = "hb_embedding_create('" + s.name + "')";
  Outcome o;
  try {
    ops_ = make_ops();
    ops_->make_current();
    upload();
  } catch (...) {
    o.capture();
  }
  try {
    agree(host_.exchange(), o, what.c_str());
  } catch (...) {
    if (ops_) release();
    throw;
  }
}

DeviceTable::~DeviceTable() {
  if (ops_) release();
}

void DeviceTable::release() {
  // Bounded: after a failure the communicator is aborted, so nothing the
  // frees could wait for is still running.
  try {
    ops_->make_current();
    ops_->sync();
  } catch (const std::exception &e) {
    HB_LOG_WARN("embedding '%s': freeing device memory after: %s",
                host_.spec().name.c_str(), e.what());
  }
  if (records_) ops_->free(records_);
  records_ = nullptr;
  capacity_ = 0;
  for (Buf *b : {&send_ids_, &recv_ids_, &rows_, &map_, &order_, &seg_, &count_,
                 &fa_, &fb_, &fc_, &wsend_, &wrecv_}) {
    if (b->p) ops_->free(b->p);
    *b = Buf();
  }
}

template <class T>
T *DeviceTable::ensure(Buf &b, size_t count) {
  size_t need = std::max<size_t>(count * sizeof(T), 64);
  if (need > b.bytes) {
    size_t bytes = std::max(need, b.bytes * 2);
    if (b.p) {
      ops_->sync();  // earlier work may still use it
      ops_->free(b.p);
      b.p = nullptr;
      b.bytes = 0;
    }
    b.p = ops_->alloc(bytes);
    b.bytes = bytes;
  }
  return static_cast<T *>(b.p);
}

template <class T>
T *DeviceTable::upload_vec(Buf &b, const std::vector<T> &v) {
  T *d = ensure<T>(b, v.size());
  if (!v.empty()) ops_->copy(d, v.data(), v.size() * sizeof(T));
  return d;
}

std::vector<int64_t> DeviceTable::bytes_of(const std::vector<int64_t> &counts,
                                           size_t unit) const {
  std::vector<int64_t> b(counts.size());
  for (size_t p = 0; p < counts.size(); ++p)
    b[p] = counts[p] * static_cast<int64_t>(unit);
  return b;
}

void DeviceTable::ensure_records(int64_t rows) {
  if (rows <= capacity_ && records_) return;
  int64_t cap = std::max<int64_t>({rows, capacity_ * 2, 64});
  float *grown = static_cast<float *>(
      ops_->alloc(static_cast<size_t>(cap * words_) * sizeof(float)));
  if (records_) {
    ops_->copy(grown, records_,
               static_cast<size_t>(capacity_ * words_) * sizeof(float));
    ops_->sync();
    ops_->free(records_);
  }
  records_ = grown;
  capacity_ = cap;
}

void DeviceTable::copy_records(int64_t from, int64_t to, bool to_device) {
  Shard &sh = host_.shard();
  for (int64_t idx = from; idx < to;) {
    int64_t span = std::min(sh.contiguous(idx), to - idx);
    size_t bytes = static_cast<size_t>(span * words_) * sizeof(float);
    float *dev = records_ + idx * words_;
    if (to_device)
      ops_->copy(dev, sh.record_at(idx), bytes);
    else
      ops_->copy(sh.record_at(idx), dev, bytes);
    idx += span;
  }
}

void DeviceTable::upload() {
  ops_->make_current();
  int64_t rows = host_.shard().rows();
  ensure_records(rows);
  copy_records(0, rows, true);
}

void DeviceTable::download() {
  ops_->make_current();
  copy_records(0, host_.shard().rows(), false);
  ops_->sync();
}

const int64_t *DeviceTable::download_ids(const int64_t *ids, size_t n,
                                         const void *data, const char *what) {
  if (n == 0 || !ids || !data) return ids;  // prepare() names the NULL
  const char *data_name =
      std::string(what) == "hb_embedding_lookup" ? "out" : "grads";
  const Spec &s = host_.spec();
  HB_CHECK_ARG(ops_->is_device(ids) && ops_->is_device(data),
               "%s('%s'): ids and %s must be CUDA device pointers on a GPU "
               "table (device %d); %s is host memory",
               what, s.name.c_str(), data_name, s.device,
               ops_->is_device(ids) ? data_name : "ids");
  h_ids_.resize(n);
  ops_->copy(h_ids_.data(), ids, n * sizeof(int64_t));
  ops_->sync();
  return h_ids_.data();
}

void DeviceTable::route_ids() {
  const std::vector<int64_t> &sc = plan_.send_counts(),
                             &rc = plan_.recv_counts();
  int64_t *d_send = upload_vec(send_ids_, plan_.send_ids());
  size_t nrecv = static_cast<size_t>(plan_.recv_total());
  int64_t *d_recv = ensure<int64_t>(recv_ids_, nrecv);
  ops_->alltoallv(d_send, bytes_of(sc, 8).data(), d_recv,
                  bytes_of(rc, 8).data());
  h_recv_ids_.resize(nrecv);
  if (nrecv) ops_->copy(h_recv_ids_.data(), d_recv, nrecv * sizeof(int64_t));
  ops_->sync();
}

void DeviceTable::start_step(const int64_t *ids, size_t n, const void *data,
                             const char *what, bool sum_locally) {
  Outcome o;
  o.sig = host_.call(sum_locally ? kCallApply : kCallLookup);
  try {
    ops_->make_current();
    plan_.prepare(download_ids(ids, n, data, what), n, data, what);
    if (sum_locally)  // partial sums in send order: positions by send slot
      group_by_slot(plan_.local().inverse().data(), n, plan_.pos().data(),
                    plan_.send_ids().size(), &h_order_, &h_seg_);
  } catch (...) {
    o.capture();
  }
  plan_.agree_counts(host_.exchange(), o, what);
  route_ids();
}

float *DeviceTable::exchange_rows(const float *send,
                                  const std::vector<int64_t> &scount, Buf &into,
                                  const std::vector<int64_t> &rcount) {
  size_t ns = 0, nr = 0;
  for (int64_t c : scount) ns += static_cast<size_t>(c);
  for (int64_t c : rcount) nr += static_cast<size_t>(c);
  float *recv = ensure<float>(into, nr * dim_);
  if (wire_ == HB_FLOAT32) {
    const size_t row = static_cast<size_t>(dim_) * sizeof(float);
    ops_->alltoallv(send, bytes_of(scount, row).data(), recv,
                    bytes_of(rcount, row).data());
    return recv;
  }
  const size_t row = static_cast<size_t>(dim_) * sizeof(uint16_t);
  uint16_t *ws = ensure<uint16_t>(wsend_, ns * dim_);
  uint16_t *wr = ensure<uint16_t>(wrecv_, nr * dim_);
  if (ns) ops_->wire_encode(send, ns * dim_, wire_, ws);
  ops_->alltoallv(ws, bytes_of(scount, row).data(), wr,
                  bytes_of(rcount, row).data());
  if (nr) ops_->wire_decode(wr, nr * dim_, wire_, recv);
  return recv;
}

void DeviceTable::sum_segments(const float *src, size_t nseg, float *out) {
  const int64_t *d_order = upload_vec(order_, h_order_);
  const int64_t *d_seg = upload_vec(seg_, h_seg_);
  const int64_t *d_count =
      upload_vec(count_, std::vector<int64_t>{static_cast<int64_t>(nseg)});
  ops_->segment_sum(src, dim_, d_order, d_seg, d_count, nseg, out);
}

void DeviceTable::map_rows(const int64_t *ids, size_t n) {
  Shard &sh = host_.shard();
  int64_t before = sh.rows();
  h_rows_.resize(n);
  for (size_t j = 0; j < n; ++j) h_rows_[j] = sh.index(ids[j]);
  int64_t after = sh.rows();
  if (after > before) {  // dynamic rows created on first touch
    ensure_records(after);
    copy_records(before, after, true);
  }
}

void DeviceTable::lookup(const int64_t *ids, size_t n, float *out) {
  start_step(ids, n, out, "hb_embedding_lookup", false);

  // Owner: the rows of every received id, in received order.
  const size_t nrecv = h_recv_ids_.size(), nsend = plan_.send_ids().size();
  map_rows(h_recv_ids_.data(), nrecv);
  int64_t *d_rows = upload_vec(rows_, h_rows_);
  float *d_found = ensure<float>(fa_, nrecv * dim_);
  if (nrecv)
    ops_->gather(records_, capacity_, words_, dim_, d_rows, nrecv, d_found);
  // Back to the requesters, in the order they sent the ids.
  float *d_back =
      exchange_rows(d_found, plan_.recv_counts(), fb_, plan_.send_counts());
  // out[i] = the row of the send position of ids[i].
  const std::vector<uint32_t> &inv = plan_.local().inverse();
  const std::vector<uint32_t> &pos = plan_.pos();
  h_map_.resize(n);
  for (size_t i = 0; i < n; ++i) h_map_[i] = pos[inv[i]];
  int64_t *d_map = upload_vec(map_, h_map_);
  if (n)
    ops_->gather(d_back, static_cast<int64_t>(nsend), dim_, dim_, d_map, n,
                 out);
}

void DeviceTable::apply_gradients(const int64_t *ids, size_t n,
                                  const float *grads) {
  start_step(ids, n, grads, "hb_embedding_apply_gradients", true);

  const size_t nrecv = h_recv_ids_.size(), nsend = plan_.send_ids().size();
  float *d_partial = ensure<float>(fa_, nsend * dim_);
  if (nsend) sum_segments(grads, nsend, d_partial);
  float *d_recv =
      exchange_rows(d_partial, plan_.send_counts(), fb_, plan_.recv_counts());
  if (nrecv == 0) return;

  // Owner: sum the ranks' partial sums of each id in rank order (received
  // data is packed by source rank), then one optimizer step per id.
  const float *d_grads = d_recv;
  size_t nrows = nrecv;
  int64_t nu = plan_.owner_dedup(h_recv_ids_.data(), nrecv);
  if (nu < 0) {
    map_rows(h_recv_ids_.data(), nrecv);
  } else {
    nrows = static_cast<size_t>(nu);
    group_by_slot(plan_.owner().inverse().data(), nrecv, nullptr, nrows,
                  &h_order_, &h_seg_);
    float *d_sum = ensure<float>(fc_, nrows * dim_);
    sum_segments(d_recv, nrows, d_sum);
    d_grads = d_sum;
    map_rows(plan_.owner().unique().data(), nrows);
  }
  int64_t *d_rows = upload_vec(rows_, h_rows_);
  const int64_t *d_nrows =
      upload_vec(count_, std::vector<int64_t>{static_cast<int64_t>(nrows)});
  ops_->apply(opt_, records_, words_, capacity_, dim_, d_rows, d_nrows, nrows,
              d_grads);
}

}  // namespace emb
}  // namespace hb
