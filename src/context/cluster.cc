#include "context/cluster.h"

#include <cstdlib>

#include "abi/error.h"
#include "context/options.h"

namespace hb {
namespace {

// Far above any real job; keeps hostile values from sizing allocations.
constexpr int kMaxWorld = 65536;

// One integer of the cluster identity and where it came from, so that an
// error names the field or variable the user actually set.
struct Field {
  bool set = false;
  int value = 0;
  std::string name;  // "hb_context_options.rank" or "HB_RANK"
  bool from_options = false;
};

std::string env_or_empty(const char *name) {
  const char *v = std::getenv(name);
  return v ? v : "";
}

// The explicit option when it is not its "discover" value, else the
// environment variable when set and non-empty.
Field pick(int32_t explicit_value, int32_t discover_value, const char *field,
           const char *env, int min, int max) {
  Field f;
  if (explicit_value != discover_value) {
    f.name = std::string("hb_context_options.") + field;
    if (explicit_value < min || explicit_value > max)
      fail(HB_ERR_CONFIG, "%s=%d: out of range [%d, %d] (%d: discover)",
           f.name.c_str(), explicit_value, min, max, discover_value);
    f.set = f.from_options = true;
    f.value = explicit_value;
    return f;
  }
  std::string text = env_or_empty(env);
  if (text.empty()) return f;
  f.name = env;
  f.set = true;
  f.value = static_cast<int>(parse_int(text, env, min, max));
  return f;
}

void require_pair(const Field &given, const Field &missing,
                  const char *missing_env, const char *missing_field) {
  if (given.set && !missing.set)
    fail(HB_ERR_CONFIG, "%s is set but %s is not (nor hb_context_options.%s)",
         given.name.c_str(), missing_env, missing_field);
}

void check_less(const Field &index, const Field &size) {
  if (index.value >= size.value)
    fail(HB_ERR_CONFIG, "%s=%d out of range: %s is %d", index.name.c_str(),
         index.value, size.name.c_str(), size.value);
}

// rendezvous: hb_context_options.rendezvous, else the rendezvous option
// (HB_RENDEZVOUS or the options list). Empty: not given.
std::string explicit_rendezvous(const hb_context_options &o,
                                const Options &options, std::string *name) {
  if (o.rendezvous && *o.rendezvous) {
    *name = "hb_context_options.rendezvous";
    return o.rendezvous;
  }
  *name = "HB_RENDEZVOUS";
  return options.get_string("rendezvous");
}

ClusterInfo from_launcher(const hb_context_options &o, const Options &options,
                          const Field &rank, const Field &world) {
  require_pair(rank, world, "HB_WORLD_SIZE", "world_size");
  require_pair(world, rank, "HB_RANK", "rank");
  check_less(rank, world);
  Field local_rank =
      pick(o.local_rank, -1, "local_rank", "HB_LOCAL_RANK", 0, kMaxWorld - 1);
  Field local_world = pick(o.local_world_size, 0, "local_world_size",
                           "HB_LOCAL_WORLD_SIZE", 1, kMaxWorld);
  require_pair(local_rank, local_world, "HB_LOCAL_WORLD_SIZE",
               "local_world_size");
  require_pair(local_world, local_rank, "HB_LOCAL_RANK", "local_rank");

  ClusterInfo c;
  c.rank = rank.value;
  c.world_size = world.value;
  c.task_id = rank.value;
  c.task_type = "worker";
  if (local_rank.set) {
    check_less(local_rank, local_world);
    if (local_world.value > world.value)
      fail(HB_ERR_CONFIG, "%s=%d exceeds %s=%d", local_world.name.c_str(),
           local_world.value, world.name.c_str(), world.value);
    c.local_rank = local_rank.value;
    c.local_world_size = local_world.value;
  } else {
    // No local layout given: assume one host (the common single-node case).
    c.local_rank = rank.value;
    c.local_world_size = world.value;
  }
  std::string rdv_name;
  c.rendezvous = explicit_rendezvous(o, options, &rdv_name);
  if (c.world_size > 1) {
    if (c.rendezvous.empty())
      fail(HB_ERR_CONFIG,
           "%s is %d but no rendezvous address is given: set HB_RENDEZVOUS="
           "host:port (or hb_context_options.rendezvous)",
           world.name.c_str(), world.value);
    split_host_port(c.rendezvous, rdv_name.c_str(), nullptr, nullptr);
  }
  bool any_option = rank.from_options || world.from_options ||
                    local_rank.from_options || local_world.from_options;
  c.source = any_option ? "options" : "env";
  return c;
}

std::string host_of(const std::string &addr) {
  std::string host;
  split_host_port(addr, "TF_CONFIG host", &host, nullptr);
  return host;
}

ClusterInfo from_tf_config(const TfConfig &tf, const hb_context_options &o,
                           const Options &options) {
  ClusterInfo c;
  c.source = "tf_config";
  c.task_type = tf.task_type;
  c.task_id = tf.task_index;
  if (tf.task_type == "ps" || tf.task_type == "evaluator") {
    // Not part of the collective world: a world of one of its own.
    c.in_world = false;
    return c;
  }
  // The world is the chief (rank 0) followed by the workers.
  std::vector<std::string> members = tf.chief;
  members.insert(members.end(), tf.worker.begin(), tf.worker.end());
  c.world_size = static_cast<int>(members.size());
  c.rank = tf.task_type == "chief"
               ? tf.task_index
               : static_cast<int>(tf.chief.size()) + tf.task_index;
  // Local rank: position among the members that share this host name.
  std::string me = host_of(members[c.rank]);
  c.local_rank = 0;
  c.local_world_size = 0;
  for (int r = 0; r < c.world_size; ++r) {
    if (host_of(members[r]) != me) continue;
    if (r < c.rank) ++c.local_rank;
    ++c.local_world_size;
  }
  std::string name;
  c.rendezvous = explicit_rendezvous(o, options, &name);
  if (c.rendezvous.empty()) {
    c.rendezvous = members[0];
  } else {
    split_host_port(c.rendezvous, name.c_str(), nullptr, nullptr);
  }
  return c;
}

bool blank(const std::string &s) {
  return s.find_first_not_of(" \t\r\n") == std::string::npos;
}

}  // namespace

ClusterInfo discover_cluster(const hb_context_options *opts,
                             const Options &options) {
  hb_context_options o = HB_CONTEXT_OPTIONS_INIT;
  if (opts) o = *opts;
  bool served = false;
  std::string served_text = env_or_empty("HB_RENDEZVOUS_SERVED");
  if (!served_text.empty())
    served = parse_bool(served_text, "HB_RENDEZVOUS_SERVED");

  ClusterInfo c;
  Field rank = pick(o.rank, -1, "rank", "HB_RANK", 0, kMaxWorld - 1);
  Field world =
      pick(o.world_size, 0, "world_size", "HB_WORLD_SIZE", 1, kMaxWorld);
  std::string tf_config = env_or_empty("TF_CONFIG");
  if (rank.set || world.set) {
    c = from_launcher(o, options, rank, world);
  } else if (!blank(tf_config)) {
    c = from_tf_config(parse_tf_config(tf_config), o, options);
  } else {
    c.source = "default";  // a world of one, no network
  }
  c.launcher_serves = served;
  return c;
}

}  // namespace hb
