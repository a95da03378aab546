// libFuzzer target for the TF_CONFIG parser. Beyond "no crash, no leak, no
// UB" (ASan + UBSan) it checks what the parser promises:
//   - a rejection is HB_ERR_CONFIG with a message that names the problem;
//   - an accepted document satisfies the cluster invariants;
//   - hb_tf_config_build writes an accepted cluster back to JSON that parses
//     to the same cluster and task.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "abi/error.h"
#include "context/cluster.h"
#include "hb.h"

namespace {

[[noreturn]] void broken(const char *what, const std::string &detail) {
  std::fprintf(stderr, "tf_config_fuzz: %s: %s\n", what, detail.c_str());
  std::abort();
}

void check_invariants(const hb::TfConfig &tf) {
  if (tf.chief.size() > 1) broken("accepted two chiefs", tf.chief[1]);
  if (tf.chief.empty() && tf.worker.empty()) broken("accepted no trainers", "");
  const std::vector<std::string> *list = tf.task_type == "chief"    ? &tf.chief
                                         : tf.task_type == "worker" ? &tf.worker
                                         : tf.task_type == "ps"     ? &tf.ps
                                         : tf.task_type == "evaluator"
                                             ? &tf.evaluator
                                             : nullptr;
  if (!list) broken("accepted task type", tf.task_type);
  size_t size = tf.task_type == "evaluator" && list->empty() ? 1 : list->size();
  if (tf.task_index < 0 || static_cast<size_t>(tf.task_index) >= size)
    broken("accepted index", std::to_string(tf.task_index));
  for (const auto *l : {&tf.chief, &tf.worker, &tf.ps, &tf.evaluator})
    for (const std::string &h : *l)
      if (hb::guard([&] {
            hb::split_host_port(h, "fuzz", nullptr, nullptr);
          }) != HB_OK)
        broken("accepted a bad host:port", h);
}

// Clusters hb_tf_config_build can express: one chief, no listed evaluator.
void check_round_trip(const hb::TfConfig &tf) {
  if (tf.chief.size() != 1 || !tf.evaluator.empty()) return;
  std::vector<const char *> workers{tf.chief[0].c_str()};
  for (const std::string &w : tf.worker) workers.push_back(w.c_str());
  std::vector<const char *> ps;
  for (const std::string &p : tf.ps) ps.push_back(p.c_str());
  size_t needed = 0;
  hb_tf_config_build(tf.task_type.c_str(), tf.task_index, workers.data(),
                     workers.size(), ps.data(), ps.size(),
                     tf.task_type == "evaluator", nullptr, 0, &needed);
  if (needed == 0)
    broken("build rejected an accepted cluster", hb_last_error());
  std::string json(needed, '\0');
  if (hb_tf_config_build(tf.task_type.c_str(), tf.task_index, workers.data(),
                         workers.size(), ps.data(), ps.size(),
                         tf.task_type == "evaluator", &json[0], json.size(),
                         nullptr) != HB_OK)
    broken("build failed", hb_last_error());
  json.resize(needed - 1);
  hb::TfConfig back;
  if (hb::guard([&] { back = hb::parse_tf_config(json); }) != HB_OK)
    broken("the built JSON does not parse", json + ": " + hb_last_error());
  if (back.chief != tf.chief || back.worker != tf.worker || back.ps != tf.ps ||
      back.task_type != tf.task_type || back.task_index != tf.task_index)
    broken("round trip changed the cluster", json);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string json(reinterpret_cast<const char *>(data), size);
  hb::TfConfig tf;
  hb_status st = hb::guard([&] { tf = hb::parse_tf_config(json); });
  if (st != HB_OK) {
    if (st != HB_ERR_CONFIG) broken("status", std::to_string(st));
    if (std::strncmp(hb_last_error(), "TF_CONFIG", 9) != 0)
      broken("message does not start with TF_CONFIG", hb_last_error());
    return 0;
  }
  check_invariants(tf);
  check_round_trip(tf);
  return 0;
}
