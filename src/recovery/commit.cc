#include "recovery/commit.h"

#include <algorithm>
#include <chrono>

#include "abi/error.h"
#include "common/file_io.h"
#include "recovery/layout.h"
#include "recovery/manifest.h"
#include "recovery/retention.h"
#include "recovery/test_hook.h"
#include "recovery/writer.h"
#include "rendezvous/kv.h"

namespace hb {
namespace recovery {

std::function<void(const char *phase)> g_test_hook;

namespace {

std::string rank_key(const std::string &prefix, int r) {
  return prefix + "/rank-" + std::to_string(r);
}

// Rank 0, once every rank's files are committed: the tables' manifests,
// then the job MANIFEST.
void write_manifests(const Snapshot &s, const std::vector<RankFiles> &all) {
  Manifest m;
  m.job = s.job;
  m.step = s.step;
  m.world = s.world;
  m.nonce = s.nonce;
  m.saved_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                   std::chrono::system_clock::now().time_since_epoch())
                   .count();
  m.items = s.items;
  m.meta = s.meta;
  const std::string tables = table_dir(s.ckpt);
  size_t own = 0;  // the tables whose shards the ranks wrote
  for (size_t t = 0; t < s.tables.size(); ++t) {
    std::vector<emb::ShardFile> shards;
    if (s.tables[t].ps) {  // written by the ps tasks, for rank 0
      shards = s.tables[t].ps_shards;
      for (const auto *v : {&s.tables[t].ps_shards, &s.tables[t].ps_positions})
        for (const emb::ShardFile &f : *v)
          m.files.push_back({0, "tables/" + f.file, f.bytes, f.checksum});
    } else {
      for (int r = 0; r < s.world; ++r) {
        shards.push_back(all[r].shards[own]);
        m.files.push_back({r, "tables/" + all[r].shards[own].file,
                           all[r].shards[own].bytes,
                           all[r].shards[own].checksum});
      }
      ++own;
    }
    emb::write_manifest(s.tables[t].spec, s.tables[t].words, s.nonce, shards,
                        tables);
    std::string rel = "tables/" + s.tables[t].spec.name + ".manifest";
    std::string text = read_whole_file(join_path(s.ckpt, rel));
    m.files.push_back(
        {0, rel, text.size(), checksum64(text.data(), text.size())});
  }
  for (const emb::ShardFile &f : s.ps_splits)
    m.files.push_back({0, "tables/" + f.file, f.bytes, f.checksum});
  for (int r = 0; r < s.world; ++r)
    for (const FileEntry &e : all[r].files) m.files.push_back(e);
  std::string text = render_manifest(m);
  AtomicFile f(join_path(s.ckpt, "MANIFEST"));
  f.write(text.data(), text.size());
  f.commit();
}

}  // namespace

CommitResult write_and_commit(const Snapshot &s, rdv::KV *kv,
                              const std::string &prefix, int64_t timeout_ms) {
  CommitResult res;
  auto t0 = std::chrono::steady_clock::now();
  RankFiles mine;
  std::string mine_text;
  try {
    mine = write_rank_files(s);
    test_point("files_written");
    res.file_bytes = mine.bytes;
    mine_text = encode_rank_files(mine);
  } catch (...) {
    res.status = status_from_current_exception();
    res.message = hb_last_error();
    mine_text = format("error %d %s", res.status, res.message.c_str());
  }
  res.write_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
          .count();
  try {
    if (s.rank != 0) {
      kv->set(rank_key(prefix, s.rank), mine_text);
      if (res.status != HB_OK) return res;
      std::string verdict = kv->get(prefix + "/commit", timeout_ms);
      if (verdict != "ok")
        fail(HB_ERR_IO, "job checkpoint '%s' was not committed: %s",
             s.ckpt.c_str(), verdict.c_str());
      return res;
    }
    std::vector<RankFiles> all(static_cast<size_t>(s.world));
    std::string verdict = "ok";
    try {
      if (res.status != HB_OK) throw Error(res.status, res.message);
      all[0] = mine;
      const size_t own =
          std::count_if(s.tables.begin(), s.tables.end(),
                        [](const TableSnap &t) { return t.ps == nullptr; });
      for (int r = 1; r < s.world; ++r)
        all[r] =
            decode_rank_files(kv->get(rank_key(prefix, r), timeout_ms), r, own);
      test_point("manifest");
      write_manifests(s, all);
    } catch (const Error &e) {
      verdict = format("%s (%s)", e.what(), hb_status_name(e.status()));
      if (kv) kv->set(prefix + "/commit", verdict);
      throw;
    }
    if (kv) kv->set(prefix + "/commit", verdict);
    apply_retention(s.root, s.keep, s.ckpt);
  } catch (...) {
    res.status = status_from_current_exception();
    res.message = hb_last_error();
  }
  return res;
}

void publish_failure(rdv::KV *kv, const std::string &prefix, int rank,
                     hb_status status, const std::string &message) {
  if (!kv) return;
  try {
    if (rank == 0)
      kv->set(prefix + "/commit",
              format("rank 0 failed: %s (%s)", message.c_str(),
                     hb_status_name(status)));
    else
      kv->set(rank_key(prefix, rank),
              format("error %d %s", status, message.c_str()));
  } catch (...) {
    // The store is gone too: the others learn it from their Health.
  }
}

PendingSave::PendingSave(Snapshot s, rdv::KV *kv, std::string key_prefix,
                         int64_t timeout_ms, bool background)
    : snap_(std::move(s)),
      kv_(kv),
      prefix_(std::move(key_prefix)),
      timeout_ms_(timeout_ms) {
  auto run = [this] {
    result_ = write_and_commit(snap_, kv_, prefix_, timeout_ms_);
    done_ = true;
  };
  if (background)
    thread_ = std::thread(run);
  else
    run();
}

PendingSave::~PendingSave() {
  if (thread_.joinable()) thread_.join();
}

const CommitResult &PendingSave::wait() {
  if (thread_.joinable()) thread_.join();
  return result_;
}

}  // namespace recovery
}  // namespace hb
