#include "ps/ps_table.h"

#include <cstring>

#include "comm/context_exchange.h"
#include "embedding/checkpoint.h"
#include "embedding/optimizer.h"
#include "ps/positions.h"
#include "ps/test_hook.h"
#include "serving/export_format.h"

namespace hb {
namespace ps {

std::function<void(const char *, int)> g_test_hook;

PsTable::PsTable(std::shared_ptr<Client> client, const emb::Spec &spec,
                 const std::function<void()> &local_check,
                 const std::vector<int64_t> *init_ids, const float *init_rows)
    : emb::Table(spec, comm::make_local_exchange(), local_check,
                 /*rows=*/false),
      client_(std::move(client)),
      c_(*client_),
      ps_spec_(spec),
      ids_(c_.num_ps()),
      at_(c_.num_ps()) {
  ps_spec_.partition = HB_PARTITION_MOD;
  const int P = c_.num_ps();
  std::vector<std::vector<int64_t>> init_by_ps(P);
  std::vector<std::string> rows_by_ps(P);
  if (init_ids) {
    for (size_t i = 0; i < init_ids->size(); ++i) {
      int64_t id = (*init_ids)[i];
      int p = c_.owner(id);
      init_by_ps[p].push_back(id);
      rows_by_ps[p].append(
          reinterpret_cast<const char *>(init_rows + i * spec.dim),
          4 * spec.dim);
    }
  }
  std::string wire_spec = encode_spec(spec);
  std::vector<uint64_t> pending(P);
  for (int p = 0; p < P; ++p) {
    std::vector<std::string> strs = {wire_spec};
    if (init_ids) {
      strs.push_back(pack(init_by_ps[p].data(), init_by_ps[p].size()));
      strs.push_back(std::move(rows_by_ps[p]));
    }
    pending[p] = c_.conn(p).start(request(kAttach, {}, std::move(strs)));
  }
  for (int p = 0; p < P; ++p) {
    Frame r = c_.conn(p).finish(pending[p], "attach");
    remote_.push_back(r.ints.at(0));
    pulled_.push_back(-1);
    last_ = std::max(last_, std::make_pair(r.ints.at(1), r.ints.at(2)));
  }
  // A restarted worker that does not resume (hb_ps_position) goes on after
  // its pushes, not below them (they would be dropped as replays).
  c_.raise_step(last_.first);
  c_.add_table(this);
}

PsTable::~PsTable() {
  c_.remove_table(this);
  for (int p = 0; p < c_.num_ps(); ++p) {
    try {
      c_.conn(p).call(request(kDetach, {remote_[p]}), "detach");
    } catch (const Error &) {
      // A broken ps: the job is failing anyway.
    }
  }
}

std::pair<int64_t, int64_t> PsTable::next_push() {
  const int64_t s = c_.step();
  if (s != k_step_) {
    k_step_ = s;
    k_ = s == last_.first ? last_.second + 1 : 0;
  }
  return {s, k_++};
}

void PsTable::bucket(const int64_t *ids, size_t n, int64_t nu) {
  // A world of one: the ids are this worker's, already unique (nu < 0).
  if (nu >= 0)
    fail(HB_ERR_INTERNAL, "ps table '%s': an owner dedup in a world of one",
         spec().name.c_str());
  for (int p = 0; p < c_.num_ps(); ++p) ids_[p].clear(), at_[p].clear();
  for (size_t i = 0; i < n; ++i) {
    int p = c_.owner(ids[i]);
    ids_[p].push_back(ids[i]);
    at_[p].push_back(i);
  }
}

namespace {

PsTable &ps_table(const emb::OwnerCall &c) {
  return static_cast<PsTable &>(*c.table);
}

// What a pull or push waits for, for its errors: "push of 'u', 'v' at
// step 12" (the ps adds the worker it waited for on a timeout).
std::string describe(const char *verb, const std::vector<emb::OwnerCall> &calls,
                     int64_t step) {
  std::string s = verb;
  s += " of ";
  for (size_t i = 0; i < calls.size(); ++i)
    s += (i ? ", '" : "'") + ps_table(calls[i]).spec().name + "'";
  return s + format(" at step %lld", static_cast<long long>(step));
}

// A collection's tables on the ps tasks (Table::batch_with): their owner
// halves in one message per ps task (the server takes several tables per
// pull and push).
class PsBatch : public emb::OwnerBatch {
 public:
  void encode_rows(const std::vector<emb::OwnerCall> &calls) override {
    PsTable::pull_rows(calls);
  }
  void apply_received(const std::vector<emb::OwnerCall> &calls) override {
    PsTable::push_partials(calls);
  }
};

}  // namespace

std::unique_ptr<emb::OwnerBatch> PsTable::batch_with(
    const std::vector<emb::Table *> &all) {
  for (emb::Table *t : all) {
    auto *p = dynamic_cast<PsTable *>(t);
    if (!p || &p->c_ != &c_) return nullptr;  // mixed: each table alone
  }
  return std::unique_ptr<emb::OwnerBatch>(new PsBatch);
}

void PsTable::pull_rows(const std::vector<emb::OwnerCall> &calls) {
  if (calls.empty()) return;
  Client &c = ps_table(calls[0]).c_;
  const int P = c.num_ps();
  for (const emb::OwnerCall &k : calls)
    ps_table(k).bucket(k.recv, k.nrecv, k.nu);
  // Every ps task, with or without ids: the pull is where the staleness
  // bound holds this worker back, on all of them alike.
  std::vector<uint64_t> req(P, 0);
  for (int p = 0; p < P; ++p) {
    std::vector<int64_t> ints;
    std::vector<std::string> strs;
    for (const emb::OwnerCall &k : calls) {
      PsTable &t = ps_table(k);
      ints.push_back(t.remote_[p]);
      strs.push_back(pack(t.ids_[p].data(), t.ids_[p].size()));
    }
    ints.push_back(c.step());  // for the ps's timeout message
    req[p] = c.conn(p).start(request(kPull, std::move(ints), std::move(strs)));
  }
  const std::string what = describe("pull", calls, c.step());
  for (int p = 0; p < P; ++p) {
    Frame r = c.conn(p).finish(req[p], what.c_str(), /*gated=*/true);
    for (size_t i = 0; i < calls.size(); ++i) {
      PsTable &t = ps_table(calls[i]);
      t.pulled_[p] = r.ints.at(i);  // the push says what it was computed on
      const size_t rb = t.wire_row_bytes();
      const std::string &rows = r.strs.at(i);
      if (rows.size() != t.ids_[p].size() * rb)
        fail(HB_ERR_CORRUPT, "ps task %d: %zu row bytes for %zu ids of '%s'", p,
             rows.size(), t.ids_[p].size(), t.spec().name.c_str());
      for (size_t k = 0; k < t.at_[p].size(); ++k)
        std::memcpy(calls[i].rows + t.at_[p][k] * rb, rows.data() + k * rb, rb);
    }
  }
}

void PsTable::push_partials(const std::vector<emb::OwnerCall> &calls) {
  if (calls.empty()) return;
  Client &c = ps_table(calls[0]).c_;
  const int P = c.num_ps();
  std::vector<std::pair<int64_t, int64_t>> steps;
  for (const emb::OwnerCall &k : calls) {
    ps_table(k).bucket(k.recv, k.nrecv, k.nu);
    steps.push_back(ps_table(k).next_push());
  }
  // Every ps task gets every table's step, with or without ids: its clocks
  // count it.
  std::vector<uint64_t> req(P);
  for (int p = 0; p < P; ++p) {
    std::vector<int64_t> ints;
    std::vector<std::string> strs;
    for (size_t i = 0; i < calls.size(); ++i) {
      PsTable &t = ps_table(calls[i]);
      const size_t rb = t.wire_row_bytes();
      std::string grads(t.ids_[p].size() * rb, '\0');
      for (size_t k = 0; k < t.at_[p].size(); ++k)
        std::memcpy(&grads[k * rb], calls[i].partials + t.at_[p][k] * rb, rb);
      ints.insert(ints.end(), {t.remote_[p], steps[i].first, steps[i].second,
                               t.pulled_[p]});
      strs.push_back(pack(t.ids_[p].data(), t.ids_[p].size()));
      strs.push_back(std::move(grads));
    }
    strs.push_back(c.position());
    if (!c.split_tag().empty()) strs.push_back(c.split_tag());
    req[p] = c.conn(p).start(request(kPush, std::move(ints), std::move(strs)));
    test_point("push_sent", p);
  }
  const std::string what = describe("push", calls, c.step());
  for (int p = 0; p < P; ++p)
    c.conn(p).finish(req[p], what.c_str(), /*gated=*/true);
}

void PsTable::encode_rows(const int64_t *recv, size_t nrecv, int64_t nu,
                          const emb::Dedup &owner, unsigned char *dst) {
  pull_rows({{this, recv, nrecv, nu, &owner, dst, nullptr}});
}

void PsTable::apply_received(const int64_t *recv, size_t nrecv, int64_t nu,
                             const emb::Dedup &owner,
                             const unsigned char *partials) {
  push_partials({{this, recv, nrecv, nu, &owner, nullptr, partials}});
}

PsTable::JobFiles PsTable::save_shards(const std::string &dir, uint64_t nonce,
                                       bool positions) {
  const int P = c_.num_ps();
  std::vector<uint64_t> req(P);
  for (int p = 0; p < P; ++p)
    req[p] = c_.conn(p).start(request(
        kSave, {remote_[p], static_cast<int64_t>(nonce), positions ? 1 : 0},
        {dir}));
  JobFiles out;
  for (int p = 0; p < P; ++p) {
    Frame r = c_.conn(p).finish(req[p], "save");
    auto u = [&](size_t i) { return static_cast<uint64_t>(r.ints.at(i)); };
    out.shards.push_back(
        {emb::shard_file_name(ps_spec_.name, nonce, p, P), u(0), u(1), u(2)});
    if (positions)
      out.positions.push_back(
          {positions_file_name(ps_spec_.name, nonce, p, P), u(3), 0, u(4)});
  }
  return out;
}

void PsTable::save(const char *dir) {
  const std::string what = "hb_embedding_save('" + spec().name + "')";
  HB_CHECK_ARG(dir && dir[0], "%s: dir is NULL or empty", what.c_str());
  emb::make_dirs(what, dir);
  const uint64_t nonce = emb::fresh_nonce();
  JobFiles f = save_shards(dir, nonce, /*positions=*/false);
  emb::Optimizer opt(ps_spec_);
  emb::write_manifest(ps_spec_, opt.record_words(), nonce, f.shards, dir);
  emb::remove_stale_shards(ps_spec_, dir, nonce, what);
}

PsTable::JobFiles PsTable::save_job(const std::string &dir, uint64_t nonce) {
  return save_shards(dir, nonce, /*positions=*/true);
}

void PsTable::load_from(const std::string &dir, std::vector<int64_t> extra) {
  const int P = c_.num_ps();
  std::vector<uint64_t> req(P);
  for (int p = 0; p < P; ++p) {
    std::vector<int64_t> ints = {remote_[p]};
    ints.insert(ints.end(), extra.begin(), extra.end());
    req[p] = c_.conn(p).start(request(kLoad, std::move(ints), {dir}));
  }
  // Every ps task stages the rows it owns; only when all could does any
  // swap them in: a bad checkpoint changes nothing.
  hb_status first = HB_OK;
  std::string message;
  for (int p = 0; p < P; ++p) {
    try {
      c_.conn(p).finish(req[p], "load");
    } catch (const Error &e) {
      if (e.status() == HB_ERR_PEER_FAILED) throw;
      if (first == HB_OK) first = e.status(), message = e.what();
    }
  }
  const int64_t commit = first == HB_OK;
  for (int p = 0; p < P; ++p)
    req[p] = c_.conn(p).start(request(kLoadCommit, {remote_[p], commit}));
  for (int p = 0; p < P; ++p) c_.conn(p).finish(req[p], "load");
  if (first != HB_OK) throw Error(first, message);
}

void PsTable::load(const char *dir) {
  const std::string what = "hb_embedding_load('" + spec().name + "')";
  HB_CHECK_ARG(dir && dir[0], "%s: dir is NULL or empty", what.c_str());
  load_from(dir, {});
}

void PsTable::load_job(const std::string &dir, uint64_t nonce, int old_num_ps) {
  if (old_num_ps <= 0) return load_from(dir, {});
  load_from(dir, {static_cast<int64_t>(nonce), old_num_ps});
}

void PsTable::export_to(const char *path) {
  const std::string what = "hb_embedding_export('" + spec().name + "')";
  HB_CHECK_ARG(path && path[0], "%s: path is NULL or empty", what.c_str());
  const int P = c_.num_ps();
  const int64_t dim = spec().dim;
  // The ps tasks send the weights only (dim floats per row).
  const size_t words = static_cast<size_t>(dim);
  std::vector<uint64_t> req(P);
  for (int p = 0; p < P; ++p)
    req[p] = c_.conn(p).start(request(kDump, {remote_[p]}));
  std::vector<unsigned char> all;
  const size_t rec = 8 + 4 * static_cast<size_t>(dim);
  for (int p = 0; p < P; ++p) {
    Frame r = c_.conn(p).finish(req[p], "export");
    std::vector<int64_t> ids = unpack<int64_t>(r.strs.at(0), "ids");
    const std::string &recs = r.strs.at(1);
    if (recs.size() != ids.size() * words * 4)
      fail(HB_ERR_CORRUPT, "ps task %d: %zu record bytes for %zu rows", p,
           recs.size(), ids.size());
    size_t base = all.size();
    all.resize(base + ids.size() * rec);
    for (size_t k = 0; k < ids.size(); ++k) {
      std::memcpy(&all[base + k * rec], &ids[k], 8);
      std::memcpy(&all[base + k * rec + 8], recs.data() + k * words * 4,
                  4 * dim);
    }
  }
  serving::write_export_v1(path, spec().name, dim, all.data(), all.size() / rec,
                           rec);
}

}  // namespace ps
}  // namespace hb
