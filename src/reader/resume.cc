#include "reader/resume.h"

#include <algorithm>
#include <cstring>
#include <map>

#include "abi/error.h"
#include "common/bytes.h"
#include "common/fnv.h"
#include "reader/chunk_cursor.h"
#include "reader/reader.h"

namespace hb {
namespace reader {
namespace {

const char kMagic[8] = {'H', 'B', 'R', 'D', 'P', 'O', 'S', '1'};

void put_chunk(std::string *out, const Chunk &c) {
  put<int32_t>(out, c.file);
  put<int32_t>(out, c.epoch);
  put<int64_t>(out, c.begin);
  put<int64_t>(out, c.end);
  put<int64_t>(out, c.skip_lines);
}

// The settings the saved reader's sequence was planned with.
Settings planned_with(const Settings &current, const SavedReader &s) {
  Settings p = current;
  p.num_epochs = s.num_epochs;
  p.shuffle = s.shuffle;
  p.seed = s.seed;
  p.chunk_bytes = s.chunk_bytes;
  return p;
}

// The epoch a saved reader is in: no line of a later epoch was handed out.
int current_epoch(const std::vector<FileInfo> &files, const Settings &plan,
                  const SavedReader &s) {
  ChunkCursor cur(&files, &plan, s.shard, s.num_shards, &s.seq);
  Chunk c;
  if (cur.seek(s.pos.chunk, &c)) return std::max(c.epoch, s.pos.epoch);
  return s.pos.epoch;
}

// s's chunks not handed out, through epoch `through`, in order.
std::vector<Chunk> remaining(const std::vector<FileInfo> &files,
                             const Settings &plan, const SavedReader &s,
                             int through) {
  std::vector<Chunk> out;
  ChunkCursor cur(&files, &plan, s.shard, s.num_shards, &s.seq);
  Chunk c;
  for (int64_t k = s.pos.chunk; cur.seek(k, &c) && c.epoch <= through; ++k) {
    if (k == s.pos.chunk && s.pos.partial) {
      if (files[c.file].gzip) {
        c.skip_lines = s.pos.next_line;
      } else {
        // The byte before a line start is its predecessor's newline: the
        // lines starting in (next_byte - 1, end] are the ones left.
        // (At the end of the file nothing is left, even when the last line
        // had no newline to stand before a next one.)
        c.begin = s.pos.next_byte - 1;
        if (c.begin >= c.end || s.pos.next_byte >= files[c.file].size) continue;
      }
    }
    out.push_back(c);
  }
  return out;
}

int64_t length(const std::vector<FileInfo> &files, const Chunk &c) {
  return files[c.file].gzip ? files[c.file].size : c.end - c.begin;
}

// Shard `shard`'s part of one epoch's remaining chunks, cut into equal
// byte ranges of their concatenation.
void cut(const std::vector<FileInfo> &files, const std::vector<Chunk> &rest,
         int shard, int num_shards, int64_t chunk_bytes,
         std::vector<Chunk> *out) {
  int64_t total = 0;
  for (const Chunk &c : rest) total += length(files, c);
  const int64_t lo = range_start(total, shard, num_shards);
  const int64_t hi = range_start(total, shard + 1, num_shards);
  int64_t at = 0;
  for (const Chunk &c : rest) {
    const int64_t n = length(files, c);
    if (files[c.file].gzip) {
      if (at >= lo && at < hi) out->push_back(c);
    } else {
      int64_t b = std::max(lo, at), e = std::min(hi, at + n);
      if (b < e) {
        size_t first = out->size();
        add_range(out, c.file, c.begin + (b - at), c.begin + (e - at),
                  chunk_bytes);
        for (size_t i = first; i < out->size(); ++i) (*out)[i].epoch = c.epoch;
      }
    }
    at += n;
  }
}

}  // namespace

uint64_t files_fingerprint(const std::vector<FileInfo> &files) {
  uint64_t h = kFnvBasis;
  for (const FileInfo &f : files) {
    h = fnv1a64(f.path.data(), f.path.size() + 1, h);
    h = fnv1a64(&f.size, sizeof f.size, h);
    h = fnv1a64(&f.gzip, sizeof f.gzip, h);
  }
  return h;
}

SavedReader save_reader(const Reader &r) {
  SavedReader s;
  s.files = files_fingerprint(r.files());
  s.num_epochs = r.settings().num_epochs;
  s.shuffle = r.settings().shuffle;
  s.seed = r.settings().seed;
  s.chunk_bytes = r.settings().chunk_bytes;
  s.shard = r.shard();
  s.num_shards = r.num_shards();
  s.seq = r.sequence();
  s.pos = r.position();
  return s;
}

std::string encode_reader(const SavedReader &s) {
  std::string out(kMagic, 8);
  put<uint64_t>(&out, s.files);
  put<int32_t>(&out, s.num_epochs);
  put<int32_t>(&out, s.shuffle);
  put<uint64_t>(&out, s.seed);
  put<int64_t>(&out, s.chunk_bytes);
  put<int32_t>(&out, s.shard);
  put<int32_t>(&out, s.num_shards);
  put<int32_t>(&out, s.seq.first_epoch);
  put<int64_t>(&out, static_cast<int64_t>(s.seq.prefix.size()));
  for (const Chunk &c : s.seq.prefix) put_chunk(&out, c);
  put<int64_t>(&out, s.pos.chunk);
  put<int32_t>(&out, s.pos.partial);
  put<int32_t>(&out, s.pos.epoch);
  put<int64_t>(&out, s.pos.next_byte);
  put<int64_t>(&out, s.pos.next_line);
  put<uint64_t>(&out, s.pos.lines);
  put<uint64_t>(&out, s.pos.skipped);
  return out;
}

SavedReader decode_reader(const std::string &bytes, const std::string &what) {
  ByteReader rd(bytes, what);
  if (std::memcmp(rd.take(8, "magic"), kMagic, 8) != 0)
    fail(HB_ERR_CORRUPT, "%s: not a saved reader (bad magic)", what.c_str());
  SavedReader s;
  s.files = rd.get<uint64_t>("files");
  s.num_epochs = rd.get<int32_t>("num_epochs");
  s.shuffle = rd.get<int32_t>("shuffle") != 0;
  s.seed = rd.get<uint64_t>("seed");
  s.chunk_bytes = rd.get<int64_t>("chunk_bytes");
  s.shard = rd.get<int32_t>("shard");
  s.num_shards = rd.get<int32_t>("num_shards");
  s.seq.first_epoch = rd.get<int32_t>("first_epoch");
  int64_t n = rd.get<int64_t>("prefix");
  if (n < 0 || static_cast<uint64_t>(n) > rd.left() / 32)
    fail(HB_ERR_CORRUPT, "%s: bad chunk count %lld", what.c_str(),
         static_cast<long long>(n));
  for (int64_t i = 0; i < n; ++i) {
    Chunk c;
    c.file = rd.get<int32_t>("file");
    c.epoch = rd.get<int32_t>("epoch");
    c.begin = rd.get<int64_t>("begin");
    c.end = rd.get<int64_t>("end");
    c.skip_lines = rd.get<int64_t>("skip_lines");
    s.seq.prefix.push_back(c);
  }
  s.pos.chunk = rd.get<int64_t>("chunk");
  s.pos.partial = rd.get<int32_t>("partial") != 0;
  s.pos.epoch = rd.get<int32_t>("epoch");
  s.pos.next_byte = rd.get<int64_t>("next_byte");
  s.pos.next_line = rd.get<int64_t>("next_line");
  s.pos.lines = rd.get<uint64_t>("lines");
  s.pos.skipped = rd.get<uint64_t>("skipped");
  if (rd.left() != 0 || s.chunk_bytes <= 0 || s.num_shards <= 0 ||
      s.shard < 0 || s.shard >= s.num_shards || s.pos.chunk < 0)
    fail(HB_ERR_CORRUPT, "%s: malformed saved reader", what.c_str());
  return s;
}

Sequence resume_sequence(const std::vector<FileInfo> &files,
                         const Settings &current,
                         const std::vector<SavedReader> &old, int shard,
                         int num_shards, uint64_t *lines, uint64_t *skipped) {
  HB_CHECK_ARG(!old.empty(), "reader restore: the checkpoint has no state");
  const uint64_t fp = files_fingerprint(files);
  for (const SavedReader &s : old) {
    HB_CHECK_ARG(s.files == fp,
                 "reader restore: the checkpoint's reader read other files "
                 "(paths or sizes differ from this reader's %zu files)",
                 files.size());
    HB_CHECK_ARG(s.num_epochs == current.num_epochs &&
                     s.shuffle == current.shuffle && s.seed == current.seed,
                 "reader restore: the checkpoint's reader had num_epochs %d, "
                 "shuffle %d, seed %llu; this one has %d, %d, %llu",
                 s.num_epochs, s.shuffle, (unsigned long long)s.seed,
                 current.num_epochs, current.shuffle,
                 (unsigned long long)current.seed);
    for (const Chunk &c : s.seq.prefix)
      if (c.file < 0 || c.file >= static_cast<int>(files.size()))
        fail(HB_ERR_CORRUPT, "reader restore: saved chunk of file %d of %zu",
             c.file, files.size());
  }
  *lines = *skipped = 0;
  // The same shard count: this shard's own lines, in the same order.
  for (const SavedReader &s : old) {
    if (s.num_shards != num_shards || s.shard != shard) continue;
    const Settings plan = planned_with(current, s);
    ChunkCursor cur(&files, &plan, s.shard, s.num_shards, &s.seq);
    Chunk c;
    Sequence seq;
    if (!cur.seek(s.pos.chunk, &c)) {  // it was done
      seq.first_epoch = std::max(s.pos.epoch + 1, s.seq.first_epoch);
    } else {
      seq.prefix = remaining(files, plan, s, c.epoch);
      seq.first_epoch = c.epoch + 1;
    }
    *lines = s.pos.lines;
    *skipped = s.pos.skipped;
    return seq;
  }
  // Another shard count: every old shard must be there, once.
  const int n_old = old[0].num_shards;
  std::vector<const SavedReader *> by_shard(static_cast<size_t>(n_old));
  for (const SavedReader &s : old) {
    HB_CHECK_ARG(s.num_shards == n_old && !by_shard[s.shard],
                 "reader restore: the checkpoint's readers are not one per "
                 "shard of %d (shard %d of %d)",
                 n_old, s.shard, s.num_shards);
    by_shard[s.shard] = &s;
  }
  for (int r = 0; r < n_old; ++r)
    HB_CHECK_ARG(by_shard[r],
                 "reader restore: the checkpoint lacks old shard %d of %d", r,
                 n_old);
  int through = -1;
  for (const SavedReader *s : by_shard)
    through =
        std::max(through, current_epoch(files, planned_with(current, *s), *s));
  // Per epoch, the old shards' remaining chunks in old shard order.
  std::map<int, std::vector<Chunk>> by_epoch;
  for (const SavedReader *s : by_shard) {
    for (const Chunk &c :
         remaining(files, planned_with(current, *s), *s, through))
      by_epoch[c.epoch].push_back(c);
    *lines += s->pos.lines;
    *skipped += s->pos.skipped;
  }
  if (shard != 0) *lines = *skipped = 0;
  Sequence seq;
  for (const auto &e : by_epoch)
    cut(files, e.second, shard, num_shards, current.chunk_bytes, &seq.prefix);
  seq.first_epoch = through + 1;
  return seq;
}

}  // namespace reader
}  // namespace hb
