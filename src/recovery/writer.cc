#include "recovery/writer.h"

#include <cinttypes>
#include <sstream>

#include "abi/error.h"
#include "common/file_io.h"
#include "embedding/shard.h"
#include "recovery/layout.h"

namespace hb {
namespace recovery {

RankFiles write_rank_files(const Snapshot &s) {
  RankFiles out;
  const std::string tables = table_dir(s.ckpt);
  for (const TableSnap &t : s.tables) {
    if (t.ps) continue;  // the ps tasks wrote it (save_ps_tables)
    emb::RecordSource each;
    if (t.live) {
      each = [&](const emb::RecordVisitor &f) { t.live->for_each(f); };
    } else {
      each = [&](const emb::RecordVisitor &f) {
        for (size_t i = 0; i < t.ids.size(); ++i)
          f(t.ids[i], t.records.data() + i * t.words);
      };
    }
    emb::ShardFile sf = emb::write_shard_file(
        t.spec, t.words, t.rows, each, t.has_life ? &t.life_state : nullptr,
        tables, s.nonce, s.rank, s.world);
    out.bytes += sf.bytes;
    out.shards.push_back(sf);
  }
  for (const BlobSnap &b : s.blobs) {
    AtomicFile f(join_path(s.ckpt, b.path));
    f.write(b.data(), b.size());
    f.commit();
    out.files.push_back({s.rank, b.path, f.bytes(), f.checksum()});
    out.bytes += f.bytes();
  }
  return out;
}

std::string encode_rank_files(const RankFiles &f) {
  std::ostringstream o;
  o << "ok " << f.bytes << "\n";
  for (const emb::ShardFile &s : f.shards)
    o << "shard " << s.file << " " << s.bytes << " " << s.rows << " "
      << s.checksum << "\n";
  for (const FileEntry &e : f.files)
    o << "file " << e.path << " " << e.bytes << " " << e.checksum << "\n";
  return o.str();
}

RankFiles decode_rank_files(const std::string &text, int rank,
                            size_t num_tables) {
  if (text.compare(0, 6, "error ") == 0) {
    int status = HB_ERR_INTERNAL;
    size_t used = 0;
    std::sscanf(text.c_str() + 6, "%d%zn", &status, &used);
    std::string msg =
        text.size() > 6 + used + 1 ? text.substr(6 + used + 1) : "(no message)";
    fail(status, "job checkpoint: rank %d could not write its files: %s", rank,
         msg.c_str());
  }
  RankFiles f;
  std::istringstream in(text);
  std::string line;
  bool ok = true;
  while (ok && std::getline(in, line)) {
    std::istringstream ls(line);
    std::string key;
    ls >> key;
    if (key == "ok") {
      ok = static_cast<bool>(ls >> f.bytes);
    } else if (key == "shard") {
      emb::ShardFile s;
      ok = static_cast<bool>(ls >> s.file >> s.bytes >> s.rows >> s.checksum);
      f.shards.push_back(s);
    } else if (key == "file") {
      FileEntry e;
      e.rank = rank;
      ok = static_cast<bool>(ls >> e.path >> e.bytes >> e.checksum);
      f.files.push_back(e);
    } else {
      ok = false;
    }
  }
  if (!ok || f.shards.size() != num_tables)
    fail(HB_ERR_INTERNAL, "job checkpoint: malformed file list from rank %d",
         rank);
  return f;
}

}  // namespace recovery
}  // namespace hb
