#define HB_EXPERIMENTAL 1
#include "embedding/lifecycle/policy.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "abi/error.h"
#include "common/mismatch.h"
#include "hb.h"

namespace hb {
namespace lifecycle {

Policy policy_from_config(const void *ptr, const char *table) {
  Policy p;
  if (!ptr) return p;
  const hb_embedding_lifecycle *in =
      static_cast<const hb_embedding_lifecycle *>(ptr);
  HB_CHECK_ARG(in->struct_size >= offsetof(hb_embedding_lifecycle, min_count) +
                                      sizeof(int32_t),
               "embedding '%s': lifecycle struct_size %zu too small", table,
               in->struct_size);
  hb_embedding_lifecycle c = HB_EMBEDDING_LIFECYCLE_INIT;
  std::memcpy(&c, in, std::min(in->struct_size, sizeof c));
  p.enabled = true;
  HB_CHECK_ARG(c.admission >= HB_ADMIT_ALL && c.admission <= HB_ADMIT_BLOOM,
               "embedding '%s': lifecycle admission %d unknown", table,
               c.admission);
  p.admission = static_cast<Admit>(c.admission);
  HB_CHECK_ARG(c.min_count >= 1, "embedding '%s': lifecycle min_count %d < 1",
               table, c.min_count);
  p.min_count = c.min_count;
  if (p.admission == Admit::kBloom) {
    HB_CHECK_ARG(c.min_count <= 255,
                 "embedding '%s': lifecycle min_count %d > 255 (the Bloom "
                 "filter's counters are 8 bits)",
                 table, c.min_count);
    HB_CHECK_ARG(c.bloom_bytes >= 64,
                 "embedding '%s': lifecycle bloom_bytes %lld < 64", table,
                 (long long)c.bloom_bytes);
    HB_CHECK_ARG(c.bloom_fpr > 0 && c.bloom_fpr < 1,
                 "embedding '%s': lifecycle bloom_fpr %g outside (0, 1)", table,
                 c.bloom_fpr);
    p.bloom_bytes = c.bloom_bytes;
    p.bloom_fpr = c.bloom_fpr;
    // The optimal number of hashes for a rate p is log2(1/p).
    int k = static_cast<int>(std::lround(-std::log2(c.bloom_fpr)));
    p.bloom_hashes = k < 1 ? 1 : (k > 16 ? 16 : k);
  }
  HB_CHECK_ARG(std::isfinite(c.default_value),
               "embedding '%s': lifecycle default_value is not finite", table);
  p.default_value = c.default_value;
  HB_CHECK_ARG(c.evict_interval >= 1,
               "embedding '%s': lifecycle evict_interval %lld < 1", table,
               (long long)c.evict_interval);
  p.evict_interval = c.evict_interval;
  HB_CHECK_ARG(c.ttl_steps >= 0, "embedding '%s': lifecycle ttl_steps %lld < 0",
               table, (long long)c.ttl_steps);
  p.ttl_steps = c.ttl_steps;
  HB_CHECK_ARG(std::isfinite(c.ttl_seconds) && c.ttl_seconds >= 0,
               "embedding '%s': lifecycle ttl_seconds %g is not >= 0", table,
               c.ttl_seconds);
  p.ttl_seconds = c.ttl_seconds;
  HB_CHECK_ARG(c.max_rows >= 0, "embedding '%s': lifecycle max_rows %lld < 0",
               table, (long long)c.max_rows);
  p.max_rows = c.max_rows;
  HB_CHECK_ARG(c.score == HB_SCORE_LRU || c.score == HB_SCORE_LFU,
               "embedding '%s': lifecycle score %d unknown", table, c.score);
  p.score = static_cast<Score>(c.score);
  HB_CHECK_ARG(std::isfinite(c.min_l2_norm) && c.min_l2_norm >= 0,
               "embedding '%s': lifecycle min_l2_norm %g is not >= 0", table,
               c.min_l2_norm);
  p.min_l2_norm = c.min_l2_norm;
  p.on_evict = c.on_evict;
  p.user_data = c.user_data;
  return p;
}

void add_policy_fields(const Policy &p, ConfigFields *out) {
  if (!p.enabled) return;
  static const char *const kAdmit[] = {"HB_ADMIT_ALL", "HB_ADMIT_COUNT",
                                       "HB_ADMIT_BLOOM"};
  static const char *const kScore[] = {"HB_SCORE_LRU", "HB_SCORE_LFU"};
  // A validated policy: every enum is in range.
  out->add("lifecycle.admission", kAdmit[static_cast<int>(p.admission)]);
  out->add("lifecycle.min_count", p.min_count);
  out->add("lifecycle.bloom_bytes", p.bloom_bytes);
  out->add_real("lifecycle.bloom_fpr", p.bloom_fpr);
  out->add_real("lifecycle.default_value",
                static_cast<double>(p.default_value));
  out->add("lifecycle.evict_interval", p.evict_interval);
  out->add("lifecycle.ttl_steps", p.ttl_steps);
  out->add_real("lifecycle.ttl_seconds", p.ttl_seconds);
  out->add("lifecycle.max_rows", p.max_rows);
  out->add("lifecycle.score", kScore[static_cast<int>(p.score)]);
  out->add_real("lifecycle.min_l2_norm", p.min_l2_norm);
}

}  // namespace lifecycle
}  // namespace hb
