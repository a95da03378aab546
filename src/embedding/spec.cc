#include "embedding/spec.h"

#include <cmath>
#include <cstring>

#include "abi/error.h"

namespace hb {
namespace emb {

static void check_name(const char *name) {
  HB_CHECK_ARG(name && name[0], "embedding config: name is NULL or empty");
  size_t len = std::strlen(name);
  HB_CHECK_ARG(len <= 128,
               "embedding config: name '%.40s...' is longer than 128", name);
  // The name becomes part of checkpoint file names.
  for (size_t i = 0; i < len; ++i) {
    char c = name[i];
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
              (c >= '0' && c <= '9') || c == '_' || c == '-' ||
              (c == '.' && i > 0);
    HB_CHECK_ARG(ok,
                 "embedding config: name '%s' has character '%c' at %zu "
                 "(allowed: letters, digits, _ - and . not first)",
                 name, c, i);
  }
}

static void check_finite(double v, const char *field) {
  HB_CHECK_ARG(std::isfinite(v), "embedding config: %s = %g is not finite",
               field, v);
}

Spec spec_from_config(const hb_embedding_config *cfg) {
  HB_CHECK_ARG(cfg, "embedding config is NULL");
  HB_CHECK_ARG(
      cfg->struct_size >= offsetof(hb_embedding_config, dim) + sizeof(int64_t),
      "embedding config: struct_size %zu too small", cfg->struct_size);
  hb_embedding_config c = HB_EMBEDDING_CONFIG_INIT;
  std::memcpy(&c, cfg, std::min(cfg->struct_size, sizeof c));
  check_name(c.name);
  Spec s;
  s.name = c.name;
  HB_CHECK_ARG(c.dim > 0 && c.dim <= (1 << 20),
               "embedding '%s': dim %lld outside [1, 1048576]", c.name,
               (long long)c.dim);
  HB_CHECK_ARG(c.dtype == HB_FLOAT32,
               "embedding '%s': dtype %d unsupported (only HB_FLOAT32)", c.name,
               c.dtype);
  HB_CHECK_ARG(c.num_rows >= 0, "embedding '%s': num_rows %lld is negative",
               c.name, (long long)c.num_rows);
  HB_CHECK_ARG(
      c.partition == HB_PARTITION_MOD || c.partition == HB_PARTITION_DIV,
      "embedding '%s': unknown partition %d", c.name, c.partition);
  HB_CHECK_ARG(c.partition != HB_PARTITION_DIV || c.num_rows > 0,
               "embedding '%s': HB_PARTITION_DIV needs num_rows > 0 "
               "(a dynamic table has no contiguous blocks)",
               c.name);
  HB_CHECK_ARG(
      c.initializer >= HB_INIT_ZEROS && c.initializer <= HB_INIT_NORMAL,
      "embedding '%s': unknown initializer %d", c.name, c.initializer);
  check_finite(c.init_a, "init_a");
  check_finite(c.init_b, "init_b");
  HB_CHECK_ARG(c.initializer != HB_INIT_UNIFORM || c.init_a <= c.init_b,
               "embedding '%s': uniform initializer needs init_a <= init_b "
               "(got %g, %g)",
               c.name, c.init_a, c.init_b);
  HB_CHECK_ARG(c.initializer != HB_INIT_NORMAL || c.init_b >= 0,
               "embedding '%s': normal initializer stddev init_b = %g < 0",
               c.name, c.init_b);
  HB_CHECK_ARG(c.optimizer >= HB_OPT_SGD && c.optimizer <= HB_OPT_FTRL,
               "embedding '%s': unknown optimizer %d", c.name, c.optimizer);
  const char *hp[] = {"learning_rate",
                      "initial_accumulator",
                      "beta1",
                      "beta2",
                      "epsilon",
                      "l1",
                      "l2",
                      "lr_power"};
  double hv[] = {c.learning_rate,
                 c.initial_accumulator,
                 c.beta1,
                 c.beta2,
                 c.epsilon,
                 c.l1,
                 c.l2,
                 c.lr_power};
  for (int i = 0; i < 8; ++i) check_finite(hv[i], hp[i]);
  HB_CHECK_ARG(c.learning_rate > 0, "embedding '%s': learning_rate %g <= 0",
               c.name, c.learning_rate);
  HB_CHECK_ARG(c.epsilon >= 0, "embedding '%s': epsilon %g < 0", c.name,
               c.epsilon);
  if (c.optimizer == HB_OPT_ADAGRAD)
    HB_CHECK_ARG(c.initial_accumulator >= 0,
                 "embedding '%s': initial_accumulator %g < 0", c.name,
                 c.initial_accumulator);
  if (c.optimizer == HB_OPT_ADAM)
    HB_CHECK_ARG(
        c.beta1 >= 0 && c.beta1 < 1 && c.beta2 >= 0 && c.beta2 < 1,
        "embedding '%s': Adam needs beta1, beta2 in [0, 1) (got %g, %g)",
        c.name, c.beta1, c.beta2);
  if (c.optimizer == HB_OPT_FTRL) {
    HB_CHECK_ARG(c.initial_accumulator > 0,
                 "embedding '%s': FTRL initial_accumulator %g must be > 0",
                 c.name, c.initial_accumulator);
    HB_CHECK_ARG(c.l1 >= 0 && c.l2 >= 0,
                 "embedding '%s': FTRL l1 %g, l2 %g must be >= 0", c.name, c.l1,
                 c.l2);
    HB_CHECK_ARG(c.lr_power <= 0, "embedding '%s': FTRL lr_power %g > 0",
                 c.name, c.lr_power);
  }
  HB_CHECK_ARG(c.wire_dtype == HB_FLOAT32 || c.wire_dtype == HB_FLOAT16 ||
                   c.wire_dtype == HB_BFLOAT16,
               "embedding '%s': wire_dtype %d must be HB_FLOAT32, HB_FLOAT16 "
               "or HB_BFLOAT16",
               c.name, c.wire_dtype);
  HB_CHECK_ARG(c.device >= -1,
               "embedding '%s': device %d (use -1 for host memory, N >= 0 for "
               "CUDA device N)",
               c.name, c.device);
  HB_CHECK_ARG(c.placement == 0 || c.placement == 1,
               "embedding '%s': placement %d (0: HB_PLACEMENT_WORKERS, 1: "
               "HB_PLACEMENT_PS)",
               c.name, c.placement);
  if (c.placement == 1 && c.device >= 0)
    fail(HB_ERR_UNSUPPORTED,
         "embedding '%s': a table on the ps tasks lives in their host memory "
         "(device %d given)",
         c.name, c.device);
  s.dim = c.dim;
  s.num_rows = c.num_rows;
  s.partition = c.partition;
  s.initializer = c.initializer;
  s.init_a = c.init_a;
  s.init_b = c.init_b;
  s.seed = c.seed;
  s.optimizer = c.optimizer;
  s.learning_rate = c.learning_rate;
  s.initial_accumulator = c.initial_accumulator;
  s.beta1 = c.beta1;
  s.beta2 = c.beta2;
  s.epsilon = c.epsilon;
  s.l1 = c.l1;
  s.l2 = c.l2;
  s.lr_power = c.lr_power;
  s.wire_dtype = c.wire_dtype;
  s.device = c.device;
  s.placement = c.placement;
  s.life = lifecycle::policy_from_config(c.lifecycle, c.name);
  HB_CHECK_ARG(!s.life.enabled || c.num_rows == 0,
               "embedding '%s': a lifecycle needs a dynamic table (num_rows = "
               "0; got %lld): static rows cannot be admitted or evicted",
               c.name, (long long)c.num_rows);
  if (s.life.enabled && c.device >= 0)
    fail(HB_ERR_UNSUPPORTED,
         "embedding '%s': a lifecycle on a GPU table (device %d) is not "
         "supported; use a host table (device = -1)",
         c.name, c.device);
  if (s.life.enabled && s.placement == 1)  // HB_PLACEMENT_PS
    fail(HB_ERR_UNSUPPORTED,
         "embedding '%s': a lifecycle on a table placed on the ps tasks is "
         "not supported; use placement HB_PLACEMENT_WORKERS",
         c.name);
  return s;
}

ConfigFields spec_fields(const Spec &s) {
  static const char *const kPartitions[] = {"HB_PARTITION_MOD",
                                            "HB_PARTITION_DIV"};
  static const char *const kInits[] = {"HB_INIT_ZEROS", "HB_INIT_CONSTANT",
                                       "HB_INIT_UNIFORM", "HB_INIT_NORMAL"};
  static const char *const kOpts[] = {"HB_OPT_SGD", "HB_OPT_ADAGRAD",
                                      "HB_OPT_ADAM", "HB_OPT_FTRL"};
  // A validated spec: every enum is in range.
  ConfigFields f;
  f.add("name", "'" + s.name + "'");
  f.add("dim", s.dim);
  f.add("num_rows", s.num_rows);
  f.add("partition", kPartitions[s.partition]);
  f.add("initializer", kInits[s.initializer]);
  f.add_real("init_a", s.init_a);
  f.add_real("init_b", s.init_b);
  f.add("seed", format("%llu", static_cast<unsigned long long>(s.seed)));
  f.add("optimizer", kOpts[s.optimizer]);
  f.add_real("learning_rate", s.learning_rate);
  f.add_real("initial_accumulator", s.initial_accumulator);
  f.add_real("beta1", s.beta1);
  f.add_real("beta2", s.beta2);
  f.add_real("epsilon", s.epsilon);
  f.add_real("l1", s.l1);
  f.add_real("l2", s.l2);
  f.add_real("lr_power", s.lr_power);
  f.add("wire_dtype", s.wire_dtype == HB_FLOAT16    ? "HB_FLOAT16"
                      : s.wire_dtype == HB_BFLOAT16 ? "HB_BFLOAT16"
                                                    : "HB_FLOAT32");
  lifecycle::add_policy_fields(s.life, &f);
  return f;
}

uint64_t spec_fingerprint(const Spec &s) {
  return spec_fields(s).fingerprint();
}

}  // namespace emb
}  // namespace hb
