// The hb_evaluator_* entry points (hb.h, "Evaluator"): a follower
// checkpoint handle (src/recovery) restores what was added; follow.h picks
// the checkpoint; json_log.h writes the line.
#include <chrono>
#include <cstring>
#include <thread>

#include "abi/error.h"
#include "comm/context_exchange.h"
#include "common/agreement.h"
#include "common/bytes.h"
#include "common/clock.h"
#include "common/log.h"
#include "context/context.h"
#include "evaluator/follow.h"
#include "evaluator/handle.h"
#include "metrics/handle.h"
#include "recovery/layout.h"
#include "recovery/manifest.h"
#include "recovery/registry.h"
#include "recovery/restore.h"
#include "tables/collection_handle.h"
#include "tables/handle.h"

namespace {

using hb::evaluator::Next;

hb_evaluator &ref(hb_evaluator *ev, const char *fn) {
  if (!ev) hb::fail(HB_ERR_INVALID_ARGUMENT, "%s: evaluator is NULL", fn);
  return *ev;
}

void configure(hb_evaluator &ev, const hb_evaluator_config *in) {
  const char *fn = "hb_evaluator_create";
  hb_evaluator_config cfg = HB_EVALUATOR_CONFIG_INIT;
  if (in) {
    HB_CHECK_ARG(in->struct_size >= offsetof(hb_evaluator_config, job_id),
                 "%s: cfg->struct_size %zu is too small", fn, in->struct_size);
    std::memcpy(&cfg, in, std::min(in->struct_size, sizeof cfg));
  }
  hb_checkpoint &c = *ev.ckpt;
  c.root = cfg.dir && cfg.dir[0] ? cfg.dir
                                 : ev.ctx->options.get_string("checkpoint_dir");
  HB_CHECK_ARG(!c.root.empty(),
               "%s: no checkpoint directory to follow (cfg->dir is NULL and "
               "the option checkpoint_dir / HB_CHECKPOINT_DIR is not set)",
               fn);
  c.job =
      cfg.job_id ? cfg.job_id : ev.ctx->options.get_string("checkpoint_job_id");
  HB_CHECK_ARG(cfg.poll_ms >= 0 && cfg.timeout_ms >= 0,
               "%s: poll_ms %lld and timeout_ms %lld must be >= 0", fn,
               static_cast<long long>(cfg.poll_ms),
               static_cast<long long>(cfg.timeout_ms));
  ev.poll_ms = cfg.poll_ms > 0 ? cfg.poll_ms : 200;
  ev.timeout_ms = cfg.timeout_ms > 0 ? cfg.timeout_ms : 600000;
  if (ev.ctx->cluster.rank != 0) return;
  // Another job's directory is refused now when it exists already.
  hb::evaluator::look(c.root, c.job, INT64_MAX);
  if (cfg.log_path && cfg.log_path[0]) {
    ev.log = std::make_unique<hb::evaluator::JsonLog>(cfg.log_path);
    ev.stats.last_step = ev.log->last_step();
  }
}

// Rank 0's decision on every rank, waiting while there is nothing to do.
Next wait_for_next(hb_evaluator &ev) {
  hb_checkpoint &c = *ev.ckpt;
  const int64_t deadline = hb::now_ms() + ev.timeout_ms;
  for (;;) {
    hb::Outcome o;
    std::string mine;
    if (ev.ctx->cluster.rank == 0) {
      try {
        Next n = hb::evaluator::look(c.root, c.job, ev.stats.last_step);
        if (n.kind == Next::kWait && hb::now_ms() >= deadline)
          hb::fail(HB_ERR_TIMEOUT,
                   "hb_evaluator_next: no checkpoint after step %lld and no "
                   "end of training in '%s' within %lld ms",
                   static_cast<long long>(ev.stats.last_step), c.root.c_str(),
                   static_cast<long long>(ev.timeout_ms));
        mine = hb::evaluator::encode(n);
      } catch (...) {
        o.capture();
      }
    }
    Next n = hb::evaluator::decode(
        hb::recovery::from_rank0(c, o, mine, "hb_evaluator_next"));
    if (n.kind != Next::kWait) return n;
    std::this_thread::sleep_for(std::chrono::milliseconds(ev.poll_ms));
  }
}

// The split queue of checkpoint `path` (dynamic splits), read by rank 0 and
// sent to every rank as int64s: has, epoch, epochs, done, samples done and
// in all, then split, epoch, begin, end, from per open split.
std::string read_split_queue(hb_evaluator &ev, const std::string &path) {
  hb::Outcome o;
  std::string mine;
  if (ev.ctx->cluster.rank == 0) {
    try {
      hb::recovery::Manifest m = hb::recovery::read_manifest(path);
      const hb::recovery::FileEntry *e = hb::recovery::find_file(
          m, "tables/" + hb::ps::SplitQueue::file_name(m.nonce));
      hb::put<int64_t>(&mine, e != nullptr);
      if (e) {
        hb::ps::SplitProgress p =
            hb::ps::SplitQueue::load(hb::recovery::read_checked(path, *e), 1)
                .progress();
        for (int64_t v : {p.epoch, p.epochs, p.splits_done, p.samples_done,
                          p.samples_total})
          hb::put<int64_t>(&mine, v);
        for (const hb::ps::SplitLease &l : p.open)
          for (int64_t v : {l.split, l.epoch, l.begin, l.end, l.from})
            hb::put<int64_t>(&mine, v);
      }
    } catch (...) {
      o.capture();
    }
  }
  return hb::recovery::from_rank0(*ev.ckpt, o, mine, "hb_evaluator_next");
}

// What the evaluator reports of the queue (stats, open splits).
void set_split_queue(hb_evaluator &ev, const std::string &bytes) {
  hb::ByteReader r(bytes, "split queue progress");
  hb_evaluator_stats &s = ev.stats;
  ev.open_splits.clear();
  s.split_epoch = -1;
  s.split_epochs = s.splits_done = s.splits_open = 0;
  s.split_samples_done = s.split_samples_total = 0;
  if (!r.get<int64_t>("has")) return;
  s.split_epoch = r.get<int64_t>("epoch");
  s.split_epochs = r.get<int64_t>("epochs");
  s.splits_done = r.get<int64_t>("done");
  s.split_samples_done = r.get<int64_t>("samples done");
  s.split_samples_total = r.get<int64_t>("samples");
  while (r.left() > 0) {
    hb::ps::SplitLease l;
    l.split = r.get<int64_t>("split"), l.epoch = r.get<int64_t>("epoch");
    l.begin = r.get<int64_t>("begin"), l.end = r.get<int64_t>("end");
    l.from = l.replay_end = r.get<int64_t>("from");
    ev.open_splits.push_back(l);
  }
  s.splits_open = static_cast<int64_t>(ev.open_splits.size());
}

int64_t next(hb_evaluator &ev) {
  ev.ctx->check();
  ev.restored = false;
  for (;;) {
    Next n = wait_for_next(ev);
    if (n.kind == Next::kEnd) {
      ev.stats.finished = 1;
      return -1;
    }
    std::string queue;
    try {
      hb::recovery::restore_path(*ev.ckpt, n.path);
      queue = read_split_queue(ev, n.path);
    } catch (const hb::Error &e) {
      // Removed by `keep` (or damaged) between the listing and the load:
      // passed over; a later checkpoint reloads everything.
      if (e.status() != HB_ERR_CORRUPT && e.status() != HB_ERR_IO) throw;
      HB_LOG_WARN(
          "hb_evaluator: skipping the checkpoint of step %lld ('%s'): "
          "%s",
          static_cast<long long>(n.step), n.path.c_str(), e.what());
      ev.stats.skipped += 1;
      ev.stats.last_step = n.step;
      continue;
    }
    for (hb::recovery::MetricEntry &m : ev.metrics) {
      m.metric->state->reset();
      m.metric->flags = 0;
    }
    set_split_queue(ev, queue);
    ev.stats.evaluated += 1;
    ev.stats.last_step = n.step;
    ev.restored = true;
    return n.step;
  }
}

void report(hb_evaluator &ev, double *values) {
  const char *fn = "hb_evaluator_report";
  HB_CHECK_ARG(ev.restored,
               "%s: no checkpoint restored since the last report (call "
               "hb_evaluator_next first)",
               fn);
  std::vector<std::pair<std::string, double>> results;
  for (hb::recovery::MetricEntry &m : ev.metrics)
    results.emplace_back(m.name, hb::metrics::result(*m.metric));
  hb::Outcome o;
  if (ev.log) {
    // The queue's progress with the metrics: how far training got.
    std::vector<std::pair<std::string, double>> line = results;
    const hb_evaluator_stats &st = ev.stats;
    if (st.split_epoch >= 0)
      for (auto f :
           {std::make_pair("split_epoch", st.split_epoch),
            std::make_pair("splits_done", st.splits_done),
            std::make_pair("splits_open", st.splits_open),
            std::make_pair("split_samples_done", st.split_samples_done)})
        line.emplace_back(f.first, static_cast<double>(f.second));
    try {
      auto wall = std::chrono::system_clock::now().time_since_epoch();
      ev.log->append(ev.stats.last_step,
                     std::chrono::duration<double>(wall).count(), line);
    } catch (...) {
      o.capture();
    }
  }
  hb::agree(*ev.ckpt->x, o, fn);
  for (size_t i = 0; values && i < results.size(); ++i)
    values[i] = results[i].second;
  ev.stats.reported += 1;
  ev.restored = false;
}

}  // namespace

extern "C" {

hb_status hb_evaluator_create(hb_context *ctx, const hb_evaluator_config *cfg,
                              hb_evaluator **out) {
  return hb::guard([&] {
    HB_CHECK_ARG(out, "hb_evaluator_create: out is NULL");
    *out = nullptr;
    hb_context &cx = hb::ctx_ref(ctx);
    cx.check();
    auto ev = std::make_unique<hb_evaluator>();
    ev->ctx = ctx;
    ev->ckpt = std::make_unique<hb_checkpoint>();
    ev->ckpt->ctx = ctx;
    ev->ckpt->follower = true;
    ev->ckpt->x = hb::comm::make_context_exchange(ctx);
    hb::Outcome o;
    try {
      configure(*ev, cfg);
    } catch (...) {
      o.capture();
    }
    hb::agree(*ev->ckpt->x, o, "hb_evaluator_create");
    *out = ev.release();
  });
}

void hb_evaluator_destroy(hb_evaluator *ev) { delete ev; }

hb_status hb_evaluator_add_table(hb_evaluator *ev, hb_embedding *emb) {
  return hb::guard([&] {
    const char *fn = "hb_evaluator_add_table";
    hb::recovery::add_table(*ref(ev, fn).ckpt, emb, fn);
  });
}

hb_status hb_evaluator_add_collection(hb_evaluator *ev, hb_collection *coll) {
  return hb::guard([&] {
    const char *fn = "hb_evaluator_add_collection";
    hb_checkpoint &c = *ref(ev, fn).ckpt;
    HB_CHECK_ARG(coll, "%s: collection is NULL", fn);
    for (hb_embedding *e : coll->tables) hb::recovery::add_table(c, e, fn);
  });
}

hb_status hb_evaluator_add_buffer(hb_evaluator *ev, const char *name,
                                  void *data, size_t bytes, int32_t flags) {
  return hb::guard([&] {
    const char *fn = "hb_evaluator_add_buffer";
    hb_checkpoint &c = *ref(ev, fn).ckpt;
    HB_CHECK_ARG(!(flags & HB_BUFFER_PER_RANK),
                 "%s('%s'): per-rank buffers are the training ranks' own; an "
                 "evaluator restores replicated ones",
                 fn, name ? name : "(null)");
    hb::recovery::add_buffer(c, fn, name, data, bytes, flags);
  });
}

hb_status hb_evaluator_add_metric(hb_evaluator *ev, const char *name,
                                  hb_metric *m) {
  return hb::guard([&] {
    const char *fn = "hb_evaluator_add_metric";
    hb_evaluator &e = ref(ev, fn);
    hb::recovery::check_name(fn, name);
    HB_CHECK_ARG(m, "%s('%s'): metric is NULL", fn, name);
    HB_CHECK_ARG(std::strcmp(name, "step") && std::strcmp(name, "time"),
                 "%s: '%s' is a field of every line already", fn, name);
    for (const char *q :
         {"split_epoch", "splits_done", "splits_open", "split_samples_done"})
      HB_CHECK_ARG(std::strcmp(name, q),
                   "%s: '%s' is a field of the lines of a job with dynamic "
                   "splits",
                   fn, name);
    for (const hb::recovery::MetricEntry &x : e.metrics)
      HB_CHECK_ARG(x.name != name && x.metric != m,
                   "%s: metric '%s' added already", fn, name);
    e.metrics.push_back({name, m});
  });
}

hb_status hb_evaluator_next(hb_evaluator *ev, int64_t *step) {
  return hb::guard([&] {
    hb_evaluator &e = ref(ev, "hb_evaluator_next");
    HB_CHECK_ARG(step, "hb_evaluator_next: step is NULL");
    *step = -1;
    *step = next(e);
  });
}

hb_status hb_evaluator_report(hb_evaluator *ev, double *values) {
  return hb::guard([&] { report(ref(ev, "hb_evaluator_report"), values); });
}

hb_status hb_evaluator_get_stats(const hb_evaluator *ev,
                                 hb_evaluator_stats *out) {
  return hb::guard([&] {
    HB_CHECK_ARG(ev, "hb_evaluator_get_stats: evaluator is NULL");
    HB_CHECK_ARG(out && out->struct_size >= sizeof(size_t),
                 "hb_evaluator_get_stats: out is NULL or its struct_size 0");
    hb_evaluator_stats s = ev->stats;
    s.struct_size = std::min(out->struct_size, sizeof s);
    std::memcpy(out, &s, s.struct_size);
  });
}

hb_status hb_evaluator_open_splits(const hb_evaluator *ev, hb_ps_split *out,
                                   size_t cap, size_t *count) {
  return hb::guard([&] {
    const char *fn = "hb_evaluator_open_splits";
    HB_CHECK_ARG(ev, "%s: evaluator is NULL", fn);
    HB_CHECK_ARG(count, "%s: count is NULL", fn);
    HB_CHECK_ARG(cap == 0 || (out && out->struct_size >= sizeof(size_t)),
                 "%s: out is NULL or its struct_size too small (cap %zu)", fn,
                 cap);
    const size_t stride = cap ? out->struct_size : 0;
    *count = ev->open_splits.size();
    for (size_t i = 0; i < cap && i < ev->open_splits.size(); ++i) {
      const hb::ps::SplitLease &l = ev->open_splits[i];
      hb_ps_split r = HB_PS_SPLIT_INIT;
      r.split = l.split, r.epoch = l.epoch, r.begin = l.begin, r.end = l.end;
      r.from = l.from, r.replay_end = l.replay_end;
      // Element i at the caller's stride (its struct_size).
      r.struct_size = std::min(stride, sizeof r);
      std::memcpy(reinterpret_cast<char *>(out) + i * stride, &r,
                  r.struct_size);
    }
  });
}

}  // extern "C"
