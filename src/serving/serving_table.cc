#include "serving/serving_table.h"

#include "abi/error.h"
#include "serving/pins.h"

namespace hb {
namespace serving {

ServingTable::ServingTable(const char *path) {
  HB_CHECK_ARG(path && path[0], "hb_embedding_open: path is NULL or empty");
  ExportImage im = read_export(path);
  if (!im.full())
    fail(HB_ERR_INVALID_ARGUMENT,
         "hb_embedding_open('%s'): a delta (version %lld on base %lld); open "
         "a full export, then apply deltas with hb_embedding_update",
         path, (long long)im.version, (long long)im.base);
  name_ = im.name;
  dim_ = im.dim;
  a_.reset(new Replica(im));
  b_.reset(new Replica(*a_));
  live_.store(a_.get(), std::memory_order_release);
  spare_ = b_.get();
}

ServingTable::~ServingTable() = default;

int64_t ServingTable::rows() const {
  Pin<Replica> pin(live_);
  return pin.get()->rows();
}

int64_t ServingTable::version() const {
  Pin<Replica> pin(live_);
  return pin.get()->version();
}

int64_t ServingTable::lookup(const int64_t *ids, size_t n, float *out) const {
  HB_CHECK_ARG(n == 0 || (ids && out),
               "hb_embedding_lookup('%s'): ids or out is NULL", name_.c_str());
  Pin<Replica> pin(live_);
  uint64_t miss = pin.get()->lookup(ids, n, out);
  if (miss) misses_.fetch_add(miss, std::memory_order_relaxed);
  return pin.get()->version();
}

Replica *ServingTable::publish(Replica *next) {
  Replica *old = live_.exchange(next, std::memory_order_seq_cst);
  wait_unpinned(old);
  return old;
}

void ServingTable::update(const char *path) {
  HB_CHECK_ARG(path && path[0], "hb_embedding_update('%s'): path is NULL",
               name_.c_str());
  std::lock_guard<std::mutex> lk(update_mu_);
  ExportImage im = read_export(path);
  // The spare replica equals the live one and no reader sees it: checks
  // read it, and nothing changes until every check passed.
  Replica &cur = *spare_;
  const std::string what =
      "hb_embedding_update('" + name_ + "', '" + std::string(path) + "')";
  if (im.name != name_ || im.dim != dim_)
    fail(HB_ERR_INVALID_ARGUMENT,
         "%s: the file holds table '%s' of dim %lld, this table is '%s' of "
         "dim %lld",
         what.c_str(), im.name.c_str(), (long long)im.dim, name_.c_str(),
         (long long)dim_);
  if (im.full()) {
    if (im.version <= cur.version())
      fail(HB_ERR_INVALID_ARGUMENT,
           "%s: full export of version %lld is not newer than the served "
           "version %lld",
           what.c_str(), (long long)im.version, (long long)cur.version());
    std::unique_ptr<Replica> next(new Replica(im));
    std::unique_ptr<Replica> copy(new Replica(*next));
    Replica *old = publish(next.get());
    (void)old;  // a_ and b_ are unpinned now: replace both
    a_ = std::move(next);
    b_ = std::move(copy);
    spare_ = b_.get();
    return;
  }
  if (im.base != cur.version() || im.lineage != cur.lineage())
    fail(HB_ERR_INVALID_ARGUMENT,
         "%s: delta from version %lld (table lineage %016llx) does not apply "
         "to the served version %lld (lineage %016llx); apply the deltas in "
         "order or open a newer full export",
         what.c_str(), (long long)im.base, (unsigned long long)im.lineage,
         (long long)cur.version(), (unsigned long long)cur.lineage());
  if (cur.rows_after(im) != im.total_rows)
    fail(HB_ERR_CORRUPT,
         "%s: applying this delta to version %lld gives %lld rows, the file "
         "says the table has %lld at version %lld",
         what.c_str(), (long long)cur.version(), (long long)cur.rows_after(im),
         (long long)im.total_rows, (long long)im.version);
  try {
    cur.apply(im);
  } catch (...) {  // out of memory half-way: the spare copies the live one
    *spare_ = *live_.load(std::memory_order_acquire);
    throw;
  }
  Replica *old = publish(spare_);
  try {
    old->apply(im);
  } catch (...) {
    *old = *spare_;
    throw;
  }
  spare_ = old;
}

}  // namespace serving
}  // namespace hb
