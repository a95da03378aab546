#include "serving/export_format.h"

#include <algorithm>
#include <cstring>
#include <numeric>

#include "abi/error.h"
#include "common/bytes.h"
#include "common/file_io.h"
#include "embedding/id_map.h"
#include "hb.h"

namespace hb {
namespace serving {
namespace {

const char kMagic[8] = {'H', 'B', 'E', 'M', 'B', 'E', 'X', '1'};
const uint32_t kFormatV1 = 1, kFormatV2 = 2;
const char kPad[8] = {0};

// Ids are coded in ascending order as LEB128 varints of the gap between
// successive order-preserving unsigned keys (id ^ 2^63; the first gap from
// 0): a dense or clustered id set costs 1-2 bytes per id.
uint64_t key_of(int64_t id) {
  return static_cast<uint64_t>(id) ^ (uint64_t{1} << 63);
}

void put_ids(const std::vector<int64_t> &sorted, std::string *out) {
  uint64_t prev = 0;
  for (int64_t id : sorted) {
    uint64_t k = key_of(id), gap = k - prev;
    prev = k;
    while (gap >= 0x80) {
      out->push_back(static_cast<char>((gap & 0x7f) | 0x80));
      gap >>= 7;
    }
    out->push_back(static_cast<char>(gap));
  }
}

// Decodes exactly `count` ids from `bytes`; anything else is corrupt.
void get_ids(const char *p, size_t bytes, int64_t count, const char *field,
             const std::string &what, std::vector<int64_t> *out) {
  out->resize(static_cast<size_t>(count));
  const char *end = p + bytes;
  uint64_t prev = 0;
  for (int64_t i = 0; i < count; ++i) {
    uint64_t gap = 0;
    int shift = 0;
    for (;;) {
      if (p == end || shift > 63)
        fail(HB_ERR_CORRUPT, "%s: %s: id %lld of %lld is cut off or too long",
             what.c_str(), field, (long long)i, (long long)count);
      unsigned char b = static_cast<unsigned char>(*p++);
      gap |= static_cast<uint64_t>(b & 0x7f) << shift;
      shift += 7;
      if (!(b & 0x80)) break;
    }
    if ((i > 0 && gap == 0) || prev + gap < prev)
      fail(HB_ERR_CORRUPT, "%s: %s: id %lld of %lld is not ascending",
           what.c_str(), field, (long long)i, (long long)count);
    prev += gap;
    (*out)[i] = static_cast<int64_t>(prev ^ (uint64_t{1} << 63));
  }
  if (p != end)
    fail(HB_ERR_CORRUPT, "%s: %s: %zu bytes after the last id", what.c_str(),
         field, static_cast<size_t>(end - p));
}

// Ascending runs merged rather than sorted (id_order), up to this many.
constexpr size_t kMaxRuns = 256;

// The order of `count` records of `stride` bytes by their leading int64 id.
std::vector<size_t> id_order(const unsigned char *records, size_t count,
                             size_t stride, std::vector<int64_t> *ids) {
  ids->resize(count);
  for (size_t i = 0; i < count; ++i)
    std::memcpy(&(*ids)[i], records + i * stride, 8);
  std::vector<size_t> order(count);
  std::iota(order.begin(), order.end(), size_t{0});
  const auto less = [&](size_t a, size_t b) { return (*ids)[a] < (*ids)[b]; };
  // A table gathered from its shards arrives as one ascending run per rank
  // (MOD: 0, 2, 4, .. then 1, 3, ..). std::sort's pivots degrade on that
  // pattern to its heapsort fallback (most of a 2-rank export's CPU at
  // 26 x 131072 rows): merge the runs instead, O(n log runs). Ids are
  // unique, so every correct order is this one.
  std::vector<size_t> runs{0};
  for (size_t i = 1; i < count && runs.size() <= kMaxRuns; ++i)
    if ((*ids)[i] < (*ids)[i - 1]) runs.push_back(i);
  if (runs.size() > kMaxRuns) {
    std::sort(order.begin(), order.end(), less);
    return order;
  }
  runs.push_back(count);
  for (size_t width = 1; width + 1 < runs.size(); width *= 2)
    for (size_t r = 0; r + width + 1 < runs.size(); r += 2 * width) {
      const size_t mid = runs[r + width];
      const size_t end = runs[std::min(r + 2 * width, runs.size() - 1)];
      std::inplace_merge(order.begin() + runs[r], order.begin() + mid,
                         order.begin() + end, less);
    }
  return order;
}

void write_name(AtomicFile &f, const std::string &name) {
  uint32_t len = static_cast<uint32_t>(name.size());
  f.write(&len, 4);
  f.write(name.data(), len);
  f.write(kPad, (8 - (len + 4) % 8) % 8);
}

void check_header(const std::string &what, uint32_t dtype, int64_t dim,
                  int64_t count, uint32_t name_len) {
  if (dtype != HB_FLOAT32 || dim <= 0 || dim > (1 << 20) || count < 0 ||
      count >= static_cast<int64_t>(emb::IdMap::kEmpty) || name_len > 4096)
    fail(HB_ERR_CORRUPT, "%s: bad header (dtype %u, dim %lld, count %lld)",
         what.c_str(), dtype, (long long)dim, (long long)count);
}

}  // namespace

ExportImage read_export(const std::string &path) {
  HB_CHECK_ARG(!path.empty(), "export path is NULL or empty");
  std::string data = read_whole_file(path);
  std::string what = "export file '" + path + "'";
  if (data.size() < 16)
    fail(HB_ERR_CORRUPT, "%s: %zu bytes, too short", what.c_str(), data.size());
  ByteReader rd(data, what);
  if (std::memcmp(rd.take(8, "magic"), kMagic, 8) != 0)
    fail(HB_ERR_CORRUPT, "%s: bad magic at byte 0 (not an hb export file)",
         what.c_str());
  uint32_t format = rd.get<uint32_t>("format version");
  if (format != kFormatV1 && format != kFormatV2)
    fail(HB_ERR_CORRUPT, "%s: unsupported format version %u", what.c_str(),
         format);
  uint64_t sum;
  std::memcpy(&sum, data.data() + data.size() - 8, 8);
  if (checksum64(data.data(), data.size() - 8) != sum)
    fail(HB_ERR_CORRUPT, "%s: checksum mismatch (truncated or corrupted)",
         what.c_str());
  ExportImage im;
  uint32_t dtype = rd.get<uint32_t>("dtype");
  im.dim = rd.get<int64_t>("dim");
  int64_t count = rd.get<int64_t>("count");
  int64_t evicted = 0, ids_bytes = 8 * count, evicted_bytes = 0;
  if (format == kFormatV2) {
    im.version = rd.get<int64_t>("version");
    im.base = rd.get<int64_t>("base_version");
    im.lineage = rd.get<uint64_t>("lineage");
    im.total_rows = rd.get<int64_t>("total_rows");
    evicted = rd.get<int64_t>("evicted_count");
    ids_bytes = rd.get<int64_t>("ids_bytes");
    evicted_bytes = rd.get<int64_t>("evicted_bytes");
    if (im.version <= 0 || im.base < 0 || im.base >= im.version ||
        im.total_rows < 0 || evicted < 0 || ids_bytes < 0 ||
        evicted_bytes < 0 || (im.full() && evicted != 0) ||
        (im.full() && im.total_rows != count))
      fail(HB_ERR_CORRUPT,
           "%s: bad header (version %lld, base %lld, rows %lld of %lld, "
           "evicted %lld)",
           what.c_str(), (long long)im.version, (long long)im.base,
           (long long)count, (long long)im.total_rows, (long long)evicted);
  }
  uint32_t name_len = rd.get<uint32_t>("name_len");
  check_header(what, dtype, im.dim, count, name_len);
  im.name.assign(rd.take(name_len, "name"), name_len);
  rd.take((8 - (name_len + 4) % 8) % 8, "padding");
  const uint64_t row_bytes = static_cast<uint64_t>(count) * 4 * im.dim;
  const uint64_t body = row_bytes + static_cast<uint64_t>(ids_bytes) +
                        static_cast<uint64_t>(evicted_bytes);
  if (rd.left() - 8 != body)
    fail(HB_ERR_CORRUPT,
         "%s: %zu bytes of ids and rows, header says %lld rows of dim %lld "
         "(%llu bytes)",
         what.c_str(), rd.left() - 8, (long long)count, (long long)im.dim,
         (unsigned long long)body);
  im.rows.resize(row_bytes / 4);
  if (format == kFormatV1) {
    const char *ids = rd.take(ids_bytes, "ids");
    im.ids.resize(count);
    if (count) std::memcpy(im.ids.data(), ids, ids_bytes);
    for (int64_t i = 1; i < count; ++i)
      if (im.ids[i] <= im.ids[i - 1])
        fail(HB_ERR_CORRUPT, "%s: id %lld (index %lld) is not ascending",
             what.c_str(), (long long)im.ids[i], (long long)i);
  }
  const char *rows = rd.take(row_bytes, "rows");
  if (count) std::memcpy(im.rows.data(), rows, row_bytes);
  if (format == kFormatV2) {
    get_ids(rd.take(ids_bytes, "ids"), ids_bytes, count, "ids", what, &im.ids);
    get_ids(rd.take(evicted_bytes, "evicted ids"), evicted_bytes, evicted,
            "evicted ids", what, &im.evicted);
    // Ascending both: one merge finds an id that is in both lists.
    for (size_t i = 0, j = 0; i < im.ids.size() && j < im.evicted.size();) {
      if (im.ids[i] == im.evicted[j])
        fail(HB_ERR_CORRUPT, "%s: id %lld is both updated and evicted",
             what.c_str(), (long long)im.ids[i]);
      im.ids[i] < im.evicted[j] ? ++i : ++j;
    }
  }
  return im;
}

uint64_t write_export(const std::string &path, const ExportHeader &h,
                      const unsigned char *records, size_t count, size_t stride,
                      std::vector<int64_t> evicted) {
  std::vector<int64_t> ids;
  std::vector<size_t> order = id_order(records, count, stride, &ids);
  std::vector<int64_t> sorted(count);
  for (size_t i = 0; i < count; ++i) sorted[i] = ids[order[i]];
  std::sort(evicted.begin(), evicted.end());
  std::string id_code, evicted_code;
  put_ids(sorted, &id_code);
  put_ids(evicted, &evicted_code);

  AtomicFile f(path);
  uint32_t format = kFormatV2, dtype = HB_FLOAT32;
  int64_t n = static_cast<int64_t>(count);
  int64_t ne = static_cast<int64_t>(evicted.size());
  int64_t nid = static_cast<int64_t>(id_code.size());
  int64_t nev = static_cast<int64_t>(evicted_code.size());
  f.write(kMagic, 8);
  f.write(&format, 4);
  f.write(&dtype, 4);
  f.write(&h.dim, 8);
  f.write(&n, 8);
  f.write(&h.version, 8);
  f.write(&h.base, 8);
  f.write(&h.lineage, 8);
  f.write(&h.total_rows, 8);
  f.write(&ne, 8);
  f.write(&nid, 8);
  f.write(&nev, 8);
  write_name(f, h.name);
  for (size_t i : order) f.write(records + i * stride + 8, 4 * h.dim);
  f.write(id_code.data(), id_code.size());
  f.write(evicted_code.data(), evicted_code.size());
  uint64_t sum = f.checksum();
  f.write(&sum, 8);
  uint64_t bytes = f.bytes();
  f.commit();
  return bytes;
}

void write_export_v1(const std::string &path, const std::string &name,
                     int64_t dim, const unsigned char *records, size_t count,
                     size_t stride) {
  std::vector<int64_t> ids;
  std::vector<size_t> order = id_order(records, count, stride, &ids);
  AtomicFile f(path);
  uint32_t format = kFormatV1, dtype = HB_FLOAT32;
  int64_t n = static_cast<int64_t>(count);
  f.write(kMagic, 8);
  f.write(&format, 4);
  f.write(&dtype, 4);
  f.write(&dim, 8);
  f.write(&n, 8);
  write_name(f, name);
  for (size_t i : order) f.write(&ids[i], 8);
  for (size_t i : order) f.write(records + i * stride + 8, 4 * dim);
  uint64_t sum = f.checksum();
  f.write(&sum, 8);
  f.commit();
}

}  // namespace serving
}  // namespace hb
