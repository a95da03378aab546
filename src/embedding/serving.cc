#include "embedding/serving.h"

#include <algorithm>
#include <cstring>
#include <numeric>

#include "abi/error.h"
#include "embedding/bytes.h"
#include "embedding/file_io.h"

namespace hb {
namespace emb {
namespace {

const char kExportMagic[8] = {'H', 'B', 'E', 'M', 'B', 'E', 'X', '1'};
const uint32_t kExportVersion = 1;

}  // namespace

void write_export(const Spec &spec, const std::vector<unsigned char> &all,
                  const char *path) {
  const int64_t dim = spec.dim;
  const size_t rec_bytes = 8 + 4 * static_cast<size_t>(dim);
  size_t n = all.size() / rec_bytes;
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), size_t{0});
  auto id_at = [&](size_t i) {
    int64_t id;
    std::memcpy(&id, all.data() + i * rec_bytes, 8);
    return id;
  };
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return id_at(a) < id_at(b); });
  AtomicFile f(path);
  uint32_t version = kExportVersion, dtype = HB_FLOAT32;
  uint32_t name_len = static_cast<uint32_t>(spec.name.size());
  int64_t count = static_cast<int64_t>(n);
  f.write(kExportMagic, 8);
  f.write(&version, 4);
  f.write(&dtype, 4);
  f.write(&dim, 8);
  f.write(&count, 8);
  f.write(&name_len, 4);
  f.write(spec.name.data(), name_len);
  static const char pad[8] = {0};
  f.write(pad, (8 - (name_len + 4) % 8) % 8);
  for (size_t i : order) {
    int64_t id = id_at(i);
    f.write(&id, 8);
  }
  for (size_t i : order) f.write(all.data() + i * rec_bytes + 8, 4 * dim);
  uint64_t sum = f.checksum();
  f.write(&sum, 8);
  f.commit();
}

void export_table(Table &t, const char *path) {
  Exchange &x = t.exchange();
  const int rank = x.rank(), world = x.world();
  const Spec &spec = t.spec();
  const int64_t dim = spec.dim;
  const std::string what = "hb_embedding_export('" + spec.name + "')";
  // Records {id, dim weights} to rank 0.
  Outcome o;
  o.sig = t.call(kCallExport);
  std::vector<unsigned char> mine;
  const size_t rec_bytes = 8 + 4 * static_cast<size_t>(dim);
  try {
    HB_CHECK_ARG(path && path[0], "%s: path is NULL or empty", what.c_str());
    mine.resize(static_cast<size_t>(t.shard().rows()) * rec_bytes);
    unsigned char *p = mine.data();
    t.shard().for_each([&](int64_t id, const float *rec) {
      std::memcpy(p, &id, 8);
      std::memcpy(p + 8, rec, 4 * dim);
      p += rec_bytes;
    });
  } catch (...) {
    o.capture();
  }
  std::vector<int64_t> to(world, 0);
  to[0] = static_cast<int64_t>(mine.size());
  std::vector<int64_t> from = agree(x, o, to, what.c_str(), nullptr);
  std::vector<int64_t> zero(world, 0);
  int64_t total = 0;
  for (int64_t b : from) total += b;
  std::vector<unsigned char> all(rank == 0 ? static_cast<size_t>(total) : 0);
  x.alltoallv(mine.data(), to.data(), all.data(),
              rank == 0 ? from.data() : zero.data());

  Outcome o2;
  if (rank == 0) {
    try {
      write_export(spec, all, path);
    } catch (...) {
      o2.capture();
    }
  }
  agree(x, o2, what.c_str());
}

ServingTable::ServingTable(const char *path) {
  HB_CHECK_ARG(path && path[0], "hb_embedding_open: path is NULL or empty");
  std::string data = read_whole_file(path);
  std::string what = std::string("export file '") + path + "'";
  if (data.size() < 8 + 8)
    fail(HB_ERR_CORRUPT, "%s: %zu bytes, too short", what.c_str(), data.size());
  uint64_t sum;
  std::memcpy(&sum, data.data() + data.size() - 8, 8);
  ByteReader rd(data, what);
  if (std::memcmp(rd.take(8, "magic"), kExportMagic, 8) != 0)
    fail(HB_ERR_CORRUPT, "%s: bad magic at byte 0 (not an hb export file)",
         what.c_str());
  uint32_t version = rd.get<uint32_t>("version");
  if (version != kExportVersion)
    fail(HB_ERR_CORRUPT, "%s: unsupported format version %u", what.c_str(),
         version);
  if (checksum64(data.data(), data.size() - 8) != sum)
    fail(HB_ERR_CORRUPT, "%s: checksum mismatch (truncated or corrupted)",
         what.c_str());
  uint32_t dtype = rd.get<uint32_t>("dtype");
  dim_ = rd.get<int64_t>("dim");
  int64_t count = rd.get<int64_t>("count");
  uint32_t name_len = rd.get<uint32_t>("name_len");
  if (dtype != HB_FLOAT32 || dim_ <= 0 || dim_ > (1 << 20) || count < 0 ||
      count >= static_cast<int64_t>(IdMap::kEmpty) || name_len > 4096)
    fail(HB_ERR_CORRUPT, "%s: bad header (dtype %u, dim %lld, count %lld)",
         what.c_str(), dtype, (long long)dim_, (long long)count);
  name_.assign(rd.take(name_len, "name"), name_len);
  rd.take((8 - (name_len + 4) % 8) % 8, "padding");
  if (rd.left() != static_cast<size_t>(count) * (8 + 4 * dim_) + 8)
    fail(HB_ERR_CORRUPT,
         "%s: %zu bytes of ids and rows, header says %lld rows of dim %lld",
         what.c_str(), rd.left() - 8, (long long)count, (long long)dim_);
  ids_.resize(count);
  rows_.resize(count * dim_);
  const char *ids = rd.take(count * 8, "ids");
  const char *rows = rd.take(count * dim_ * 4, "rows");
  if (count > 0) {  // empty vectors may hold null
    std::memcpy(ids_.data(), ids, count * 8);
    std::memcpy(rows_.data(), rows, count * dim_ * 4);
  }
  map_.reset(count);
  for (int64_t i = 0; i < count; ++i) {
    bool inserted;
    map_.insert(ids_[i], static_cast<uint32_t>(i), &inserted);
    if (!inserted)
      fail(HB_ERR_CORRUPT, "%s: id %lld appears twice", what.c_str(),
           (long long)ids_[i]);
  }
}

void ServingTable::lookup(const int64_t *ids, size_t n, float *out) const {
  HB_CHECK_ARG(n == 0 || (ids && out),
               "hb_embedding_lookup('%s'): ids or out is NULL", name_.c_str());
  uint64_t miss = 0;
  for (size_t i = 0; i < n; ++i) {
    uint32_t idx = map_.find(ids[i]);
    float *o = out + i * dim_;
    if (idx == IdMap::kEmpty) {
      std::memset(o, 0, 4 * dim_);
      ++miss;
    } else {
      std::memcpy(o, rows_.data() + idx * dim_, 4 * dim_);
    }
  }
  if (miss) misses_.fetch_add(miss, std::memory_order_relaxed);
}

}  // namespace emb
}  // namespace hb
