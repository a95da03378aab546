// TF_CONFIG, TensorFlow's cluster description, read and written with cJSON:
//   {"cluster": {"chief": ["h0:2222"], "worker": ["h1:2222", "h2:2222"],
//                "ps": ["h3:2222"]},
//    "task": {"type": "worker", "index": 1}}
// The variable comes from schedulers and users, so the parser trusts
// nothing: every rejection names the field, and sizes are capped.
#include <cjson/cJSON.h>

#include <climits>
#include <cmath>
#include <cstring>
#include <memory>
#include <set>
#include <unordered_map>

#include "abi/error.h"
#include "context/cluster.h"
#include "context/options.h"

namespace hb {
namespace {

constexpr size_t kMaxTfConfigBytes = 1 << 20;
constexpr size_t kMaxTasks = 65536;  // all roles together
const char *const kRoles[] = {"chief", "worker", "ps", "evaluator"};

using JsonPtr = std::unique_ptr<cJSON, decltype(&cJSON_Delete)>;

std::vector<std::string> *role_list(TfConfig &tf, const std::string &role) {
  if (role == "chief") return &tf.chief;
  if (role == "worker") return &tf.worker;
  if (role == "ps") return &tf.ps;
  if (role == "evaluator") return &tf.evaluator;
  return nullptr;
}

const char *json_type_name(const cJSON *item) {
  if (cJSON_IsObject(item)) return "an object";
  if (cJSON_IsArray(item)) return "an array";
  if (cJSON_IsString(item)) return "a string";
  if (cJSON_IsNumber(item)) return "a number";
  if (cJSON_IsBool(item)) return "a boolean";
  if (cJSON_IsNull(item)) return "null";
  return "invalid";
}

// cJSON keeps both copies of a repeated key and returns the first: reject
// them instead of silently picking one.
void check_unique_keys(const cJSON *object, const char *where) {
  std::set<std::string> seen;
  for (const cJSON *c = object->child; c; c = c->next) {
    std::string key = c->string ? c->string : "";
    if (!seen.insert(key).second)
      fail(HB_ERR_CONFIG, "TF_CONFIG: key %s appears twice in %s",
           quote_value(key).c_str(), where);
  }
}

const cJSON *require_member(const cJSON *object, const char *key,
                            const char *where) {
  const cJSON *item = cJSON_GetObjectItemCaseSensitive(object, key);
  if (!item) fail(HB_ERR_CONFIG, "TF_CONFIG: %s has no \"%s\"", where, key);
  return item;
}

void parse_cluster(const cJSON *cluster, TfConfig *tf) {
  if (!cJSON_IsObject(cluster))
    fail(HB_ERR_CONFIG, "TF_CONFIG: \"cluster\" is %s, expected an object",
         json_type_name(cluster));
  check_unique_keys(cluster, "\"cluster\"");
  size_t total = 0;
  // host:port (normalized) -> where it was first seen.
  std::unordered_map<std::string, std::string> seen;
  for (const cJSON *role = cluster->child; role; role = role->next) {
    std::string name = role->string ? role->string : "";
    std::vector<std::string> *list = role_list(*tf, name);
    if (!list)
      fail(HB_ERR_CONFIG,
           "TF_CONFIG: unknown role %s in \"cluster\" (expected chief, "
           "worker, ps or evaluator)",
           quote_value(name).c_str());
    if (!cJSON_IsArray(role))
      fail(HB_ERR_CONFIG,
           "TF_CONFIG: cluster.%s is %s, expected an array of \"host:port\" "
           "strings",
           name.c_str(), json_type_name(role));
    size_t index = 0;
    for (const cJSON *h = role->child; h; h = h->next, ++index) {
      std::string where = format("cluster.%s[%zu]", name.c_str(), index);
      if (++total > kMaxTasks)
        fail(HB_ERR_CONFIG,
             "TF_CONFIG: more than %zu tasks in \"cluster\" (at %s); that is "
             "the limit",
             kMaxTasks, where.c_str());
      if (!cJSON_IsString(h))
        fail(HB_ERR_CONFIG,
             "TF_CONFIG: %s is %s, expected a \"host:port\" string",
             where.c_str(), json_type_name(h));
      std::string addr = h->valuestring;
      std::string host;
      int port = 0;
      split_host_port(addr, ("TF_CONFIG " + where).c_str(), &host, &port);
      auto ins = seen.emplace(host + ":" + std::to_string(port), where);
      if (!ins.second)
        fail(HB_ERR_CONFIG, "TF_CONFIG: %s %s duplicates %s", where.c_str(),
             quote_value(addr).c_str(), ins.first->second.c_str());
      list->push_back(addr);
    }
  }
  if (tf->chief.size() > 1)
    fail(HB_ERR_CONFIG,
         "TF_CONFIG: cluster.chief has %zu entries; there is at most one chief",
         tf->chief.size());
  if (tf->chief.empty() && tf->worker.empty())
    fail(HB_ERR_CONFIG,
         "TF_CONFIG: \"cluster\" has no chief and no worker: nobody trains");
}

void parse_task(const cJSON *task, TfConfig *tf) {
  if (!cJSON_IsObject(task))
    fail(HB_ERR_CONFIG, "TF_CONFIG: \"task\" is %s, expected an object",
         json_type_name(task));
  check_unique_keys(task, "\"task\"");
  const cJSON *type = require_member(task, "type", "\"task\"");
  if (!cJSON_IsString(type))
    fail(HB_ERR_CONFIG, "TF_CONFIG: task.type is %s, expected a string",
         json_type_name(type));
  tf->task_type = type->valuestring;
  std::vector<std::string> *list = role_list(*tf, tf->task_type);
  if (!list)
    fail(HB_ERR_CONFIG,
         "TF_CONFIG: task.type %s is not a role (expected chief, worker, ps "
         "or evaluator)",
         quote_value(tf->task_type).c_str());
  // TensorFlow writes the index as a number; tolerate a missing one (0).
  const cJSON *index = cJSON_GetObjectItemCaseSensitive(task, "index");
  double v = 0;
  if (index) {
    if (!cJSON_IsNumber(index))
      fail(HB_ERR_CONFIG, "TF_CONFIG: task.index is %s, expected an integer",
           json_type_name(index));
    v = index->valuedouble;
    if (!(v >= 0 && v <= INT_MAX) || v != std::floor(v))
      fail(HB_ERR_CONFIG,
           "TF_CONFIG: task.index %.17g is not an integer in [0, %d]", v,
           INT_MAX);
  }
  tf->task_index = static_cast<int>(v);
  // TensorFlow does not list evaluators in the cluster; then there is one.
  bool unlisted_evaluator = tf->task_type == "evaluator" && list->empty();
  size_t size = unlisted_evaluator ? 1 : list->size();
  if (static_cast<size_t>(tf->task_index) >= size)
    fail(HB_ERR_CONFIG,
         "TF_CONFIG: task.index %d out of range: cluster.%s has %zu entr%s%s",
         tf->task_index, tf->task_type.c_str(), list->size(),
         list->size() == 1 ? "y" : "ies",
         unlisted_evaluator ? " (an unlisted evaluator has index 0)" : "");
}

}  // namespace

TfConfig parse_tf_config(const std::string &json) {
  if (json.size() > kMaxTfConfigBytes)
    fail(HB_ERR_CONFIG, "TF_CONFIG is %zu bytes; the limit is %zu", json.size(),
         kMaxTfConfigBytes);
  size_t nul = json.find('\0');
  if (nul != std::string::npos)
    fail(HB_ERR_CONFIG, "TF_CONFIG: NUL byte at offset %zu", nul);
  const char *end = nullptr;
  // cJSON 1.7.15 requires the terminating NUL inside buffer_length when it
  // must check that nothing follows the document: pass size() + 1.
  JsonPtr root(
      cJSON_ParseWithLengthOpts(json.c_str(), json.size() + 1, &end, 1),
      cJSON_Delete);
  if (!root) {
    size_t at = end ? static_cast<size_t>(end - json.c_str()) : 0;
    if (at > json.size()) at = json.size();
    std::string near = json.substr(at, 16);
    for (char &c : near)
      if (static_cast<unsigned char>(c) < 0x20) c = ' ';
    fail(HB_ERR_CONFIG, "TF_CONFIG is not valid JSON: error at byte %zu%s%s%s",
         at, near.empty() ? " (end of input)" : " near '", near.c_str(),
         near.empty() ? "" : "'");
  }
  if (!cJSON_IsObject(root.get()))
    fail(HB_ERR_CONFIG, "TF_CONFIG is %s, expected an object",
         json_type_name(root.get()));
  check_unique_keys(root.get(), "the top level");
  TfConfig tf;
  parse_cluster(require_member(root.get(), "cluster", "the top level"), &tf);
  parse_task(require_member(root.get(), "task", "the top level"), &tf);
  return tf;
}

}  // namespace hb

namespace {

using hb::fail;

cJSON *add_host_array(cJSON *cluster, const char *role,
                      const char *const *hosts, size_t n) {
  cJSON *array = cJSON_AddArrayToObject(cluster, role);
  if (!array) throw std::bad_alloc();
  for (size_t i = 0; i < n; ++i) {
    cJSON *s = cJSON_CreateString(hosts[i]);
    if (!s) throw std::bad_alloc();
    cJSON_AddItemToArray(array, s);
  }
  return array;
}

void check_hosts(const char *name, const char *const *hosts, size_t n) {
  HB_CHECK_ARG(n == 0 || hosts, "hb_tf_config_build: %s is NULL but n is %zu",
               name, n);
  for (size_t i = 0; i < n; ++i) {
    HB_CHECK_ARG(hosts[i], "hb_tf_config_build: %s[%zu] is NULL", name, i);
    // Entry i is task i: an empty one cannot be skipped without renumbering.
    HB_CHECK_ARG(hosts[i][0], "hb_tf_config_build: %s[%zu] is empty", name, i);
  }
}

}  // namespace

extern "C" hb_status hb_tf_config_build(const char *task_type, int32_t task_id,
                                        const char *const *worker_hosts,
                                        size_t n_workers,
                                        const char *const *ps_hosts,
                                        size_t n_ps, int32_t has_evaluator,
                                        char *buf, size_t cap, size_t *needed) {
  return hb::guard([&] {
    HB_CHECK_ARG(task_type, "hb_tf_config_build: task_type is NULL");
    HB_CHECK_ARG(
        n_workers >= 1,
        "hb_tf_config_build: no worker_hosts (the first is the chief)");
    check_hosts("worker_hosts", worker_hosts, n_workers);
    check_hosts("ps_hosts", ps_hosts, n_ps);
    HB_CHECK_ARG(buf || cap == 0,
                 "hb_tf_config_build: buf is NULL but cap is %zu", cap);
    std::string type = task_type;
    size_t role_size = type == "chief"       ? 1
                       : type == "worker"    ? n_workers - 1
                       : type == "ps"        ? n_ps
                       : type == "evaluator" ? (has_evaluator ? 1 : 0)
                                             : SIZE_MAX;
    HB_CHECK_ARG(role_size != SIZE_MAX,
                 "hb_tf_config_build: task_type %s is not chief, worker, ps or "
                 "evaluator",
                 hb::quote_value(type).c_str());
    HB_CHECK_ARG(
        task_id >= 0 && static_cast<size_t>(task_id) < role_size,
        "hb_tf_config_build: task_id %d out of range for %s (%zu "
        "task%s%s)",
        task_id, type.c_str(), role_size, role_size == 1 ? "" : "s",
        type == "evaluator" && !has_evaluator ? ", has_evaluator is 0" : "");

    hb::JsonPtr root(cJSON_CreateObject(), cJSON_Delete);
    if (!root) throw std::bad_alloc();
    cJSON *cluster = cJSON_AddObjectToObject(root.get(), "cluster");
    cJSON *task = cJSON_AddObjectToObject(root.get(), "task");
    if (!cluster || !task) throw std::bad_alloc();
    add_host_array(cluster, "chief", worker_hosts, 1);
    if (n_workers > 1)
      add_host_array(cluster, "worker", worker_hosts + 1, n_workers - 1);
    if (n_ps > 0) add_host_array(cluster, "ps", ps_hosts, n_ps);
    if (!cJSON_AddStringToObject(task, "type", task_type) ||
        !cJSON_AddNumberToObject(task, "index", task_id))
      throw std::bad_alloc();
    char *text = cJSON_PrintUnformatted(root.get());
    if (!text) throw std::bad_alloc();
    std::string json(text);
    cJSON_free(text);

    // Whatever we write must read back: bad or duplicate hosts are caught by
    // the same checks that guard TF_CONFIG.
    try {
      hb::parse_tf_config(json);
    } catch (const hb::Error &e) {
      fail(HB_ERR_INVALID_ARGUMENT, "hb_tf_config_build: %s", e.what());
    }
    if (needed) *needed = json.size() + 1;
    HB_CHECK_ARG(cap >= json.size() + 1,
                 "hb_tf_config_build: buf has %zu bytes, %zu needed", cap,
                 json.size() + 1);
    std::memcpy(buf, json.c_str(), json.size() + 1);
  });
}
