// The validated, owned form of hb_embedding_lifecycle (hb.h, EXPERIMENTAL):
// what a table admits and evicts. Part of the table's Spec, so every rank
// must pass the same policy (the callback aside) and a checkpoint names it.
#pragma once

#include <cstddef>
#include <cstdint>

namespace hb {
class ConfigFields;
namespace lifecycle {

enum class Admit : int32_t { kAll = 0, kCount = 1, kBloom = 2 };
enum class Score : int32_t { kLru = 0, kLfu = 1 };

struct Policy {
  bool enabled = false;
  Admit admission = Admit::kAll;
  int32_t min_count = 1;
  int64_t bloom_bytes = 0;  // over all ranks
  double bloom_fpr = 0.01;
  int32_t bloom_hashes = 0;  // derived from bloom_fpr
  float default_value = 0;
  int64_t evict_interval = 1;
  int64_t ttl_steps = 0;
  double ttl_seconds = 0;
  int64_t max_rows = 0;
  Score score = Score::kLru;
  double min_l2_norm = 0;
  void (*on_evict)(const int64_t *ids, size_t n, void *user_data) = nullptr;
  void *user_data = nullptr;

  // Does an id need to be counted before it gets a row?
  bool counts() const { return admission != Admit::kAll && min_count > 1; }
  bool evicts() const {
    return ttl_steps > 0 || ttl_seconds > 0 || max_rows > 0 || min_l2_norm > 0;
  }
};

// From the public struct (which may be NULL: a disabled policy). Checks
// every field; throws HB_ERR_INVALID_ARGUMENT naming the table, the field
// and its value.
Policy policy_from_config(const void *hb_embedding_lifecycle_ptr,
                          const char *table);

// Adds the fields every rank must agree on (the callback aside), each by
// name ("lifecycle.max_rows"), so a mismatch names the fields that differ;
// nothing for a disabled policy.
void add_policy_fields(const Policy &p, ConfigFields *out);

}  // namespace lifecycle
}  // namespace hb
