#include "recovery/snapshot.h"

#include <cstring>

#include "context/context.h"
#include "context/context_gpu.h"
#include "embedding/lifecycle/checkpoint_state.h"
#include "embedding/lifecycle/lifecycle.h"
#include "embedding/optimizer.h"
#include "gpu/context_state.h"
#include "gpu/plugin_call.h"
#include "metrics/handle.h"
#include "ps/ps_table.h"
#include "reader/handle.h"
#include "reader/resume.h"
#include "recovery/handle.h"
#include "recovery/layout.h"
#include "recovery/manifest.h"
#include "tables/handle.h"

namespace hb {
namespace recovery {

void copy_device(hb_context &ctx, void *dst, const void *src, size_t bytes) {
  gpu::ContextState &st =
      gpu::context_state(ctx, "hb_checkpoint (HB_BUFFER_DEVICE)");
  gpu::plugin_call("hb_checkpoint: cudaMemcpyAsync", st.plugin().memcpy_async,
                   dst, src, bytes, st.stream());
  st.synchronize(ctx.timeout_ms());
}

Snapshot take_snapshot(hb_checkpoint &c, bool copy) {
  Snapshot s;
  s.rank = c.ctx->cluster.rank;
  s.world = c.ctx->cluster.world_size;
  for (hb_embedding *e : c.tables) {
    if (e->ps) {  // rows on the ps tasks: save_ps_tables
      TableSnap t;
      t.spec = e->ps->ps_spec();
      t.words = emb::Optimizer(t.spec).record_words();
      t.ps = e->ps;
      s.tables.push_back(std::move(t));
      continue;
    }
    if (e->gpu) e->gpu->download();  // the host shard is the snapshot
    const emb::Shard &shard = e->table->shard();
    TableSnap t;
    t.spec = e->table->spec();
    t.words = shard.record_words();
    t.rows = shard.rows();
    if (const lifecycle::Lifecycle *life = e->table->life()) {
      t.has_life = true;
      t.life_state = lifecycle::encode_state(shard, *e->table->row_meta(),
                                             life->admission());
    }
    if (copy) {
      t.ids.reserve(static_cast<size_t>(t.rows));
      t.records.reserve(static_cast<size_t>(t.rows * t.words));
      shard.for_each([&](int64_t id, const float *rec) {
        t.ids.push_back(id);
        t.records.insert(t.records.end(), rec, rec + t.words);
      });
    } else {
      t.live = &shard;
    }
    s.state_bytes += static_cast<uint64_t>(t.rows) * (8 + 4 * t.words);
    s.tables.push_back(std::move(t));
  }
  for (const Buffer &b : c.buffers) {
    bool per_rank = b.flags & HB_BUFFER_PER_RANK;
    if (!per_rank && s.rank != 0) continue;  // rank 0 writes replicated ones
    BlobSnap blob;
    blob.path = per_rank ? rank_file("buffers", b.name, s.rank)
                         : replicated_buffer_file(b.name);
    if (b.flags & HB_BUFFER_DEVICE) {
      blob.copy.resize(b.bytes);
      if (b.bytes) copy_device(*c.ctx, &blob.copy[0], b.data, b.bytes);
    } else if (copy) {
      blob.copy.assign(static_cast<const char *>(b.data), b.bytes);
    } else {
      blob.live = b.data;
      blob.bytes = b.bytes;
    }
    s.state_bytes += b.bytes;
    s.blobs.push_back(std::move(blob));
  }
  for (size_t i = 0; i < c.readers.size(); ++i) {
    BlobSnap blob;
    blob.path = rank_file("readers", format("reader-%zu", i), s.rank);
    blob.copy = reader::encode_reader(reader::save_reader(*c.readers[i]->impl));
    s.blobs.push_back(std::move(blob));
  }
  for (const MetricEntry &m : c.metrics) {
    BlobSnap blob;
    blob.path = rank_file("metrics", m.name, s.rank);
    metrics::Bytes b = metrics::serialize(m.metric->cfg, *m.metric->state);
    blob.copy.assign(reinterpret_cast<const char *>(b.data()), b.size());
    s.state_bytes += b.size();
    s.blobs.push_back(std::move(blob));
  }
  return s;
}

void save_ps_tables(Snapshot &s) {
  for (TableSnap &t : s.tables) {
    if (!t.ps) continue;
    ps::PsTable::JobFiles f = t.ps->save_job(table_dir(s.ckpt), s.nonce);
    t.ps_shards = std::move(f.shards);
    t.ps_positions = std::move(f.positions);
    for (const emb::ShardFile &sf : t.ps_shards) s.state_bytes += sf.bytes;
  }
  for (TableSnap &t : s.tables) {
    if (!t.ps) continue;
    emb::ShardFile f;
    f.file = ps::SplitQueue::file_name(s.nonce);
    if (t.ps->client().split_save(table_dir(s.ckpt), s.nonce, &f.bytes,
                                  &f.checksum))
      s.ps_splits.push_back(f);
    break;  // one queue per job: through the first ps table's client
  }
}

int ps_writers(const Manifest &m, const std::string &name) {
  const std::string prefix =
      format("tables/%s.%016llx.positions-", name.c_str(),
             static_cast<unsigned long long>(m.nonce));
  int n = 0;
  for (const FileEntry &e : m.files)
    if (e.path.compare(0, prefix.size(), prefix) == 0) ++n;
  return n;
}

}  // namespace recovery
}  // namespace hb
