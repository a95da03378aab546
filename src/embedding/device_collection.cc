#include "embedding/device_collection.h"

#include <cstring>
#include <optional>
#include <string>

#include "abi/error.h"
#include "common/log.h"
#include "timeline/timeline.h"

namespace hb {
namespace emb {
namespace {

DeviceOps &first_ops(const std::vector<Feature> &fs) {
  for (const Feature &f : fs)
    if (f.device) return f.device->ops();
  fail(HB_ERR_INVALID_ARGUMENT,
       "hb_collection_create: a device collection without GPU tables");
}

}  // namespace

DeviceCollection::DeviceCollection(std::vector<Feature> features,
                                   std::unique_ptr<Exchange> x)
    : CollectionBase(std::move(features), std::move(x), /*device=*/true),
      ops_(first_ops(features_)) {
  const size_t F = features_.size();
  for (std::vector<Slot> *ss : {&slots_, &spare_slots_}) {
    ss->reserve(tables_.size());
    for (size_t t = 0; t < tables_.size(); ++t)
      ss->emplace_back(features_[slot_features_[t][0]].device, world_);
  }
  bags_.resize(F), spare_bags_.resize(F);
  ids_.assign(F, nullptr), spare_ids_.assign(F, nullptr);
  w_.assign(F, nullptr), spare_w_.assign(F, nullptr);
  planned_n_.assign(F, 0), spare_planned_n_.assign(F, 0);
  h_info_.assign(5 * F, 0);
}

void DeviceCollection::swap_state() {
  CollectionBase::swap_state();
  slots_.swap(spare_slots_);
  bags_.swap(spare_bags_);
  ids_.swap(spare_ids_);
  w_.swap(spare_w_);
  planned_n_.swap(spare_planned_n_);
  std::swap(batch_, spare_batch_);
}

DeviceCollection::~DeviceCollection() { release(); }

void DeviceCollection::release() {
  // Bounded: after a failure the communicator is aborted, so nothing the
  // frees could wait for is still running.
  try {
    ops_.make_current();
    ops_.sync();
  } catch (const std::exception &e) {
    HB_LOG_WARN("embedding collection: freeing device memory after: %s",
                e.what());
  }
  for (std::vector<Slot> *ss : {&slots_, &spare_slots_})
    for (Slot &s : *ss) {
      s.plan.release(ops_);
      for (DeviceBuf *b : {&s.ids, &s.recv_ids, &s.rows, &s.partial, &s.owner})
        b->release(ops_);
    }
  for (std::vector<DeviceBuf> *bs : {&bags_, &spare_bags_})
    for (DeviceBuf &b : *bs) b.release(ops_);
  for (DeviceBuf *b : {&info_, &flag_, &sbuf_, &rbuf_}) b->release(ops_);
}

void DeviceCollection::check_device(const void *p, const char *what,
                                    const char *name, size_t f) {
  HB_CHECK_ARG(!p || ops_.is_device(p),
               "%s: %s[%zu] (feature '%s') is host memory; a collection of "
               "GPU tables takes device buffers (device %d)",
               what, name, f, features_[f].name.c_str(), ops_.device());
}

void DeviceCollection::read_bags(const JaggedBatch &in, const char *what,
                                 const void *pooled, const void *const *rows) {
  ops_.make_current();
  const int64_t B = in.batch;
  const size_t F = features_.size();
  batch_ = B;
  // Only buffers the call touches are checked (an empty batch's may be
  // anything).
  HB_CHECK_ARG(
      B == 0 || pooled_width_ == 0 || !pooled || ops_.is_device(pooled),
      "%s: the pooled buffer is host memory; a collection of GPU "
      "tables takes device buffers (device %d)",
      what, ops_.device());
  int64_t *info = info_.ensure<int64_t>(ops_, 5 * F);
  std::fill(h_info_.begin(), h_info_.end(), 0);
  if (B > 0) {
    for (size_t f = 0; f < F; ++f) {
      const int64_t *off = in.offsets ? in.offsets[f] : nullptr;
      const int64_t *len = in.offsets ? nullptr : in.lengths[f];
      check_device(off, what, "offsets", f);
      check_device(len, what, "lengths", f);
      ops_.bags(off, len, B, bags_[f].ensure<int64_t>(ops_, B + 1),
                info + 5 * f);
    }
    // The one wait of the bags: counts, first ids and errors.
    ops_.copy(h_info_.data(), info, 5 * F * sizeof(int64_t));
    ops_.sync();
  }
  for (size_t f = 0; f < F; ++f) {
    const int64_t *e = &h_info_[5 * f];
    if (e[2]) bag_error(what, f, e[2], e[3], e[4]);
    n_[f] = static_cast<size_t>(e[0]);
    base_[f] = e[1];
    const bool has = n_[f] && in.ids && in.ids[f];
    if (has) check_device(in.ids[f], what, "ids", f);
    ids_[f] = has ? in.ids[f] + base_[f] : nullptr;
    const float *w = has && in.weights ? in.weights[f] : nullptr;
    if (w) check_device(w, what, "weights", f);
    w_[f] = w ? w + base_[f] : nullptr;
    if (n_[f] && rows && features_[f].pooling == HB_POOLING_NONE)
      check_device(rows[f], what, "the unpooled rows", f);
  }
}

void DeviceCollection::plan_tables(const char *what) {
  for (size_t t = 0; t < tables_.size(); ++t) {
    Slot &s = slots_[t];
    size_t n = 0;
    for (size_t f : slot_features_[t]) n += n_[f];
    int64_t *ids = s.ids.ensure<int64_t>(ops_, n);
    for (size_t f : slot_features_[t]) {
      if (n_[f]) ops_.copy(ids + start_[f], ids_[f], n_[f] * 8);
      planned_n_[f] = n_[f];
    }
    plans_[t].check_args(ids, n, ids, what);
    int64_t bad = s.plan.plan(ops_, ids, n);
    if (bad >= 0) {  // the first bad id in batch order, as the host plan's
      int64_t id = 0;
      ops_.copy(&id, ids + bad, sizeof id);
      ops_.sync();
      plans_[t].reject_id(id, what);
    }
    plans_[t].set_send_counts(s.plan.send_counts());
  }
}

void DeviceCollection::size_payloads() {
  sbuf_.ensure<unsigned char>(ops_, static_cast<size_t>(stotal_));
  rbuf_.ensure<unsigned char>(ops_, static_cast<size_t>(rtotal_));
}

void DeviceCollection::exchange() {
  count_round();
  ops_.alltoallv(sbuf_.get<void>(), sb_.data(), rbuf_.get<void>(), rb_.data());
}

void DeviceCollection::pack(size_t t, const float *rows,
                            const std::vector<int64_t> &counts) {
  const hb_dtype wire = tables_[t]->spec().wire_dtype;
  const int64_t dim = tables_[t]->spec().dim;
  unsigned char *sbuf = sbuf_.get<unsigned char>();
  int64_t from = 0;
  for (int p = 0; p < world_; ++p) {
    const size_t n = static_cast<size_t>(counts[p] * dim);
    const float *src = rows + from * dim;
    // float32 sections may sit at any even offset: copied, never read by
    // a kernel as floats; 16-bit sections are 2-aligned (all sizes are
    // even).
    if (n && wire == HB_FLOAT32)
      ops_.copy(sbuf + sat(p, t), src, n * 4);
    else if (n)
      ops_.wire_encode(src, n, wire,
                       reinterpret_cast<uint16_t *>(sbuf + sat(p, t)));
    from += counts[p];
  }
  // The rows of unique ids to other ranks: what the dedup bounds.
  stats_.dedup_bound_bytes += plans_[t].remote_sent() * row_bytes_[t];
}

void DeviceCollection::unpack(size_t t, const std::vector<int64_t> &counts,
                              float *rows) {
  const hb_dtype wire = tables_[t]->spec().wire_dtype;
  const int64_t dim = tables_[t]->spec().dim;
  const unsigned char *rbuf = rbuf_.get<unsigned char>();
  int64_t to = 0;
  for (int p = 0; p < world_; ++p) {
    const size_t n = static_cast<size_t>(counts[p] * dim);
    float *dst = rows + to * dim;
    if (n && wire == HB_FLOAT32)
      ops_.copy(dst, rbuf + rat(p, t), n * 4);
    else if (n)
      ops_.wire_decode(reinterpret_cast<const uint16_t *>(rbuf + rat(p, t)), n,
                       wire, dst);
    to += counts[p];
  }
}

float *DeviceCollection::owner_rows(size_t t) {
  return slots_[t].owner.ensure<float>(ops_,
                                       received(t) * tables_[t]->spec().dim);
}

void DeviceCollection::route_ids() {
  const size_t T = tables_.size();
  layouts(0, std::vector<size_t>(T, 8), /*back=*/false);
  size_payloads();
  unsigned char *sbuf = sbuf_.get<unsigned char>();
  for (size_t t = 0; t < T; ++t) {
    const StepPlan &pl = plans_[t];
    int64_t from = 0;
    for (int p = 0; p < world_; ++p) {
      const int64_t c = pl.send_counts()[p];
      if (c)
        ops_.copy(sbuf + sat(p, t), slots_[t].plan.send_ids() + from, c * 8);
      from += c;
    }
  }
  exchange();
  const unsigned char *rbuf = rbuf_.get<unsigned char>();
  for (size_t t = 0; t < T; ++t) {
    const StepPlan &pl = plans_[t];
    int64_t *recv = slots_[t].recv_ids.ensure<int64_t>(ops_, pl.recv_total());
    int64_t to = 0;
    for (int p = 0; p < world_; ++p) {
      const int64_t c = pl.recv_counts()[p];
      if (c) ops_.copy(recv + to, rbuf + rat(p, t), c * 8);
      to += c;
    }
    stats_.owner_unique += static_cast<uint64_t>(pl.recv_total());
    stats_.unique_ids += slots_[t].plan.send_total();
    stats_.dedup_bound_bytes += pl.remote_sent() * 8;
  }
}

void DeviceCollection::rows_and_pool(const JaggedBatch &in, float *out,
                                     float *const *unpooled) {
  std::optional<timeline::Span> phase;
  phase.emplace("emb.rows", "embedding");
  const size_t T = tables_.size();
  layouts(0, row_bytes_, /*back=*/true);
  size_payloads();
  for (size_t t = 0; t < T; ++t) {
    float *found = owner_rows(t);
    slots_[t].dt->gather_received(slots_[t].recv_ids.get<int64_t>(),
                                  received(t), found);
    pack(t, found, plans_[t].recv_counts());
  }
  exchange();

  // Requester: each table's rows in send order, then pooled per feature.
  phase.emplace("emb.pool", "embedding");
  for (size_t t = 0; t < T; ++t) {
    Slot &s = slots_[t];
    const int64_t dim = tables_[t]->spec().dim;
    unpack(t, plans_[t].send_counts(),
           s.rows.ensure<float>(ops_, s.plan.send_total() * dim));
  }
  for (size_t f = 0; f < features_.size(); ++f) {
    Slot &s = slots_[slot_of_[f]];
    const int64_t dim = tables_[slot_of_[f]]->spec().dim;
    const int32_t pooling = features_[f].pooling;
    const bool none = pooling == HB_POOLING_NONE;
    if (none ? n_[f] == 0 : in.batch == 0) continue;
    ops_.pool(s.rows.get<float>(), dim, s.plan.slots() + start_[f], w_[f],
              n_[f], bags_[f].get<int64_t>(), in.batch, pooling,
              none ? unpooled[f] : out + column_[f],
              none ? dim : pooled_width_);
  }
}

bool DeviceCollection::same_ids() {
  for (size_t f = 0; f < features_.size(); ++f)
    if (n_[f] != planned_n_[f]) return false;
  int64_t *flag = flag_.ensure<int64_t>(ops_, 1);
  const int64_t zero = 0;
  ops_.copy(flag, &zero, sizeof zero);
  for (size_t f = 0; f < features_.size(); ++f)
    ops_.ids_equal(ids_[f], slots_[slot_of_[f]].ids.get<int64_t>() + start_[f],
                   n_[f], flag);
  int64_t differ = 1;
  ops_.copy(&differ, flag, sizeof differ);
  ops_.sync();
  return differ == 0;
}

void DeviceCollection::expand_grads(const float *grad_out,
                                    const float *const *grad_unpooled) {
  for (size_t t = 0; t < tables_.size(); ++t) {
    Slot &s = slots_[t];
    const int64_t dim = tables_[t]->spec().dim;
    size_t n = 0;
    for (size_t f : slot_features_[t]) n += n_[f];
    float *per_id = s.rows.ensure<float>(ops_, n * dim);
    for (size_t f : slot_features_[t]) {
      if (n_[f] == 0) continue;
      const bool none = features_[f].pooling == HB_POOLING_NONE;
      ops_.expand_grads(none ? grad_unpooled[f] : grad_out + column_[f],
                        none ? dim : pooled_width_, dim, w_[f], n_[f],
                        bags_[f].get<int64_t>(), batch_, features_[f].pooling,
                        per_id + start_[f] * dim);
    }
    // Partial sums per unique id in send order, duplicates in batch order
    // (the table's contract).
    const size_t nsend = s.plan.send_total();
    float *partial = s.partial.ensure<float>(ops_, nsend * dim);
    if (nsend == 0) continue;
    s.plan.group_by_slot(ops_);
    const DeviceGrouping &g = s.plan.slot_groups();
    ops_.segment_sum(per_id, dim, g.order.get<int64_t>(), g.seg.get<int64_t>(),
                     g.count.get<int64_t>(), nsend, partial);
  }
}

bool DeviceCollection::send_partials(Outcome &o, bool reuse, const char *what) {
  std::optional<timeline::Span> phase;
  phase.emplace("emb.grads", "embedding");
  const size_t T = tables_.size();
  const size_t H = kVerdictWords * 8;
  layouts(H, row_bytes_, /*back=*/false);
  size_payloads();
  unsigned char *sbuf = sbuf_.get<unsigned char>();
  const bool ok = o.status == HB_OK && reuse;
  int64_t h[kVerdictWords];
  verdict(o, ok, h);
  // The verdict rides in the payload (copied from the host now), so the
  // step costs one round as on the host.
  for (int p = 0; p < world_; ++p) ops_.copy(sbuf + sat_[p * (T + 1)], h, H);
  if (ok)
    for (size_t t = 0; t < T; ++t)
      pack(t, slots_[t].partial.get<float>(), plans_[t].send_counts());
  exchange();
  const unsigned char *rbuf = rbuf_.get<unsigned char>();
  std::vector<int64_t> hv(world_ * kVerdictWords);
  for (int p = 0; p < world_; ++p)
    ops_.copy(&hv[p * kVerdictWords], rbuf + rat_[p * (T + 1)], H);
  ops_.sync();
  if (!verdicts(hv.data(), o, what)) return false;
  // Owners: the received sums as float32, one optimizer step per id.
  phase.emplace("emb.optimizer", "embedding");
  for (size_t t = 0; t < T; ++t) {
    float *grads = owner_rows(t);
    unpack(t, plans_[t].recv_counts(), grads);
    slots_[t].dt->apply_received(slots_[t].recv_ids.get<int64_t>(), received(t),
                                 grads, plans_[t].sources());
  }
  return true;
}

}  // namespace emb
}  // namespace hb
