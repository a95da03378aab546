#include "reader/shard_plan.h"

#include <algorithm>

namespace hb {
namespace reader {
namespace {

uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

void add_file(std::vector<Chunk> *out, const FileInfo &f, int file,
              int64_t chunk_bytes) {
  if (f.gzip) {
    out->push_back(Chunk{file, 0, f.size});
  } else {
    add_range(out, file, 0, f.size, chunk_bytes);
  }
}

}  // namespace

int64_t range_start(int64_t total, int r, int n) {
  return static_cast<int64_t>(static_cast<__int128>(total) * r / n);
}

void add_range(std::vector<Chunk> *out, int file, int64_t begin, int64_t end,
               int64_t chunk_bytes) {
  for (int64_t b = begin; b < end; b += chunk_bytes) {
    Chunk c;
    c.file = file;
    c.begin = b;
    c.end = end - b > chunk_bytes ? b + chunk_bytes : end;
    out->push_back(c);
  }
}

std::vector<int> epoch_order(int num_files, bool shuffle, uint64_t seed,
                             int epoch) {
  std::vector<int> order(static_cast<size_t>(num_files));
  for (int i = 0; i < num_files; ++i) order[i] = i;
  if (!shuffle) return order;
  uint64_t state = splitmix64(seed ^ splitmix64(static_cast<uint64_t>(epoch)));
  for (int i = num_files - 1; i > 0; --i) {
    state = splitmix64(state);
    int j = static_cast<int>(state % static_cast<uint64_t>(i + 1));
    std::swap(order[i], order[j]);
  }
  return order;
}

std::vector<Chunk> plan_epoch(const std::vector<FileInfo> &files,
                              const std::vector<int> &order, int shard,
                              int num_shards, int64_t chunk_bytes) {
  std::vector<Chunk> out;
  const int n = static_cast<int>(order.size());
  if (n >= num_shards) {  // by file: position i goes to shard i % num_shards
    for (int i = shard; i < n; i += num_shards)
      add_file(&out, files[order[i]], order[i], chunk_bytes);
    return out;
  }
  // Fewer files than shards: the files laid end to end, cut into equal byte
  // ranges.
  int64_t total = 0;
  for (int i : order) total += files[i].size;
  return plan_range(files, order, range_start(total, shard, num_shards),
                    range_start(total, shard + 1, num_shards), chunk_bytes);
}

std::vector<Chunk> plan_range(const std::vector<FileInfo> &files,
                              const std::vector<int> &order, int64_t lo,
                              int64_t hi, int64_t chunk_bytes) {
  // Plain files are split at the cuts, a gzip file goes whole to the range
  // that holds its first byte.
  std::vector<Chunk> out;
  int64_t at = 0;  // global offset of the current file
  for (int i : order) {
    const FileInfo &f = files[i];
    if (f.gzip) {
      if (at >= lo && at < hi) out.push_back(Chunk{i, 0, f.size});
    } else {
      int64_t b = std::max(lo, at), e = std::min(hi, at + f.size);
      if (b < e) add_range(&out, i, b - at, e - at, chunk_bytes);
    }
    at += f.size;
  }
  return out;
}

}  // namespace reader
}  // namespace hb
