#include "recovery/registry.h"

#include <algorithm>

#include "abi/error.h"
#include "common/fnv.h"
#include "common/mismatch.h"
#include "embedding/optimizer.h"
#include "metrics/handle.h"
#include "recovery/handle.h"
#include "tables/handle.h"

namespace hb {
namespace recovery {

std::vector<std::string> registry_items(const hb_checkpoint &c) {
  std::vector<std::string> items;
  for (hb_embedding *e : c.tables) {
    const emb::Spec &s = e->table->spec();
    // A ps table keeps no shard here; its records are the optimizer's.
    const int64_t words = e->ps ? emb::Optimizer(s).record_words()
                                : e->table->shard().record_words();
    items.push_back(
        format("table %s dim %lld num_rows %lld optimizer %d "
               "record_words %lld",
               s.name.c_str(), static_cast<long long>(s.dim),
               static_cast<long long>(s.num_rows), s.optimizer,
               static_cast<long long>(words)));
  }
  for (const Buffer &b : c.buffers) {
    if (b.flags & HB_BUFFER_PER_RANK)
      items.push_back("buffer " + b.name + " per_rank");
    else
      items.push_back(
          format("buffer %s replicated %zu", b.name.c_str(), b.bytes));
  }
  for (size_t i = 0; i < c.readers.size(); ++i)
    items.push_back(format("reader %zu", i));
  for (const MetricEntry &m : c.metrics)
    items.push_back(format(
        "metric %s kind %d config %016llx", m.name.c_str(), m.metric->cfg.kind,
        static_cast<unsigned long long>(
            metrics::config_fields(m.metric->cfg).fingerprint())));
  return items;
}

ConfigFields registry_fields(const hb_checkpoint &c) {
  const std::vector<std::string> items = registry_items(c);
  const size_t plain = items.size() - c.metrics.size();  // metrics come last
  ConfigFields f;
  for (size_t i = 0; i < plain; ++i)
    f.add(format("registered[%zu]", i), "'" + items[i] + "'");
  // A metric's line carries a fingerprint of its config: name each field.
  for (size_t k = 0; k < c.metrics.size(); ++k) {
    const MetricEntry &m = c.metrics[k];
    const std::string key = format("registered[%zu]", plain + k);
    f.add(key, "'metric " + m.name + "'");
    const ConfigFields config = metrics::config_fields(m.metric->cfg);
    for (const ConfigFields::Field &x : config.fields())
      f.add(key + " " + x.name, x.value,
            format("metric '%s' %s", m.name.c_str(), x.name.c_str()));
  }
  return f;
}

uint64_t registry_fingerprint(const std::vector<std::string> &items) {
  uint64_t h = kFnvBasis;
  for (const std::string &s : items) h = fnv1a64(s.c_str(), s.size() + 1, h);
  return h;
}

void check_same_items(const std::vector<std::string> &saved,
                      const std::vector<std::string> &mine,
                      const std::string &ckpt) {
  size_t n = std::max(saved.size(), mine.size());
  for (size_t i = 0; i < n; ++i) {
    const std::string a = i < saved.size() ? saved[i] : "(nothing)";
    const std::string b = i < mine.size() ? mine[i] : "(nothing)";
    if (a != b)
      fail(HB_ERR_INVALID_ARGUMENT,
           "job checkpoint '%s' holds other state than is registered: item "
           "%zu is '%s' there, '%s' here",
           ckpt.c_str(), i, a.c_str(), b.c_str());
  }
}

void check_items_present(const std::vector<std::string> &saved,
                         const std::vector<std::string> &mine,
                         const std::string &ckpt) {
  for (const std::string &item : mine) {
    if (std::find(saved.begin(), saved.end(), item) != saved.end()) continue;
    // "<kind> <name> ...": what the checkpoint holds under the same name.
    size_t sp = item.find(' '), sp2 = item.find(' ', sp + 1);
    std::string key = item.substr(0, sp2) + " ", there = "nothing";
    for (const std::string &s : saved)
      if (s.compare(0, key.size(), key) == 0) there = "'" + s + "'";
    fail(HB_ERR_INVALID_ARGUMENT,
         "job checkpoint '%s' lacks '%s' (it holds %s under that name)",
         ckpt.c_str(), item.c_str(), there.c_str());
  }
}

}  // namespace recovery
}  // namespace hb
