// The hb_checkpoint_* entry points (hb.h, "Job checkpoints").
#include <chrono>
#include <cstring>

#include "abi/error.h"
#include "comm/context_exchange.h"
#include "common/agreement.h"
#include "common/log.h"
#include "common/mismatch.h"
#include "context/context.h"
#include "embedding/checkpoint.h"
#include "gpu/gpu.h"
#include "metrics/handle.h"
#include "ps/ps_table.h"
#include "reader/handle.h"
#include "recovery/commit.h"
#include "recovery/handle.h"
#include "recovery/layout.h"
#include "recovery/manifest.h"
#include "recovery/registry.h"
#include "recovery/restore.h"
#include "recovery/retention.h"
#include "rendezvous/client.h"
#include "tables/collection_handle.h"
#include "tables/handle.h"
#include "tables/ps_dense.h"

hb_checkpoint::hb_checkpoint() = default;
hb_checkpoint::~hb_checkpoint() = default;

namespace {

using hb::recovery::PendingSave;

hb_checkpoint &ref(hb_checkpoint *c, const char *fn) {
  if (!c) hb::fail(HB_ERR_INVALID_ARGUMENT, "%s: checkpoint is NULL", fn);
  return *c;
}

// Finishes the save in flight (if any): its status, and the AFTER_SAVE
// event on this (the caller's) thread once it is committed.
hb_status finish_pending(hb_checkpoint &c, std::string *message) {
  if (!c.pending) return HB_OK;
  const hb::recovery::CommitResult &r = c.pending->wait();
  hb_status st = r.status;
  *message = r.message;
  c.stats.file_bytes = r.file_bytes;
  c.stats.write_seconds = r.write_seconds;
  c.stats.pending = 0;
  std::string path = c.pending->path();
  int64_t step = c.pending->step();
  c.pending.reset();
  if (st == HB_OK) {
    c.stats.committed_step = step;
    c.ctx->fire(HB_EVENT_AFTER_SAVE, path.c_str());
  } else {
    c.stats.failed_saves += 1;
  }
  return st;
}

void finish_or_throw(hb_checkpoint &c) {
  std::string message;
  hb_status st = finish_pending(c, &message);
  if (st != HB_OK) throw hb::Error(st, message);
}

bool agreed_equal(const std::vector<int64_t> &v) {
  for (int64_t x : v)
    if (x != v[0]) return false;
  return true;
}

std::string describe(const std::vector<int64_t> &v) {
  std::string s;
  for (size_t r = 0; r < v.size(); ++r)
    s += hb::format("%srank %zu: %lld", r ? ", " : "", r, (long long)v[r]);
  return s;
}

void save(hb_checkpoint &c, int64_t step) {
  auto t0 = std::chrono::steady_clock::now();
  const char *what = "hb_checkpoint_save";
  {  // every rank goes on with this save, whatever the last one did
    std::string message;
    int64_t prev = c.pending ? c.pending->step() : -1;
    if (finish_pending(c, &message) != HB_OK)
      HB_LOG_ERROR("%s: the save of step %lld failed: %s", what,
                   static_cast<long long>(prev), message.c_str());
  }
  hb_context &ctx = *c.ctx;
  ctx.check();
  const int rank = ctx.cluster.rank, world = ctx.cluster.world_size;
  std::vector<std::string> items = hb::recovery::registry_items(c);
  // Rank 0 creates the directory of this save and picks its nonce; the
  // ranks agree on the step and on what is registered.
  hb::Outcome o;
  uint64_t nonce = 0;
  std::string ckpt;
  try {
    HB_CHECK_ARG(step >= 0, "%s: step %lld is negative", what,
                 static_cast<long long>(step));
    if (rank == 0) {
      nonce = hb::emb::fresh_nonce();
      ckpt = hb::recovery::join_path(
          c.root, hb::recovery::checkpoint_dir_name(step, nonce));
      for (const char *sub :
           {"", "/tables", "/buffers", "/readers", "/metrics"})
        hb::emb::make_dirs(what, ckpt + sub);
    }
    // Dynamic splits: the offset of each worker's last step reaches the
    // queue before the agreement below, hence before rank 0 has ps task 0
    // save it (lazily told, it lagged the tables by a step: a restore handed
    // that step's samples out again).
    for (hb_embedding *e : c.tables)
      if (e->ps) {
        e->ps->client().split_flush();
        break;  // one client per worker
      }
  } catch (...) {
    o.capture();
  }
  std::vector<int64_t> nonces = hb::agree(
      *c.x, o, std::vector<int64_t>(world, static_cast<int64_t>(nonce)), what,
      nullptr);
  std::vector<int64_t> steps = hb::agree(
      *c.x, hb::Outcome(), std::vector<int64_t>(world, step), what, nullptr);
  std::vector<int64_t> fps = hb::agree(
      *c.x, hb::Outcome(),
      std::vector<int64_t>(
          world,
          static_cast<int64_t>(hb::recovery::registry_fingerprint(items))),
      what, nullptr);
  if (!agreed_equal(steps))
    hb::fail(HB_ERR_MISMATCH, "%s: ranks save different steps (%s)", what,
             describe(steps).c_str());
  if (!agreed_equal(fps))  // every rank: name what differs
    hb::check_same_fields(
        hb::recovery::registry_fields(c),
        std::vector<uint64_t>(fps.begin(), fps.end()),
        [&](const std::string &s) { return hb::gather_strings(*c.x, s); },
        HB_ERR_MISMATCH, what, "registrations");
  nonce = static_cast<uint64_t>(nonces[0]);
  ckpt = hb::recovery::join_path(
      c.root, hb::recovery::checkpoint_dir_name(step, nonce));
  std::string prefix = hb::format("%s/ckpt/%016llx", ctx.scope.c_str(),
                                  static_cast<unsigned long long>(nonce));
  hb::recovery::Snapshot s;
  try {
    ctx.fire(HB_EVENT_BEFORE_SAVE, ckpt.c_str());
    s = hb::recovery::take_snapshot(c, c.async_write);
    s.ckpt = ckpt;
    s.nonce = nonce;
    if (rank == 0) hb::recovery::save_ps_tables(s);
  } catch (...) {
    hb_status st = hb::status_from_current_exception();
    std::string message = hb_last_error();
    hb::recovery::publish_failure(ctx.client.get(), prefix, rank, st, message);
    throw hb::Error(st, message);
  }
  s.root = c.root;
  s.job = c.job;
  s.step = step;
  s.keep = c.keep;
  s.items = std::move(items);
  s.meta = c.meta;
  c.stats.state_bytes = s.state_bytes;
  c.stats.saves += 1;
  c.stats.last_step = step;
  c.pending = std::make_unique<PendingSave>(
      std::move(s), ctx.client.get(), prefix, c.timeout_ms, c.async_write);
  c.stats.pending = c.async_write ? 1 : 0;
  if (!c.async_write) finish_or_throw(c);
  c.stats.blocked_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
          .count();
}

// The directory and job id of a config, with the options as fallback.
void configure(hb_checkpoint &c, const hb_checkpoint_config *in) {
  hb_checkpoint_config cfg = HB_CHECKPOINT_CONFIG_INIT;
  if (in) {
    HB_CHECK_ARG(in->struct_size >=
                     offsetof(hb_checkpoint_config, keep) + sizeof(int32_t),
                 "hb_checkpoint_create: cfg->struct_size %zu is too small",
                 in->struct_size);
    std::memcpy(&cfg, in, std::min(in->struct_size, sizeof cfg));
  }
  c.root = cfg.dir && cfg.dir[0] ? cfg.dir
                                 : c.ctx->options.get_string("checkpoint_dir");
  HB_CHECK_ARG(!c.root.empty(),
               "hb_checkpoint_create: no directory (cfg->dir is NULL and the "
               "option checkpoint_dir / HB_CHECKPOINT_DIR is not set)");
  c.job =
      cfg.job_id ? cfg.job_id : c.ctx->options.get_string("checkpoint_job_id");
  HB_CHECK_ARG(c.job.find('\n') == std::string::npos,
               "hb_checkpoint_create: job_id contains a newline");
  HB_CHECK_ARG(cfg.keep >= 1, "hb_checkpoint_create: keep = %d (must be >= 1)",
               cfg.keep);
  HB_CHECK_ARG(cfg.async_write == 0 || cfg.async_write == 1,
               "hb_checkpoint_create: async_write = %d (0 or 1)",
               cfg.async_write);
  HB_CHECK_ARG(cfg.timeout_ms >= 0,
               "hb_checkpoint_create: timeout_ms = %lld is negative",
               static_cast<long long>(cfg.timeout_ms));
  c.keep = cfg.keep;
  c.async_write = cfg.async_write != 0;
  c.timeout_ms = cfg.timeout_ms > 0 ? cfg.timeout_ms : 600000;
}

// Rank 0: the directory exists and belongs to this job.
void open_root(const hb_checkpoint &c) {
  hb::emb::make_dirs("hb_checkpoint_create", c.root);
  std::string job;
  if (!hb::recovery::read_job_file(c.root, &job)) {
    hb::recovery::write_job_file(c.root, c.job);
  } else if (job != c.job) {
    hb::fail(HB_ERR_INVALID_ARGUMENT,
             "hb_checkpoint_create: '%s' holds the checkpoints of job '%s'; "
             "this job is '%s' (use another directory, or the same job id)",
             c.root.c_str(), job.c_str(), c.job.c_str());
  }
  // The job trains (again): followers wait for its next hb_checkpoint_finish.
  hb::recovery::remove_finished_file(c.root);
}

// Rank 0 marks the directory finished once the last save is committed.
void finish(hb_checkpoint &c) {
  std::string message;
  hb_status st = finish_pending(c, &message);
  hb::Outcome o;
  if (st != HB_OK) {
    o.status = st;
    o.message = message;
  } else if (c.ctx->cluster.rank == 0) {
    try {
      hb::recovery::write_finished_file(c.root, c.stats.committed_step);
    } catch (...) {
      o.capture();
    }
  }
  hb::agree(*c.x, o, "hb_checkpoint_finish");
}

bool registered_table(const hb_checkpoint &c, hb_embedding *e) {
  for (hb_embedding *t : c.tables)
    if (t == e) return true;
  return false;
}

}  // namespace

void hb::recovery::add_table(hb_checkpoint &c, hb_embedding *emb,
                             const char *fn) {
  HB_CHECK_ARG(emb, "%s: table is NULL", fn);
  HB_CHECK_ARG(emb->table, "%s: a serving table has no training state", fn);
  HB_CHECK_ARG(emb->ctx == c.ctx, "%s: table '%s' belongs to another context",
               fn, emb->table->spec().name.c_str());
  hb::recovery::check_name(fn, emb->table->spec().name.c_str());
  if (!registered_table(c, emb)) c.tables.push_back(emb);
}

void hb::recovery::add_buffer(hb_checkpoint &c, const char *fn,
                              const char *name, void *data, size_t bytes,
                              int32_t flags) {
  hb::recovery::check_name(fn, name);
  HB_CHECK_ARG(data || bytes == 0, "%s('%s'): data is NULL", fn, name);
  HB_CHECK_ARG((flags & ~(HB_BUFFER_PER_RANK | HB_BUFFER_DEVICE)) == 0,
               "%s('%s'): unknown flags 0x%x", fn, name, flags);
  for (const hb::recovery::Buffer &b : c.buffers)
    HB_CHECK_ARG(b.name != name, "%s: buffer '%s' is registered already", fn,
                 name);
  if (flags & HB_BUFFER_DEVICE)  // fails here without CUDA, not at save
    hb::gpu::require_plugin();
  c.buffers.push_back({name, data, bytes, flags});
}

extern "C" {

hb_status hb_checkpoint_create(hb_context *ctx, const hb_checkpoint_config *cfg,
                               hb_checkpoint **out) {
  return hb::guard([&] {
    HB_CHECK_ARG(out, "hb_checkpoint_create: out is NULL");
    *out = nullptr;
    hb_context &cx = hb::ctx_ref(ctx);
    cx.check();
    auto c = std::make_unique<hb_checkpoint>();
    c->ctx = ctx;
    c->x = hb::comm::make_context_exchange(ctx);
    hb::Outcome o;
    try {
      configure(*c, cfg);
      if (cx.cluster.rank == 0) open_root(*c);
    } catch (...) {
      o.capture();
    }
    hb::agree(*c->x, o, "hb_checkpoint_create");
    *out = c.release();
  });
}

void hb_checkpoint_destroy(hb_checkpoint *c) {
  if (!c) return;
  std::string message;
  if (finish_pending(*c, &message) != HB_OK)
    HB_LOG_WARN("hb_checkpoint_destroy: the last save failed: %s",
                message.c_str());
  delete c;
}

hb_status hb_checkpoint_add_table(hb_checkpoint *c, hb_embedding *emb) {
  return hb::guard([&] {
    hb::recovery::add_table(ref(c, "hb_checkpoint_add_table"), emb,
                            "hb_checkpoint_add_table");
  });
}

hb_status hb_checkpoint_add_collection(hb_checkpoint *c, hb_collection *coll) {
  return hb::guard([&] {
    const char *fn = "hb_checkpoint_add_collection";
    hb_checkpoint &cp = ref(c, fn);
    HB_CHECK_ARG(coll, "%s: collection is NULL", fn);
    for (hb_embedding *e : coll->tables) hb::recovery::add_table(cp, e, fn);
  });
}

hb_status hb_checkpoint_add_buffer(hb_checkpoint *c, const char *name,
                                   void *data, size_t bytes, int32_t flags) {
  return hb::guard([&] {
    const char *fn = "hb_checkpoint_add_buffer";
    hb::recovery::add_buffer(ref(c, fn), fn, name, data, bytes, flags);
  });
}

hb_status hb_checkpoint_add_reader(hb_checkpoint *c, hb_reader *r) {
  return hb::guard([&] {
    const char *fn = "hb_checkpoint_add_reader";
    hb_checkpoint &cp = ref(c, fn);
    HB_CHECK_ARG(r, "%s: reader is NULL", fn);
    for (hb_reader *x : cp.readers)
      HB_CHECK_ARG(x != r, "%s: reader registered already", fn);
    cp.readers.push_back(r);
  });
}

hb_status hb_checkpoint_add_metric(hb_checkpoint *c, const char *name,
                                   hb_metric *m) {
  return hb::guard([&] {
    const char *fn = "hb_checkpoint_add_metric";
    hb_checkpoint &cp = ref(c, fn);
    hb::recovery::check_name(fn, name);
    HB_CHECK_ARG(m, "%s('%s'): metric is NULL", fn, name);
    for (const hb::recovery::MetricEntry &e : cp.metrics)
      HB_CHECK_ARG(e.name != name && e.metric != m,
                   "%s: metric '%s' registered already", fn, name);
    cp.metrics.push_back({name, m});
  });
}

hb_status hb_checkpoint_set_meta(hb_checkpoint *c, const char *key,
                                 const char *value) {
  return hb::guard([&] {
    const char *fn = "hb_checkpoint_set_meta";
    hb_checkpoint &cp = ref(c, fn);
    HB_CHECK_ARG(key && key[0] && std::strlen(key) <= 64,
                 "%s: key must be 1-64 bytes", fn);
    if (!value) {
      cp.meta.erase(key);
      return;
    }
    HB_CHECK_ARG(std::strlen(value) <= 65536,
                 "%s('%s'): value longer than 64 KiB", fn, key);
    cp.meta[key] = value;
  });
}

hb_status hb_checkpoint_get_meta(const hb_checkpoint *c, const char *key,
                                 char *buf, size_t cap, size_t *needed) {
  return hb::guard([&] {
    const char *fn = "hb_checkpoint_get_meta";
    HB_CHECK_ARG(c, "%s: checkpoint is NULL", fn);
    HB_CHECK_ARG(key, "%s: key is NULL", fn);
    auto it = c->meta.find(key);
    HB_CHECK_ARG(it != c->meta.end(), "%s: no key '%s'", fn, key);
    size_t n = it->second.size() + 1;
    if (needed) *needed = n;
    HB_CHECK_ARG(buf && cap >= n, "%s('%s'): buffer of %zu bytes, %zu needed",
                 fn, key, cap, n);
    std::memcpy(buf, it->second.c_str(), n);
  });
}

hb_status hb_checkpoint_save(hb_checkpoint *c, int64_t step) {
  return hb::guard([&] { save(ref(c, "hb_checkpoint_save"), step); });
}

hb_status hb_checkpoint_wait(hb_checkpoint *c) {
  return hb::guard([&] { finish_or_throw(ref(c, "hb_checkpoint_wait")); });
}

hb_status hb_checkpoint_restore_latest(hb_checkpoint *c, int64_t *step) {
  return hb::guard([&] {
    hb_checkpoint &cp = ref(c, "hb_checkpoint_restore_latest");
    HB_CHECK_ARG(step, "hb_checkpoint_restore_latest: step is NULL");
    *step = -1;
    std::string message;
    if (finish_pending(cp, &message) != HB_OK)
      HB_LOG_WARN("hb_checkpoint_restore_latest: the last save failed: %s",
                  message.c_str());
    cp.ctx->check();
    *step = hb::recovery::restore_latest(cp);
  });
}

hb_status hb_checkpoint_restore(hb_checkpoint *c, const char *path,
                                int64_t *step) {
  return hb::guard([&] {
    hb_checkpoint &cp = ref(c, "hb_checkpoint_restore");
    HB_CHECK_ARG(path && path[0], "hb_checkpoint_restore: path is NULL");
    std::string message;
    if (finish_pending(cp, &message) != HB_OK)
      HB_LOG_WARN("hb_checkpoint_restore: the last save failed: %s",
                  message.c_str());
    cp.ctx->check();
    int64_t s = hb::recovery::restore_path(cp, path);
    if (step) *step = s;
  });
}

hb_status hb_checkpoint_latest(const char *dir, char *path_buf, size_t cap,
                               size_t *needed, int64_t *step) {
  return hb::guard([&] {
    const char *fn = "hb_checkpoint_latest";
    HB_CHECK_ARG(dir && dir[0], "%s: dir is NULL or empty", fn);
    HB_CHECK_ARG(step, "%s: step is NULL", fn);
    *step = -1;
    std::string path;
    int64_t s = -1;
    for (const hb::recovery::Candidate &cand :
         hb::recovery::complete_checkpoints(dir, nullptr)) {
      std::string why;
      hb::recovery::Manifest m = hb::recovery::read_manifest(cand.path);
      if (hb::recovery::files_present(cand.path, m, &why)) {
        path = cand.path;
        s = cand.step;
        break;
      }
      HB_LOG_WARN("%s: '%s' is damaged (%s): trying the previous one", fn,
                  cand.path.c_str(), why.c_str());
    }
    size_t n = path.size() + 1;
    if (needed) *needed = n;
    HB_CHECK_ARG(path_buf && cap >= n,
                 "%s: path buffer of %zu bytes, %zu needed", fn, cap, n);
    std::memcpy(path_buf, path.c_str(), n);
    *step = s;
  });
}

hb_status hb_checkpoint_finish(hb_checkpoint *c) {
  return hb::guard([&] { finish(ref(c, "hb_checkpoint_finish")); });
}

hb_status hb_checkpoint_get_stats(const hb_checkpoint *c,
                                  hb_checkpoint_stats *out) {
  return hb::guard([&] {
    HB_CHECK_ARG(c, "hb_checkpoint_get_stats: checkpoint is NULL");
    HB_CHECK_ARG(out && out->struct_size >= sizeof(size_t),
                 "hb_checkpoint_get_stats: out is NULL or its struct_size 0");
    hb_checkpoint_stats s = c->stats;
    s.pending = c->pending && !c->pending->done() ? 1 : 0;
    s.restored_path = c->restored_path.c_str();
    s.struct_size = std::min(out->struct_size, sizeof s);
    std::memcpy(out, &s, s.struct_size);
  });
}

hb_status hb_checkpoint_add_ps_dense(hb_checkpoint *c, hb_ps_dense *d) {
  return hb::guard([&] {
    const char *fn = "hb_checkpoint_add_ps_dense";
    HB_CHECK_ARG(c, "%s: checkpoint is NULL", fn);
    hb::recovery::add_table(*c, hb::emb::dense_ref(d, fn).emb.get(), fn);
  });
}

}  // extern "C"
