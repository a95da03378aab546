#include "serving/export_table.h"

#include <chrono>
#include <cstring>
#include <random>
#include <string>

#include "abi/error.h"
#include "serving/changes.h"
#include "serving/export_format.h"

namespace hb {
namespace serving {
namespace {

// Collective: every rank's payload to rank 0. Rank 0 gets them packed in
// rank order and each rank's size in *from; the others get nothing.
std::vector<unsigned char> gather_root(Exchange &x, const Outcome &o,
                                       const std::vector<unsigned char> &mine,
                                       const char *what,
                                       std::vector<int64_t> *from) {
  const int world = x.world();
  std::vector<int64_t> to(world, 0), zero(world, 0);
  to[0] = static_cast<int64_t>(mine.size());
  *from = agree(x, o, to, what, nullptr);
  int64_t total = 0;
  for (int64_t b : *from) total += b;
  std::vector<unsigned char> all(x.rank() == 0 ? static_cast<size_t>(total)
                                               : 0);
  x.alltoallv(mine.data(), to.data(), all.data(),
              x.rank() == 0 ? from->data() : zero.data());
  return all;
}

// Appends {id, dim weights} records.
void append_record(std::vector<unsigned char> *buf, int64_t id,
                   const float *rec, int64_t dim) {
  size_t at = buf->size();
  buf->resize(at + 8 + 4 * dim);
  std::memcpy(buf->data() + at, &id, 8);
  std::memcpy(buf->data() + at + 8, rec, 4 * dim);
}

uint64_t fresh_lineage() {
  std::random_device rd;
  uint64_t v = (static_cast<uint64_t>(rd()) << 32) ^ rd();
  v ^= static_cast<uint64_t>(
      std::chrono::steady_clock::now().time_since_epoch().count());
  return v ? v : 1;
}

}  // namespace

void export_table(emb::Table &t, const char *path) {
  Exchange &x = t.exchange();
  const emb::Spec &spec = t.spec();
  const std::string what = "hb_embedding_export('" + spec.name + "')";
  Outcome o;
  o.sig = t.call(kCallExport);
  std::vector<unsigned char> mine;
  try {
    HB_CHECK_ARG(path && path[0], "%s: path is NULL or empty", what.c_str());
    mine.reserve(static_cast<size_t>(t.shard().rows()) * (8 + 4 * spec.dim));
    t.shard().for_each([&](int64_t id, const float *rec) {
      append_record(&mine, id, rec, spec.dim);
    });
  } catch (...) {
    o.capture();
  }
  std::vector<int64_t> from;
  std::vector<unsigned char> all = gather_root(x, o, mine, what.c_str(), &from);
  Outcome o2;
  if (x.rank() == 0) {
    try {
      const size_t stride = 8 + 4 * static_cast<size_t>(spec.dim);
      write_export_v1(path, spec.name, spec.dim, all.data(),
                      all.size() / stride, stride);
    } catch (...) {
      o2.capture();
    }
  }
  agree(x, o2, what.c_str());
}

uint64_t export_version(emb::Table &t, ExportHistory &h, const char *path,
                        int64_t version, int64_t base, int64_t keep) {
  Exchange &x = t.exchange();
  const int world = x.world();
  const emb::Spec &spec = t.spec();
  const std::string what = "hb_embedding_export_version('" + spec.name +
                           "', version " + std::to_string(version) + ", base " +
                           std::to_string(base) + ")";
  // 1. The call, and the same version and base on every rank.
  Outcome o;
  o.sig = t.call(kCallExportVersion);
  try {
    HB_CHECK_ARG(path && path[0], "%s: path is NULL or empty", what.c_str());
    HB_CHECK_ARG(version > 0 && base >= 0 && keep > 0,
                 "%s: versions must be > 0, the base >= 0 (0: a full "
                 "export)",
                 what.c_str());
    HB_CHECK_ARG(version > h.last_version,
                 "%s: versions must increase; this table last exported "
                 "version %lld",
                 what.c_str(), (long long)h.last_version);
    if (base > 0 && !h.bases.count(base)) {
      std::string why;
      if (h.bases.empty())
        why =
            "this table made no versioned export since it was created or "
            "loaded";
      else if (base < h.bases.begin()->first)
        why = "version " + std::to_string(base) +
              " is older than the oldest base this table keeps (" +
              std::to_string(h.bases.begin()->first) +
              "; option delta_keep_versions = " + std::to_string(keep) + ")";
      else
        why = "this table never exported version " + std::to_string(base);
      fail(HB_ERR_INVALID_ARGUMENT,
           "%s: %s; export a full version (base 0) instead", what.c_str(),
           why.c_str());
    }
    if (base > 0 && h.bases.at(base) < oldest_delta_base(t))
      fail(HB_ERR_INVALID_ARGUMENT,
           "%s: the table was loaded from a checkpoint after version %lld; "
           "export a full version (base 0) instead",
           what.c_str(), (long long)base);
  } catch (...) {
    o.capture();
  }
  const int64_t args = version * 0x9E3779B97F4A7C15ll ^ base;
  std::vector<int64_t> seen =
      agree(x, o, std::vector<int64_t>(world, args), what.c_str(), nullptr);
  for (int p = 0; p < world; ++p)
    if (seen[p] != args)
      fail(HB_ERR_MISMATCH,
           "%s: rank %d passed another version or base than rank %d",
           what.c_str(), p, x.rank());
  // Every rank made the same call: close the write epoch this version ends.
  const uint64_t clock = seal_writes(t);

  // 2. This rank's rows (all, or changed after the base's clock) and the
  // ids it evicted since then, to rank 0: {n, n_evicted, records, ids}.
  Outcome o2;
  std::vector<unsigned char> mine(16);
  int64_t counts[2] = {0, 0};
  try {
    if (base == 0) {
      t.shard().for_each([&](int64_t id, const float *rec) {
        append_record(&mine, id, rec, spec.dim);
        ++counts[0];
      });
    } else {
      const uint64_t since = h.bases.at(base);
      rows_changed_since(t, since, [&](int64_t id, const float *rec) {
        append_record(&mine, id, rec, spec.dim);
        ++counts[0];
      });
      std::vector<int64_t> gone = evicted_since(t, since);
      counts[1] = static_cast<int64_t>(gone.size());
      size_t at = mine.size();
      mine.resize(at + 8 * gone.size());
      if (!gone.empty())
        std::memcpy(mine.data() + at, gone.data(), 8 * gone.size());
    }
    std::memcpy(mine.data(), counts, 16);
  } catch (...) {
    o2.capture();
  }
  std::vector<int64_t> from;
  std::vector<unsigned char> all =
      gather_root(x, o2, mine, what.c_str(), &from);
  int64_t rows_here = t.shard().rows(), total_rows = 0;
  std::vector<int64_t> rows_of =
      agree(x, Outcome(), std::vector<int64_t>(world, rows_here), what.c_str(),
            nullptr);
  for (int64_t r : rows_of) total_rows += r;

  // 3. Rank 0 writes; every rank records the base once it is committed.
  Outcome o3;
  uint64_t bytes = 0;
  if (x.rank() == 0) {
    try {
      const size_t stride = 8 + 4 * static_cast<size_t>(spec.dim);
      std::vector<unsigned char> records;
      std::vector<int64_t> evicted;
      size_t at = 0;
      for (int p = 0; p < world; ++p) {
        int64_t c[2];
        std::memcpy(c, all.data() + at, 16);
        const unsigned char *r = all.data() + at + 16;
        records.insert(records.end(), r, r + c[0] * stride);
        const unsigned char *e = r + c[0] * stride;
        size_t ne = evicted.size();
        evicted.resize(ne + c[1]);
        if (c[1]) std::memcpy(evicted.data() + ne, e, 8 * c[1]);
        at += static_cast<size_t>(from[p]);
      }
      if (h.lineage == 0) h.lineage = fresh_lineage();
      ExportHeader hd;
      hd.name = spec.name;
      hd.dim = spec.dim;
      hd.version = version;
      hd.base = base;
      hd.lineage = h.lineage;
      hd.total_rows = total_rows;
      bytes = write_export(path, hd, records.data(), records.size() / stride,
                           stride, std::move(evicted));
    } catch (...) {
      o3.capture();
    }
  }
  agree(x, o3, what.c_str());
  h.last_version = version;
  h.bases[version] = clock;
  while (static_cast<int64_t>(h.bases.size()) > keep)
    h.bases.erase(h.bases.begin());
  retain_evictions_since(t, h.bases.begin()->second);
  return bytes;
}

}  // namespace serving
}  // namespace hb
