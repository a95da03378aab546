// The validated, owned form of hb_embedding_config that every part of a
// table (shard, initializer, optimizer, checkpoint) reads.
#pragma once

#include <cstdint>
#include <string>

#include "common/fnv.h"
#include "common/mismatch.h"
#include "embedding/lifecycle/policy.h"
#include "hb.h"

namespace hb {
namespace emb {

struct Spec {
  std::string name;
  int64_t dim = 0;
  int64_t num_rows = 0;  // 0: dynamic
  int32_t partition = HB_PARTITION_MOD;
  int32_t initializer = HB_INIT_ZEROS;
  double init_a = 0, init_b = 0;
  uint64_t seed = 0;
  int32_t optimizer = HB_OPT_SGD;
  double learning_rate = 0.01;
  double initial_accumulator = 0.1;
  double beta1 = 0.9, beta2 = 0.999, epsilon = 1e-8;
  double l1 = 0, l2 = 0, lr_power = -0.5;
  hb_dtype wire_dtype = HB_FLOAT32;
  int32_t device = -1;     // CUDA device of the rows; -1: host memory
  lifecycle::Policy life;  // admission and eviction (disabled by default)
  // 0: sharded over the ranks; 1: on the ps tasks (HB_PLACEMENT_PS). Not
  // part of the fingerprint: checkpoints move between placements.
  int32_t placement = 0;

  bool dynamic() const { return num_rows == 0; }
};

// Copies min(cfg->struct_size, sizeof) bytes over the defaults and checks
// every field; throws HB_ERR_INVALID_ARGUMENT / HB_ERR_UNSUPPORTED naming
// the field and its value.
Spec spec_from_config(const hb_embedding_config *cfg);

// The fields that must agree on every rank, named as in
// hb_embedding_config (enums by their hb.h names). Where the rows live is
// not among them (a checkpoint of a GPU table loads into a host table).
ConfigFields spec_fields(const Spec &s);

// spec_fields(s).fingerprint().
uint64_t spec_fingerprint(const Spec &s);

}  // namespace emb
}  // namespace hb
