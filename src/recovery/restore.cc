#include "recovery/restore.h"

#include <cstring>
#include <memory>

#include "abi/error.h"
#include "comm/communicator.h"
#include "common/agreement.h"
#include "common/log.h"
#include "context/context.h"
#include "embedding/checkpoint.h"
#include "metrics/handle.h"
#include "ps/client.h"
#include "ps/ps_table.h"
#include "reader/handle.h"
#include "reader/resume.h"
#include "recovery/handle.h"
#include "recovery/layout.h"
#include "recovery/manifest.h"
#include "recovery/registry.h"
#include "recovery/retention.h"
#include "recovery/snapshot.h"
#include "recovery/test_hook.h"
#include "tables/handle.h"

namespace hb {
namespace recovery {
namespace {

struct Staged {
  std::vector<std::string> buffers;  // per registered buffer; unmapped: ""
  std::vector<bool> mapped;
  std::vector<reader::Sequence> sequences;
  std::vector<uint64_t> lines, skipped;
  std::vector<std::unique_ptr<metrics::State>> metrics;
  int unmapped = 0;
};

}  // namespace

std::string from_rank0(hb_checkpoint &c, const Outcome &o, const std::string &s,
                       const char *what) {
  const int world = c.ctx->cluster.world_size;
  std::vector<int64_t> n = agree(
      *c.x, o, std::vector<int64_t>(world, static_cast<int64_t>(s.size())),
      what, nullptr);
  std::string out(static_cast<size_t>(n[0]), '\0');
  if (world > 1 && n[0] > 0)
    comm::broadcast(*c.ctx, comm::Memory::kHost, s.data(), &out[0],
                    static_cast<size_t>(n[0]), HB_UINT8, 0);
  else
    out = s;
  return out;
}

namespace {

// Checks the candidate on this rank: its status (HB_OK, HB_ERR_CORRUPT: a
// damaged checkpoint, others: refused) and message.
hb_status check_candidate(hb_checkpoint &c, const std::string &path,
                          Manifest *m, std::string *message) {
  try {
    *m = read_manifest(path);
    if (m->job != c.job)
      fail(HB_ERR_INVALID_ARGUMENT,
           "job checkpoint '%s' belongs to job '%s', this job is '%s'",
           path.c_str(), m->job.c_str(), c.job.c_str());
    if (c.follower)
      check_items_present(m->items, registry_items(c), path);
    else
      check_same_items(m->items, registry_items(c), path);
    verify_files(path, *m, c.ctx->cluster.rank, c.ctx->cluster.world_size);
    return HB_OK;
  } catch (...) {
    hb_status st = status_from_current_exception();
    *message = hb_last_error();
    return st;
  }
}

// Every rank's status of the candidate; the same decision on every rank.
// Returns true to use it, false to pass over a damaged one; throws when
// refused.
bool agree_on_candidate(hb_checkpoint &c, const std::string &path,
                        Manifest *m) {
  std::string message;
  hb_status mine = check_candidate(c, path, m, &message);
  const int world = c.ctx->cluster.world_size;
  std::vector<int64_t> st =
      agree(*c.x, Outcome(), std::vector<int64_t>(world, mine),
            "hb_checkpoint_restore", nullptr);
  int refused = -1, damaged = -1;
  for (int r = 0; r < world; ++r) {
    if (st[r] == HB_ERR_CORRUPT && damaged < 0) damaged = r;
    if (st[r] != HB_OK && st[r] != HB_ERR_CORRUPT && refused < 0) refused = r;
  }
  if (refused >= 0) {
    if (mine != HB_OK && mine != HB_ERR_CORRUPT) throw Error(mine, message);
    fail(static_cast<hb_status>(st[refused]),
         "hb_checkpoint_restore: rank %d refused '%s' with %s (see its "
         "message)",
         refused, path.c_str(), hb_status_name(st[refused]));
  }
  if (damaged < 0) return true;
  if (mine == HB_ERR_CORRUPT)
    HB_LOG_WARN("job checkpoint '%s' is damaged: %s", path.c_str(),
                message.c_str());
  else
    HB_LOG_WARN("job checkpoint '%s' is damaged (rank %d found it)",
                path.c_str(), damaged);
  return false;
}

Staged stage(hb_checkpoint &c, const std::string &path, const Manifest &m) {
  const int rank = c.ctx->cluster.rank;
  const bool same_world = m.world == c.ctx->cluster.world_size;
  Staged s;
  for (const Buffer &b : c.buffers) {
    bool per_rank = b.flags & HB_BUFFER_PER_RANK;
    if (per_rank && !same_world) {
      HB_LOG_WARN(
          "job checkpoint '%s': per-rank buffer '%s' was saved by %d "
          "ranks, not %d: left unchanged",
          path.c_str(), b.name.c_str(), m.world, c.ctx->cluster.world_size);
      s.buffers.emplace_back();
      s.mapped.push_back(false);
      ++s.unmapped;
      continue;
    }
    std::string rel = per_rank ? rank_file("buffers", b.name, rank)
                               : replicated_buffer_file(b.name);
    const FileEntry *e = find_file(m, rel);
    if (!e)
      fail(HB_ERR_CORRUPT, "job checkpoint '%s': no file '%s' for buffer '%s'",
           path.c_str(), rel.c_str(), b.name.c_str());
    std::string data = read_checked(path, *e);
    HB_CHECK_ARG(data.size() == b.bytes,
                 "job checkpoint '%s': buffer '%s' of this rank has %zu bytes "
                 "there, %zu registered",
                 path.c_str(), b.name.c_str(), data.size(), b.bytes);
    s.buffers.push_back(std::move(data));
    s.mapped.push_back(true);
  }
  for (size_t i = 0; i < c.readers.size(); ++i) {
    std::vector<reader::SavedReader> old;
    for (int r = 0; r < m.world; ++r) {
      std::string rel = rank_file("readers", format("reader-%zu", i), r);
      const FileEntry *e = find_file(m, rel);
      if (!e)
        fail(HB_ERR_CORRUPT, "job checkpoint '%s': no file '%s'", path.c_str(),
             rel.c_str());
      old.push_back(
          reader::decode_reader(read_checked(path, *e), join_path(path, rel)));
    }
    const reader::Reader &r = *c.readers[i]->impl;
    uint64_t lines = 0, skipped = 0;
    s.sequences.push_back(reader::resume_sequence(r.files(), r.settings(), old,
                                                  r.shard(), r.num_shards(),
                                                  &lines, &skipped));
    s.lines.push_back(lines);
    s.skipped.push_back(skipped);
  }
  for (const MetricEntry &me : c.metrics) {
    auto state = metrics::make_state(me.metric->cfg);
    // Same world: this rank's own state; else every state merged into
    // rank 0 (the merged result is the same).
    int first = same_world ? rank : 0, last = same_world ? rank + 1 : m.world;
    if (!same_world && rank != 0) last = 0;
    for (int r = first; r < last; ++r) {
      std::string rel = rank_file("metrics", me.name, r);
      const FileEntry *e = find_file(m, rel);
      if (!e)
        fail(HB_ERR_CORRUPT, "job checkpoint '%s': no file '%s'", path.c_str(),
             rel.c_str());
      std::string data = read_checked(path, *e);
      std::string source = join_path(path, rel);
      metrics::merge_serialized(
          me.metric->cfg, state.get(),
          reinterpret_cast<const unsigned char *>(data.data()), data.size(),
          source.c_str());
    }
    s.metrics.push_back(std::move(state));
  }
  return s;
}

void load(hb_checkpoint &c, const std::string &path, const Manifest &m) {
  const char *what = "hb_checkpoint_restore";
  c.ctx->fire(HB_EVENT_BEFORE_LOAD, path.c_str());
  Outcome o;
  Staged s;
  try {
    s = stage(c, path, m);
  } catch (...) {
    o.capture();
  }
  agree(*c.x, o, what);
  test_point("restore_staged");
  ps::Client *ps_client = nullptr;
  for (hb_embedding *e : c.tables) {
    if (e->ps) {
      // Rank 0 has the ps tasks load the rows and the positions (all or
      // nothing); the others wait for its outcome.
      Outcome po;
      if (c.ctx->cluster.rank == 0) {
        try {
          e->ps->load_job(table_dir(path), m.nonce,
                          ps_writers(m, e->table->spec().name));
        } catch (...) {
          po.capture();
        }
      }
      agree(*c.x, po, what);
      ps_client = &e->ps->client();
      continue;
    }
    emb::load_checkpoint(*e->table, table_dir(path).c_str());
    if (e->gpu) e->gpu->upload();
  }
  // The split queue of the checkpoint, when it has one (rank 0 has ps task
  // 0 load it; the others wait): its open splits are handed out again from
  // their offsets there.
  if (ps_client) {
    const std::string q = "tables/" + ps::SplitQueue::file_name(m.nonce);
    bool has = false;
    for (const FileEntry &e : m.files) has = has || e.path == q;
    Outcome qo;
    if (has && c.ctx->cluster.rank == 0) {
      try {
        ps_client->split_load(table_dir(path), m.nonce);
      } catch (...) {
        qo.capture();
      }
    }
    if (has) agree(*c.x, qo, what);
  }
  // Every worker goes on after what the ps tasks now hold for it.
  if (ps_client) ps_client->resync();
  test_point("restore_tables");
  for (size_t i = 0; i < c.buffers.size(); ++i) {
    const Buffer &b = c.buffers[i];
    if (!s.mapped[i] || b.bytes == 0) continue;
    if (b.flags & HB_BUFFER_DEVICE)
      copy_device(*c.ctx, b.data, s.buffers[i].data(), b.bytes);
    else
      std::memcpy(b.data, s.buffers[i].data(), b.bytes);
  }
  for (size_t i = 0; i < c.readers.size(); ++i) {
    std::unique_ptr<reader::Reader> &impl = c.readers[i]->impl;
    impl = std::make_unique<reader::Reader>(
        impl->files(), impl->settings(), impl->shard(), impl->num_shards(),
        std::move(s.sequences[i]), s.lines[i], s.skipped[i]);
  }
  for (size_t i = 0; i < c.metrics.size(); ++i) {
    c.metrics[i].metric->state = std::move(s.metrics[i]);
    c.metrics[i].metric->flags = 0;
  }
  c.meta = m.meta;
  c.restored_path = path;
  c.stats.restored_step = m.step;
  c.stats.restored_world = m.world;
  c.stats.unmapped_buffers = s.unmapped;
  c.ctx->fire(HB_EVENT_AFTER_LOAD, path.c_str());
}

}  // namespace

int64_t restore_latest(hb_checkpoint &c) {
  c.stats.skipped_damaged = 0;
  Outcome o;
  std::string list;  // rank 0's candidates, one per line
  if (c.ctx->cluster.rank == 0) {
    try {
      for (const Candidate &cand : complete_checkpoints(c.root, nullptr))
        list += cand.path + "\n";
    } catch (...) {
      o.capture();
    }
  }
  list = from_rank0(c, o, list, "hb_checkpoint_restore_latest");
  size_t at = 0;
  while (at < list.size()) {
    size_t nl = list.find('\n', at);
    std::string path = list.substr(at, nl - at);
    at = nl + 1;
    Manifest m;
    if (!agree_on_candidate(c, path, &m)) {
      ++c.stats.skipped_damaged;
      continue;
    }
    if (c.stats.skipped_damaged > 0)
      HB_LOG_WARN(
          "job checkpoint: restoring '%s' (step %lld) after passing "
          "over %d damaged newer checkpoint(s)",
          path.c_str(), static_cast<long long>(m.step),
          c.stats.skipped_damaged);
    load(c, path, m);
    return m.step;
  }
  if (c.stats.skipped_damaged > 0)
    fail(HB_ERR_CORRUPT,
         "hb_checkpoint_restore_latest: every checkpoint in '%s' is damaged "
         "(%d; see the warnings): refusing a fresh start over them",
         c.root.c_str(), c.stats.skipped_damaged);
  return -1;
}

int64_t restore_path(hb_checkpoint &c, const std::string &path) {
  c.stats.skipped_damaged = 0;
  Manifest m;
  std::string message;
  hb_status mine = check_candidate(c, path, &m, &message);
  Outcome o;
  if (mine != HB_OK) {
    o.status = mine;
    o.message = message;
  }
  agree(*c.x, o, "hb_checkpoint_restore");
  load(c, path, m);
  return m.step;
}

}  // namespace recovery
}  // namespace hb
