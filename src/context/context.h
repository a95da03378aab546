// The context: cluster identity, options, health, the rendezvous client and
// the lazily created communication backends.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "abi/error.h"
#include "common/health.h"
#include "context/cluster.h"
#include "context/options.h"
#include "hb.h"

namespace hb {
namespace rdv {
class Client;
class Server;
}  // namespace rdv
namespace comm {
class Backend;
class Progress;
}  // namespace comm
namespace gpu {
struct ContextState;
}  // namespace gpu
namespace timeline {
class Recording;
}  // namespace timeline
namespace ps {
class Client;
}  // namespace ps

// The names of a context's live embedding tables (unique per context).
// Shared with the tables, so a table destroyed after its context is fine.
struct TableNames {
  std::mutex mu;
  std::set<std::string> names;
  // False when the name is taken already.
  bool reserve(const std::string &name) {
    std::lock_guard<std::mutex> lock(mu);
    return names.insert(name).second;
  }
  void release(const std::string &name) {
    std::lock_guard<std::mutex> lock(mu);
    names.erase(name);
  }
};
}  // namespace hb

struct hb_context {
  // Out of line: the members' destructors need the complete rdv types.
  hb_context(hb::ClusterInfo c, hb::Options o);
  ~hb_context();

  hb::ClusterInfo cluster;
  hb::Options options;
  hb::Health health;
  std::unique_ptr<hb::rdv::Server> server;  // when this rank serves the store
  std::unique_ptr<hb::rdv::Client> client;  // null in a world of one
  std::string device = "cpu:0";
  // The address peers connect to for this rank's direct connections (the
  // CPU transport), chosen at creation (context/address.h).
  std::string address = "127.0.0.1";
  // Prefix of this context's keys in the rendezvous store, "hb/ctx/<n>":
  // contexts are created collectively, so the n-th context of every rank
  // has the same prefix, and a store that outlives a context (hbrun's)
  // never mixes two contexts' keys.
  std::string scope;
  std::atomic<uint64_t> barriers{0};
  std::shared_ptr<hb::TableNames> table_names =
      std::make_shared<hb::TableNames>();
  // hb_data_sync calls so far (part of its cross-rank fingerprint).
  std::atomic<int64_t> data_syncs{0};

  // Created on first use by src/comm and src/gpu (shared_ptr: the deleter
  // is bound where the type is complete).
  std::shared_ptr<hb::comm::Backend> cpu_comm;
  std::shared_ptr<hb::gpu::ContextState> gpu;
  // The asynchronous exchange of host collections (comm/progress.h): a
  // second CPU communicator and its progress thread, created with the first
  // collection that uses it (option cpu_async_exchange).
  std::shared_ptr<hb::comm::Progress> cpu_progress;
  // hb_allreduce_start's channel: the same, for allreduces only, so that a
  // collection's rounds (hb_collection_apply_gradients) run beside a dense
  // allreduce in flight instead of queueing behind it. Created by the first
  // start (world > 1, cpu_async_exchange=1).
  std::shared_ptr<hb::comm::Progress> cpu_async_allreduce;
  // Parameter-server mode: the worker's connections to the ps tasks
  // (src/ps), created on first use.
  std::mutex ps_mu;
  std::shared_ptr<hb::ps::Client> ps;
  // The world is formed on first use (hb::ensure_world).
  bool world_pending = false;
  // Option `timeline`: this context's share of the process's recording.
  std::shared_ptr<hb::timeline::Recording> timeline;

  struct Listener {
    int32_t event;
    hb_listener_fn fn;
    void *user_data;
  };
  std::mutex listeners_mu;
  std::vector<Listener> listeners;

  // Throws if the context failed or was aborted.
  void check() const { health.check(); }
  int64_t timeout_ms() const { return options.get_int("timeout_ms"); }
  // Calls the listeners registered for event, in registration order.
  void fire(int32_t event, const char *path);
};

namespace hb {
// The collective world of the context's ranks, formed now if it was left
// for later: in parameter-server mode the workers form it on first use (a
// collective, a barrier, a worker-sharded table, a merged metric -- calls
// every rank makes), so a job that never needs one never depends on every
// worker staying alive. Throws what forming it throws.
void ensure_world(hb_context &ctx);

// Validates a context argument of an entry point.
inline hb_context &ctx_ref(hb_context *ctx) {
  if (!ctx) fail(HB_ERR_INVALID_ARGUMENT, "context is NULL");
  return *ctx;
}
}  // namespace hb
