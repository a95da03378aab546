#include "embedding/device_table.h"

#include <algorithm>
#include <string>

#include "abi/error.h"
#include "common/log.h"
#include "embedding/init.h"

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

hb_cuda_init init_of(const Spec &s) {
  const uint64_t name_hash = fnv1a64(s.name.data(), s.name.size());
  return hb_cuda_init{s.initializer,
                      s.optimizer,
                      s.dim,
                      s.init_a,
                      s.init_b,
                      init_params(s, name_hash).table_key,
                      s.initial_accumulator};
}

}  // namespace

DeviceTable::DeviceTable(
    Table &host, const std::function<std::unique_ptr<DeviceOps>()> &make_ops)
    : host_(host),
      plan_(host.spec(), host.exchange().rank(), host.exchange().world()),
      dplan_(host.spec(), host.exchange().world()),
      opt_(optimizer_of(host.spec())),
      dim_(host.spec().dim),
      words_(host.shard().record_words()),
      wire_(host.spec().wire_dtype),
      map_(host.spec().name),
      init_(init_of(host.spec())) {
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
  dplan_.release(*ops_);
  map_.release(*ops_);
  for (DeviceBuf *b :
       {&recv_ids_, &rows_, &count_, &fa_, &fb_, &fc_, &wsend_, &wrecv_})
    b->release(*ops_);
}

std::vector<int64_t> DeviceTable::bytes_of(const int64_t *counts,
                                           size_t unit) const {
  std::vector<int64_t> b(static_cast<size_t>(host_.exchange().world()));
  for (size_t p = 0; p < b.size(); ++p)
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
  const Shard &sh = host_.shard();
  int64_t rows = sh.rows();
  ensure_records(rows);
  copy_records(0, rows, true);
  if (!host_.spec().dynamic()) return;
  std::vector<int64_t> ids;
  ids.reserve(static_cast<size_t>(rows));
  sh.for_each([&](int64_t id, const float *) { ids.push_back(id); });
  map_.load(*ops_, ids);  // row r of the shard is row r on the device
}

void DeviceTable::adopt_device_rows() {
  map_.settle(*ops_);
  Shard &sh = host_.shard();
  const int64_t have = sh.rows();
  if (map_.rows() < have)
    fail(HB_ERR_INTERNAL,
         "embedding '%s': the device map has %lld rows, the host shard %lld",
         host_.spec().name.c_str(), (long long)map_.rows(), (long long)have);
  // Created in device order, the host shard gives them the device's rows
  // (their host initialization is overwritten by the download).
  const std::vector<int64_t> ids = map_.ids(*ops_, have);
  for (size_t j = 0; j < ids.size(); ++j) {
    const int64_t want = have + static_cast<int64_t>(j);
    if (sh.index(ids[j]) != want)
      fail(HB_ERR_INTERNAL,
           "embedding '%s': device row %lld (id %lld) is not row %lld of the "
           "host shard",
           host_.spec().name.c_str(), (long long)want, (long long)ids[j],
           (long long)want);
  }
}

void DeviceTable::download() {
  ops_->make_current();
  if (host_.spec().dynamic()) adopt_device_rows();
  copy_records(0, host_.shard().rows(), false);
  ops_->sync();
}

void DeviceTable::check_device(const int64_t *ids, size_t n, const void *data,
                               const char *what) {
  if (n == 0 || !ids || !data) return;  // check_args names the NULL
  const char *data_name =
      std::string(what) == "hb_embedding_lookup" ? "out" : "grads";
  const Spec &s = host_.spec();
  HB_CHECK_ARG(ops_->is_device(ids) && ops_->is_device(data),
               "%s('%s'): ids and %s must be CUDA device pointers on a GPU "
               "table (device %d); %s is host memory",
               what, s.name.c_str(), data_name, s.device,
               ops_->is_device(ids) ? data_name : "ids");
}

void DeviceTable::route_ids() {
  const int64_t *sc = plan_.send_counts().data(),
                *rc = plan_.recv_counts().data();
  size_t nrecv = static_cast<size_t>(plan_.recv_total());
  int64_t *d_recv = recv_ids_.ensure<int64_t>(*ops_, nrecv);
  ops_->alltoallv(dplan_.send_ids(), bytes_of(sc, 8).data(), d_recv,
                  bytes_of(rc, 8).data());
}

void DeviceTable::start_step(const int64_t *ids, size_t n, const void *data,
                             const char *what, bool sum_locally) {
  Outcome o;
  o.sig = host_.call(sum_locally ? kCallApply : kCallLookup);
  try {
    ops_->make_current();
    plan_.check_args(ids, n, data, what);
    check_device(ids, n, data, what);
    int64_t bad = dplan_.plan(*ops_, ids, n);
    // The device map's row count, while the stream is idle after the
    // plan's wait (a lost map fails the step on every rank: the headers).
    if (host_.spec().dynamic()) map_.settle(*ops_);
    if (bad >= 0) {  // the first bad id in batch order, as the host plan
      int64_t id = 0;
      ops_->copy(&id, ids + bad, sizeof id);
      ops_->sync();
      plan_.reject_id(id, what);
    }
    plan_.set_send_counts(dplan_.send_counts());
    if (sum_locally) dplan_.group_by_slot(*ops_);
  } catch (...) {
    o.capture();
  }
  plan_.agree_counts(host_.exchange(), o, what);
  route_ids();
}

float *DeviceTable::exchange_rows(const float *send, const int64_t *scount,
                                  DeviceBuf &into, const int64_t *rcount) {
  const int world = host_.exchange().world();
  size_t ns = 0, nr = 0;
  for (int p = 0; p < world; ++p) ns += static_cast<size_t>(scount[p]);
  for (int p = 0; p < world; ++p) nr += static_cast<size_t>(rcount[p]);
  float *recv = into.ensure<float>(*ops_, nr * dim_);
  if (wire_ == HB_FLOAT32) {
    const size_t row = static_cast<size_t>(dim_) * sizeof(float);
    ops_->alltoallv(send, bytes_of(scount, row).data(), recv,
                    bytes_of(rcount, row).data());
    return recv;
  }
  const size_t row = static_cast<size_t>(dim_) * sizeof(uint16_t);
  uint16_t *ws = wsend_.ensure<uint16_t>(*ops_, ns * dim_);
  uint16_t *wr = wrecv_.ensure<uint16_t>(*ops_, nr * dim_);
  if (ns) ops_->wire_encode(send, ns * dim_, wire_, ws);
  ops_->alltoallv(ws, bytes_of(scount, row).data(), wr,
                  bytes_of(rcount, row).data());
  if (nr) ops_->wire_decode(wr, nr * dim_, wire_, recv);
  return recv;
}

const int64_t *DeviceTable::rows_of(const int64_t *ids, size_t n,
                                    const int64_t *count) {
  int64_t *d_rows = rows_.ensure<int64_t>(*ops_, n);
  if (!host_.spec().dynamic()) {
    dplan_.local_rows(*ops_, ids, n, count, d_rows);
    return d_rows;
  }
  // The device map gives new ids rows in first-occurrence order (the host
  // shard's) and the records are initialized there: no id leaves the
  // device. (settle: a no-op after start_step's.)
  map_.settle(*ops_);
  ensure_records(map_.rows_bound() + static_cast<int64_t>(n));
  map_.assign(*ops_, ids, n, count, d_rows);
  ops_->init_rows(init_, records_, words_, capacity_, map_.row_ids(),
                  map_.first_new(), map_.num_rows(), n);
  return d_rows;
}

void DeviceTable::gather_received(const int64_t *recv_ids, size_t nrecv,
                                  float *rows) {
  const int64_t *d_rows = rows_of(recv_ids, nrecv, nullptr);
  if (nrecv)
    ops_->gather(records_, capacity_, words_, dim_, d_rows, nrecv, rows);
}

void DeviceTable::lookup(const int64_t *ids, size_t n, float *out) {
  start_step(ids, n, out, "hb_embedding_lookup", false);

  // Owner: the rows of every received id, in received order.
  const size_t nrecv = static_cast<size_t>(plan_.recv_total()),
               nsend = dplan_.send_total();
  float *d_found = fa_.ensure<float>(*ops_, nrecv * dim_);
  gather_received(recv_ids_.get<int64_t>(), nrecv, d_found);
  // Back to the requesters, in the order they sent the ids.
  float *d_back = exchange_rows(d_found, plan_.recv_counts().data(), fb_,
                                plan_.send_counts().data());
  // out[i] = the row of the send slot of ids[i].
  if (n)
    ops_->gather(d_back, static_cast<int64_t>(nsend), dim_, dim_,
                 dplan_.slots(), n, out);
}

void DeviceTable::apply_gradients(const int64_t *ids, size_t n,
                                  const float *grads) {
  start_step(ids, n, grads, "hb_embedding_apply_gradients", true);

  const size_t nrecv = static_cast<size_t>(plan_.recv_total()),
               nsend = dplan_.send_total();
  float *d_partial = fa_.ensure<float>(*ops_, nsend * dim_);
  if (nsend) {  // partial sums in send order, duplicates in batch order
    const DeviceGrouping &g = dplan_.slot_groups();
    ops_->segment_sum(grads, dim_, g.order.get<int64_t>(), g.seg.get<int64_t>(),
                      g.count.get<int64_t>(), nsend, d_partial);
  }
  float *d_recv = exchange_rows(d_partial, plan_.send_counts().data(), fb_,
                                plan_.recv_counts().data());
  apply_received(recv_ids_.get<int64_t>(), nrecv, d_recv, plan_.sources());
}

void DeviceTable::apply_received(const int64_t *recv_ids, size_t nrecv,
                                 const float *grads, int sources) {
  if (nrecv == 0) return;
  // Sum the ranks' partial sums of each id in rank order (received data is
  // packed by source rank), then one optimizer step per id.
  const float *d_grads = grads;
  const int64_t *d_rows, *d_count;
  if (sources <= 1) {  // already unique
    d_rows = rows_of(recv_ids, nrecv, nullptr);
    int64_t *c = count_.ensure<int64_t>(*ops_, 1);
    const int64_t k = static_cast<int64_t>(nrecv);
    ops_->copy(c, &k, sizeof k);
    d_count = c;
  } else {
    dplan_.owner_dedup(*ops_, recv_ids, nrecv);
    const DeviceDedup &u = dplan_.owner();
    const DeviceGrouping &g = dplan_.owner_groups();
    float *d_sum = fc_.ensure<float>(*ops_, nrecv * dim_);
    ops_->segment_sum(grads, dim_, g.order.get<int64_t>(), g.seg.get<int64_t>(),
                      g.count.get<int64_t>(), nrecv, d_sum);
    d_grads = d_sum;
    d_count = u.count.get<int64_t>();
    d_rows = rows_of(u.unique.get<int64_t>(), nrecv, d_count);
  }
  ops_->apply(opt_, records_, words_, capacity_, dim_, d_rows, d_count, nrecv,
              d_grads);
}

}  // namespace emb
}  // namespace hb
