#include "comm/kv_gather.h"

#include "abi/error.h"
#include "rendezvous/kv.h"

namespace hb {
namespace comm {

namespace {

// Rank 0's part: every rank's value, its own included.
std::vector<std::string> gather_at_root(rdv::KV &kv, const std::string &prefix,
                                        int world, const std::string &value,
                                        int64_t timeout_ms) {
  std::vector<std::string> all(static_cast<size_t>(world));
  all[0] = value;
  for (int q = 1; q < world; ++q)
    all[size_t(q)] = kv.get(prefix + std::to_string(q), timeout_ms);
  return all;
}

}  // namespace

std::vector<std::string> kv_allgather(rdv::KV &kv, const std::string &prefix,
                                      int rank, int world,
                                      const std::string &value,
                                      int64_t timeout_ms) {
  const std::string all_key = prefix + "all";
  if (rank == 0) {
    std::vector<std::string> all =
        gather_at_root(kv, prefix, world, value, timeout_ms);
    std::string packed;
    for (const std::string &v : all)
      packed += std::to_string(v.size()) + ':' + v;
    kv.set(all_key, packed);
    return all;
  }
  std::vector<std::string> all(static_cast<size_t>(world));
  all[size_t(rank)] = value;
  kv.set(prefix + std::to_string(rank), value);
  const std::string packed = kv.get(all_key, timeout_ms);
  size_t at = 0;
  for (int q = 0; q < world; ++q) {
    const size_t colon = packed.find(':', at);
    size_t len = 0;
    bool digits = colon != std::string::npos && colon > at;
    for (size_t i = at; digits && i < colon; ++i) {
      digits = packed[i] >= '0' && packed[i] <= '9' && len < packed.size();
      len = len * 10 + size_t(packed[i] - '0');
    }
    if (!digits || len > packed.size() - colon - 1)
      fail(HB_ERR_CORRUPT,
           "rendezvous key %s: malformed gather of %d ranks at byte %zu",
           all_key.c_str(), world, at);
    if (q != rank) all[size_t(q)] = packed.substr(colon + 1, len);
    at = colon + 1 + len;
  }
  return all;
}

}  // namespace comm
}  // namespace hb
