// Every option hb knows, in documentation order. The environment override
// of option `foo_bar` is HB_FOO_BAR. docs/ lists them from this table
// (hb_option_describe), so the doc strings are user-facing.
#include <cstdint>

#include "context/options.h"

namespace hb {

const std::vector<OptionSpec> &option_table() {
  static const std::vector<OptionSpec> table = {
      {"timeout_ms", OptionType::kInt, "300000", nullptr, 1, INT64_C(86400000),
       "Timeout of every blocking call (collectives, barriers, rendezvous "
       "gets), in milliseconds."},
      {"connect_timeout_ms", OptionType::kInt, "60000", nullptr, 1, INT64_C(86400000),
       "How long hb_context_create waits for the rendezvous server and for "
       "every rank to arrive, in milliseconds."},
      {"heartbeat_interval_ms", OptionType::kInt, "500", nullptr, 10, 600000,
       "Interval between liveness heartbeats to the rendezvous server."},
      {"peer_timeout_ms", OptionType::kInt, "5000", nullptr, 100, INT64_C(86400000),
       "A rank silent for this long is declared lost: every other rank's "
       "calls fail with HB_ERR_PEER_FAILED. A closed connection is detected "
       "at once."},
      {"rendezvous", OptionType::kString, "", nullptr, 0, 0,
       "host:port of the rendezvous store (set by hbrun; otherwise rank 0 "
       "listens there)."},
      {"rendezvous_token", OptionType::kString, "", nullptr, 0, 0,
       "Shared secret: when set, clients that do not present it are refused "
       "with HB_ERR_PERMISSION."},
      {"max_frame_bytes", OptionType::kInt, "67108864", nullptr, 1024, INT64_C(1073741824),
       "Largest rendezvous frame accepted; a larger or malformed frame closes "
       "that connection."},
      {"log_level", OptionType::kEnum, "warn", "error|warn|info|debug", 0, 0,
       "Verbosity of hb's messages on stderr."},
      {"grad_nbuckets", OptionType::kInt, "0", nullptr, 0, 1 << 20,
       "hb_allreduce_many: split the tensors into this many buckets (as "
       "HybridBackend's HB_GRAD_NBUCKETS); 0 uses grad_bucket_bytes."},
      {"grad_bucket_bytes", OptionType::kInt, "16777216", nullptr, 1024, INT64_C(1) << 40,
       "hb_allreduce_many: target bucket size in bytes when grad_nbuckets is 0."},
      {"cpu_allreduce", OptionType::kEnum, "auto", "auto|ring|ring_chunked|halving_doubling|bcube", 0, 0,
       "Gloo algorithm for CPU allreduce, reduce_scatter and "
       "allreduce_many. auto: halving_doubling, or ring with two ranks "
       "below 256 KiB; with either every rank gets the same bits and "
       "hb_allreduce_many matches per-tensor calls bit for bit. ring and "
       "ring_chunked with more than two ranks do not promise that; bcube "
       "needs a power-of-two world."},
      {"cpu_host", OptionType::kString, "", nullptr, 0, 0,
       "Address this rank's CPU (Gloo TCP) transport listens on and gives "
       "its peers. Empty: 127.0.0.1 when the rendezvous is on loopback, "
       "else this machine's hostname."},
  };
  return table;
}

const OptionSpec *find_option(const std::string &name) {
  for (const auto &spec : option_table())
    if (name == spec.name) return &spec;
  return nullptr;
}

}  // namespace hb
