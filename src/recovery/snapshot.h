// The state one rank saves at a step boundary. Synchronous saves refer to
// the live host state (written before the save returns); asynchronous ones
// copy it, so training goes on while a background thread writes the copy.
// GPU tables are downloaded and device buffers copied to the host either
// way (ordered on the context's stream).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "embedding/checkpoint.h"
#include "embedding/spec.h"
#include "recovery/manifest.h"

struct hb_checkpoint;

namespace hb {
namespace emb {
class Shard;
}
namespace ps {
class PsTable;
}
namespace recovery {

struct TableSnap {
  emb::Spec spec;
  int64_t words = 0, rows = 0;
  const emb::Shard *live = nullptr;  // synchronous save
  std::vector<int64_t> ids;          // asynchronous: the rows' ids ...
  std::vector<float> records;        // ... and records
  bool has_life = false;             // a table with a lifecycle ...
  std::string life_state;            // ... its section, copied at the step
  // A table on the ps tasks: rank 0 has them write their shards and
  // positions at the step boundary (save_ps_tables); the other ranks write
  // nothing for it.
  ps::PsTable *ps = nullptr;
  std::vector<emb::ShardFile> ps_shards, ps_positions;
};

// One file of bytes: a copy, or live memory (synchronous host buffers).
struct BlobSnap {
  std::string path;  // relative to the checkpoint directory
  std::string copy;
  const void *live = nullptr;
  size_t bytes = 0;
  const void *data() const { return live ? live : copy.data(); }
  size_t size() const { return live ? bytes : copy.size(); }
};

struct Snapshot {
  std::string root, ckpt, job;
  int64_t step = 0;
  uint64_t nonce = 0;
  int rank = 0, world = 1;
  int keep = 1;
  std::vector<std::string> items;
  std::map<std::string, std::string> meta;
  std::vector<TableSnap> tables;
  std::vector<BlobSnap> blobs;
  // The ps tier's split queue (ps task 0 wrote it; save_ps_tables), when
  // the job has one.
  std::vector<emb::ShardFile> ps_splits;
  uint64_t state_bytes = 0;  // what this rank saves
};

// Called on the training thread at the step boundary.
Snapshot take_snapshot(hb_checkpoint &c, bool copy);
// Rank 0, on the training thread once s.ckpt and s.nonce are set: the ps
// tasks write the shards and positions of s's ps tables (the other workers
// wait at the same step boundary, so nothing changes them meanwhile).
// The split queue too (its offsets agree with the tables: every worker is
// at the step boundary, its pushes answered and its offset committed).
void save_ps_tables(Snapshot &s);
// The number of ps tasks that wrote table `name` into checkpoint m (its
// positions files; 0 when it was not on ps tasks).
int ps_writers(const Manifest &m, const std::string &name);

// Device memory <-> host through the context's stream (waits).
void copy_device(hb_context &ctx, void *dst, const void *src, size_t bytes);

}  // namespace recovery
}  // namespace hb
