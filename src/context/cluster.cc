#include "context/cluster.h"

#include <algorithm>
#include <cstdlib>
#include <vector>

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

// The variables one launcher sets for each process it starts. rank and
// size go together; the local pair is optional (local_size may be null:
// then derive_local_size tries, else one host is assumed).
struct LauncherVars {
  const char *source;  // ClusterInfo::source
  const char *rank, *size, *local_rank, *local_size;
};

const LauncherVars kHbVars = {"env", "HB_RANK", "HB_WORLD_SIZE",
                              "HB_LOCAL_RANK", "HB_LOCAL_WORLD_SIZE"};
// Other launchers, in discovery order (docs/multi-host.md).
const LauncherVars kOtherLaunchers[] = {
    {"torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"},
    {"openmpi", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
     "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE"},
    {"slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", nullptr},
    {"pmi", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS"},
};

// Every variable discovery looks at, for the message when it cannot decide.
std::string variables_seen() {
  std::vector<const char *> names = {
      "HB_RENDEZVOUS",        "MASTER_ADDR",
      "MASTER_PORT",          "SLURM_STEP_TASKS_PER_NODE",
      "SLURM_TASKS_PER_NODE", "SLURM_NODEID"};
  for (const LauncherVars &v : kOtherLaunchers)
    for (const char *n : {v.rank, v.size, v.local_rank, v.local_size})
      if (n) names.push_back(n);
  std::string out;
  for (const char *n : names) {
    std::string value = env_or_empty(n);
    if (value.empty()) continue;
    out +=
        (out.empty() ? "" : ", ") + std::string(n) + "=" + quote_value(value);
  }
  return out.empty() ? "none" : out;
}

// Slurm's compressed tasks-per-node list, "2(x3),1": the count of node
// `node` (0-based); -1 if the list is malformed or too short.
int slurm_tasks_on_node(const std::string &list, int node) {
  int seen = 0;
  for (size_t start = 0; start < list.size();) {
    size_t comma = std::min(list.find(',', start), list.size());
    std::string item = list.substr(start, comma - start);
    start = comma + 1;
    size_t paren = item.find("(x");
    try {
      int tasks = std::stoi(item.substr(0, paren));
      int repeat =
          paren == std::string::npos ? 1 : std::stoi(item.substr(paren + 2));
      if (tasks < 1 || repeat < 1 || repeat > kMaxWorld) return -1;
      if (node < seen + repeat) return tasks;
      seen += repeat;
    } catch (const std::exception &) {
      return -1;
    }
  }
  return -1;
}

// The local size of a launcher that has no variable for it (Slurm).
Field derive_local_size(const LauncherVars &v) {
  Field f;
  if (std::string(v.source) != "slurm") return f;
  std::string node = env_or_empty("SLURM_NODEID");
  for (const char *name :
       {"SLURM_STEP_TASKS_PER_NODE", "SLURM_TASKS_PER_NODE"}) {
    std::string list = env_or_empty(name);
    if (list.empty() || node.empty()) continue;
    int n = slurm_tasks_on_node(
        list, static_cast<int>(parse_int(node, "SLURM_NODEID", 0, kMaxWorld)));
    if (n < 1)
      fail(HB_ERR_CONFIG, "%s=%s has no count for SLURM_NODEID=%s", name,
           quote_value(list).c_str(), node.c_str());
    f.set = true;
    f.value = n;
    f.name = name;
    return f;
  }
  return f;
}

// HB_RENDEZVOUS (or the option) first; a launcher other than hbrun may
// instead give MASTER_ADDR and MASTER_PORT, whose port belongs to the
// framework's own store (torch.distributed): hb's is the next one.
std::string launcher_rendezvous(const hb_context_options &o,
                                const Options &options, bool other_launcher,
                                std::string *name) {
  std::string rv = explicit_rendezvous(o, options, name);
  if (!rv.empty() || !other_launcher) return rv;
  std::string addr = env_or_empty("MASTER_ADDR");
  std::string port_text = env_or_empty("MASTER_PORT");
  if (addr.empty() && port_text.empty()) return "";
  if (addr.empty() || port_text.empty())
    fail(HB_ERR_CONFIG, "%s is set but %s is not",
         addr.empty() ? "MASTER_PORT" : "MASTER_ADDR",
         addr.empty() ? "MASTER_ADDR" : "MASTER_PORT");
  int port = static_cast<int>(parse_int(port_text, "MASTER_PORT", 1, 65534));
  bool bare_ipv6 = addr.find(':') != std::string::npos && addr[0] != '[';
  *name = "MASTER_ADDR:MASTER_PORT+1";
  return (bare_ipv6 ? "[" + addr + "]" : addr) + ":" + std::to_string(port + 1);
}

ClusterInfo from_launcher(const hb_context_options &o, const Options &options,
                          const LauncherVars &v, const Field &rank,
                          const Field &world) {
  require_pair(rank, world, v.size, "world_size");
  require_pair(world, rank, v.rank, "rank");
  check_less(rank, world);
  Field local_rank =
      pick(o.local_rank, -1, "local_rank", v.local_rank, 0, kMaxWorld - 1);
  const char *local_size_name =
      v.local_size ? v.local_size : "SLURM_STEP_TASKS_PER_NODE";
  Field local_world = pick(o.local_world_size, 0, "local_world_size",
                           v.local_size ? v.local_size : "", 1, kMaxWorld);
  if (!local_world.set && local_rank.set) local_world = derive_local_size(v);
  require_pair(local_rank, local_world, local_size_name, "local_world_size");
  require_pair(local_world, local_rank, v.local_rank, "local_rank");

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
  bool other_launcher = &v != &kHbVars;
  std::string rdv_name;
  c.rendezvous = launcher_rendezvous(o, options, other_launcher, &rdv_name);
  // Parameter-server workers without a collective world need no store.
  bool ps_alone = !options.get_string("ps_hosts").empty() &&
                  !options.get_bool("ps_collective");
  if (c.world_size > 1 && (!ps_alone || !c.rendezvous.empty())) {
    if (c.rendezvous.empty())
      fail(HB_ERR_CONFIG,
           "%s is %d but no rendezvous address is given: set HB_RENDEZVOUS="
           "host:port (or hb_context_options.rendezvous%s); variables seen: "
           "%s",
           world.name.c_str(), world.value,
           other_launcher ? ", or MASTER_ADDR and MASTER_PORT" : "",
           variables_seen().c_str());
    split_host_port(c.rendezvous, rdv_name.c_str(), nullptr, nullptr);
  }
  bool any_option = rank.from_options || world.from_options ||
                    local_rank.from_options || local_world.from_options;
  c.source = any_option ? "options" : v.source;
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
  c.ps_hosts = tf.ps;
  if (tf.task_type == "ps" || tf.task_type == "evaluator") {
    // Not part of the collective world: a world of one of its own (a ps
    // task serves the workers through hb_context_serve, src/ps).
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
  std::vector<std::string> ps_hosts =
      parse_ps_hosts(options.get_string("ps_hosts"));
  // A ps task started by hbrun --ps (or any scheduler): HB_TASK_TYPE=ps and
  // HB_TASK_ID index the ps_hosts list; it is not part of the world.
  std::string task_type = env_or_empty("HB_TASK_TYPE");
  if (!task_type.empty()) {
    if (task_type != "ps")
      fail(HB_ERR_CONFIG, "HB_TASK_TYPE=%s: only \"ps\" is known",
           quote_value(task_type).c_str());
    if (ps_hosts.empty())
      fail(HB_ERR_CONFIG, "HB_TASK_TYPE=ps but HB_PS_HOSTS is empty");
    c.task_type = "ps";
    c.task_id =
        static_cast<int>(parse_int(env_or_empty("HB_TASK_ID"), "HB_TASK_ID", 0,
                                   static_cast<int64_t>(ps_hosts.size()) - 1));
    c.in_world = false;
    c.ps_hosts = ps_hosts;
    c.source = "env";
    c.launcher_serves = served;
    return c;
  }
  Field rank = pick(o.rank, -1, "rank", "HB_RANK", 0, kMaxWorld - 1);
  Field world =
      pick(o.world_size, 0, "world_size", "HB_WORLD_SIZE", 1, kMaxWorld);
  std::string tf_config = env_or_empty("TF_CONFIG");
  const LauncherVars *launcher = rank.set || world.set ? &kHbVars : nullptr;
  for (const LauncherVars &v : kOtherLaunchers) {
    if (launcher) break;
    rank = pick(o.rank, -1, "rank", v.rank, 0, kMaxWorld - 1);
    world = pick(o.world_size, 0, "world_size", v.size, 1, kMaxWorld);
    if (rank.set || world.set) launcher = &v;
  }
  if (launcher) {
    c = from_launcher(o, options, *launcher, rank, world);
  } else if (!blank(tf_config)) {
    c = from_tf_config(parse_tf_config(tf_config), o, options);
  } else {
    c.source = "default";  // a world of one, no network
  }
  if (!ps_hosts.empty()) c.ps_hosts = ps_hosts;  // the option wins
  c.launcher_serves = served;
  return c;
}

std::vector<std::string> parse_ps_hosts(const std::string &list) {
  std::vector<std::string> out;
  if (list.empty()) return out;  // collective mode
  // Entry i is ps task i: a dropped empty entry would renumber the tasks.
  for (size_t start = 0, index = 0; start <= list.size(); ++index) {
    size_t comma = std::min(list.find(',', start), list.size());
    std::string item = list.substr(start, comma - start);
    start = comma + 1;
    if (item.empty())
      fail(HB_ERR_CONFIG,
           "ps_hosts (HB_PS_HOSTS)=%s: entry %zu is empty (entry i is the "
           "host:port of ps task i)",
           quote_value(list).c_str(), index);
    split_host_port(item, "ps_hosts entry", nullptr, nullptr);
    out.push_back(item);
  }
  return out;
}

}  // namespace hb
