// hb_context_*: forming the cluster, its accessors, barrier, abort,
// listeners, and the CUDA stream hooks.
#include "context/context.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <map>
#include <random>
#include <thread>

#include "common/clock.h"
#include "common/log.h"
#include "context/address.h"
#include "context/context_gpu.h"
#include "gpu/gpu.h"
#include "rendezvous/client.h"
#include "rendezvous/server.h"
#include "timeline/timeline.h"

namespace hb {
namespace {

// "hb/ctx/<n>" for the n-th networked context of this process: every rank
// creates its contexts in the same order, so the names agree across ranks.
std::string next_scope(bool networked) {
  static std::atomic<unsigned long long> networked_count{0}, local_count{0};
  return networked ? format("hb/ctx/%llu", ++networked_count)
                   : format("hb/local/%llu", ++local_count);
}

// Runs fn; an hb::Error gains `prefix` in front of its message, so a
// failure inside the rendezvous says which rank and address it was about.
template <class F>
void with_context(const std::string &prefix, F &&fn) {
  try {
    fn();
  } catch (const Error &e) {
    throw Error(e.status(), prefix + e.what());
  }
}

// Set by the rank that serves the store, read by the others: tells a
// fresh server from the one of this job's previous context, which may still
// be lingering on the same port while rank 0 tears it down.
const char kServerIdKey[] = "hb/rendezvous/server_id";

std::string new_server_id() {
  std::random_device rd;
  return format("%08x%08x-%lld", rd(), rd(), static_cast<long long>(now_ms()));
}

rdv::ClientConfig client_config(const ClusterInfo &c, const Options &o) {
  rdv::ClientConfig cc;
  split_host_port(c.rendezvous, "rendezvous", &cc.host, &cc.port);
  cc.token = o.get_string("rendezvous_token");
  cc.rank = c.rank;
  cc.world_size = c.world_size;
  cc.connect_timeout_ms = o.get_int("connect_timeout_ms");
  cc.heartbeat_interval_ms = o.get_int("heartbeat_interval_ms");
  cc.peer_timeout_ms = o.get_int("peer_timeout_ms");
  cc.max_frame_bytes = static_cast<size_t>(o.get_int("max_frame_bytes"));
  cc.request_timeout_ms = o.get_int("timeout_ms");
  return cc;
}

std::unique_ptr<rdv::Server> serve(const rdv::ClientConfig &cc,
                                   const Options &o) {
  rdv::ServerConfig sc;
  // A loopback address stays on loopback; any other name may resolve to one
  // of several interfaces, so listen on all of them.
  bool loopback = cc.host == "localhost" || cc.host == "::1" ||
                  cc.host.rfind("127.", 0) == 0;
  sc.host = !loopback ? "0.0.0.0" : cc.host == "::1" ? "::1" : "127.0.0.1";
  sc.port = cc.port;
  sc.token = cc.token;
  sc.world_size = cc.world_size;
  sc.heartbeat_interval_ms = cc.heartbeat_interval_ms;
  sc.peer_timeout_ms = cc.peer_timeout_ms;
  sc.max_frame_bytes = cc.max_frame_bytes;
  // Rank 0 may finish first: its server then waits for the others' BYE,
  // so that a rank still finishing its last calls does not see the store
  // vanish and report a failure. Bounded by peer_timeout_ms (not
  // timeout_ms): hb_context_destroy returns promptly whatever the peers do.
  sc.linger_ms = std::min(o.get_int("timeout_ms"), cc.peer_timeout_ms);
  return rdv::Server::start(sc);
}

// Errors of a rendezvous connect that retrying cannot fix. A second
// connection for a rank is not one of them: the previous context's
// connection of this process may not have been dropped yet.
bool refused_for_good(const Error &e) {
  switch (e.status()) {
    case HB_ERR_PERMISSION:
    case HB_ERR_INVALID_ARGUMENT:
      return true;
    case HB_ERR_CONFIG:
      return std::strstr(e.what(), "is already connected") == nullptr;
    default:
      return false;
  }
}

// Ranks other than 0, when rank 0 serves: returns once the server at the
// address is not the one this process used for its previous context there.
void wait_for_fresh_server(const rdv::ClientConfig &cc) {
  static std::mutex mu;
  static std::map<std::string, std::string> last_id;  // address -> server id
  std::string addr = format("%s:%d", cc.host.c_str(), cc.port);
  std::string previous;
  {
    std::lock_guard<std::mutex> lock(mu);
    previous = last_id[addr];
  }
  Deadline deadline(cc.connect_timeout_ms);
  std::string why;
  for (;;) {
    try {
      rdv::ClientConfig probe = cc;
      probe.connect_timeout_ms = std::max<int64_t>(deadline.remaining_ms(), 1);
      auto client = rdv::Client::connect(probe, nullptr);
      std::string id = client->get(kServerIdKey, deadline.remaining_ms());
      client->close();
      if (id != previous) {
        std::lock_guard<std::mutex> lock(mu);
        last_id[addr] = id;
        return;
      }
      why = "only the server of the previous context answered";
    } catch (const Error &e) {
      // A refusal with a reason (token, world size, a bad option) will not
      // change by retrying: it reaches the caller at once.
      if (refused_for_good(e)) throw;
      // At the deadline the last probe's timeout is only the time that was
      // left: report the figure in force and the last real reason.
      if (!deadline.expired() || why.empty()) why = e.what();
    }
    if (deadline.expired())
      fail(HB_ERR_TIMEOUT,
           "no new rendezvous server at %s within connect_timeout_ms=%lld: %s",
           addr.c_str(), static_cast<long long>(cc.connect_timeout_ms),
           why.c_str());
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

// The network part of hb_context_create: serve the store (rank 0, unless
// the launcher does), connect, and meet every rank at a barrier.
void join_world(hb_context &ctx) {
  const ClusterInfo &c = ctx.cluster;
  std::string prefix =
      format("hb_context_create (rank %d of %d, rendezvous %s): ", c.rank,
             c.world_size, c.rendezvous.c_str());
  with_context(prefix, [&] {
    rdv::ClientConfig cc = client_config(c, ctx.options);
    bool rank0_serves = !c.launcher_serves;
    if (rank0_serves && c.rank == 0) ctx.server = serve(cc, ctx.options);
    if (rank0_serves && c.rank != 0) wait_for_fresh_server(cc);
    ctx.client = rdv::Client::connect(cc, &ctx.health);
    if (ctx.server) ctx.client->set(kServerIdKey, new_server_id());
    ctx.client->barrier(ctx.scope + "/create", cc.connect_timeout_ms);
  });
}

// Chooses this rank's address and joins the world.
void form_world(hb_context &ctx) {
  const ClusterInfo &c = ctx.cluster;
  if (c.rendezvous.empty())
    fail(HB_ERR_CONFIG,
         "rank %d: this call needs the workers' collective world, but no "
         "rendezvous address is given (HB_RENDEZVOUS or TF_CONFIG's chief)",
         c.rank);
  // Before joining: a bad HB_SOCKET_IFNAME fails here, not mid-job.
  AddressChoice a = choose_address(c, ctx.options);
  ctx.address = a.address;
  HB_LOG_INFO("rank %d of %d: peers reach this rank at %s (%s)", c.rank,
              c.world_size, a.address.c_str(), a.reason.c_str());
  join_world(ctx);
}

std::string pick_device(const ClusterInfo &c) {
  int n = gpu::device_count();
  return n > 0 ? format("cuda:%d", c.local_rank % n) : "cpu:0";
}

}  // namespace

void ensure_world(hb_context &ctx) {
  static std::mutex mu;  // contexts are created and joined rarely
  std::lock_guard<std::mutex> lock(mu);
  if (!ctx.world_pending) return;
  ctx.check();
  form_world(ctx);
  ctx.world_pending = false;
}

}  // namespace hb

hb_context::hb_context(hb::ClusterInfo c, hb::Options o)
    : cluster(std::move(c)), options(std::move(o)) {}

hb_context::~hb_context() {
  ps.reset();  // BYE to the ps tasks: this worker leaves, it is not lost
  // Backends first: they may still talk through the client.
  gpu.reset();
  cpu_async_allreduce.reset();  // joins its thread (each job is bounded)
  cpu_progress.reset();
  cpu_comm.reset();
  if (client) {
    try {
      client->close();  // BYE: leaving on purpose is not a failure
    } catch (const std::exception &e) {
      HB_LOG_INFO("closing the rendezvous connection: %s", e.what());
    }
    client.reset();
  }
  server.reset();  // last: lingers until the other ranks said BYE
}

void hb_context::fire(int32_t event, const char *path) {
  std::vector<Listener> copy;
  {
    std::lock_guard<std::mutex> lock(listeners_mu);
    copy = listeners;  // a listener may add listeners
  }
  for (const Listener &l : copy)
    if (l.event == event) l.fn(this, event, path, l.user_data);
}

using hb::ctx_ref;

extern "C" {

hb_status hb_context_create(const hb_context_options *opts, hb_context **out) {
  return hb::guard([&] {
    HB_CHECK_ARG(out, "hb_context_create: out is NULL");
    *out = nullptr;
    hb_context_options o = HB_CONTEXT_OPTIONS_INIT;
    if (opts) {
      HB_CHECK_ARG(opts->struct_size >= sizeof(size_t),
                   "hb_context_create: opts->struct_size is %zu; use "
                   "HB_CONTEXT_OPTIONS_INIT",
                   opts->struct_size);
      std::memcpy(&o, opts, std::min(opts->struct_size, sizeof o));
      o.struct_size = sizeof o;
    }
    hb::Options options = hb::Options::from_environment();
    if (o.options) options.apply_list(o.options);
    hb::ClusterInfo cluster = hb::discover_cluster(&o, options);
    auto ctx = std::make_unique<hb_context>(cluster, options);
    bool networked = cluster.in_world && cluster.world_size > 1;
    // Parameter-server mode: the workers meet through the ps tasks (src/ps)
    // and form their collective world only when they first use it, unless
    // option ps_collective asks for it now.
    bool later = networked && !cluster.ps_hosts.empty() &&
                 !options.get_bool("ps_collective");
    ctx->scope = hb::next_scope(networked);
    ctx->device = hb::pick_device(cluster);
    if (cluster.in_world) hb::set_log_rank(cluster.rank);
    const std::string timeline = options.get_string("timeline");
    if (!timeline.empty())
      ctx->timeline = hb::timeline::start(timeline, cluster.rank);
    if (later)
      ctx->world_pending = true;
    else if (networked)
      hb::form_world(*ctx);
    HB_LOG_DEBUG("context formed: rank %d of %d (%s, %s %d), device %s",
                 cluster.rank, cluster.world_size, cluster.source.c_str(),
                 cluster.task_type.c_str(), cluster.task_id,
                 ctx->device.c_str());
    *out = ctx.release();
  });
}

void hb_context_destroy(hb_context *ctx) { delete ctx; }

int32_t hb_context_rank(const hb_context *ctx) {
  return ctx ? ctx->cluster.rank : -1;
}
int32_t hb_context_world_size(const hb_context *ctx) {
  return ctx ? ctx->cluster.world_size : -1;
}
int32_t hb_context_local_rank(const hb_context *ctx) {
  return ctx ? ctx->cluster.local_rank : -1;
}
int32_t hb_context_local_world_size(const hb_context *ctx) {
  return ctx ? ctx->cluster.local_world_size : -1;
}
int32_t hb_context_is_chief(const hb_context *ctx) {
  if (!ctx) return -1;
  return ctx->cluster.in_world && ctx->cluster.rank == 0 ? 1 : 0;
}
const char *hb_context_task_type(const hb_context *ctx) {
  return ctx ? ctx->cluster.task_type.c_str() : nullptr;
}
int32_t hb_context_task_id(const hb_context *ctx) {
  return ctx ? ctx->cluster.task_id : -1;
}
int32_t hb_context_num_gpus(const hb_context *ctx) {
  return ctx ? hb::gpu::device_count() : -1;
}
const char *hb_context_device(const hb_context *ctx) {
  return ctx ? ctx->device.c_str() : nullptr;
}

hb_status hb_context_get_option(const hb_context *ctx, const char *name,
                                char *buf, size_t cap, size_t *needed) {
  return hb::guard([&] {
    HB_CHECK_ARG(name, "hb_context_get_option: name is NULL");
    HB_CHECK_ARG(buf || cap == 0,
                 "hb_context_get_option: buf is NULL but cap is %zu", cap);
    std::string value = ctx ? ctx->options.get(name)
                            : hb::Options::from_environment().get(name);
    if (needed) *needed = value.size() + 1;
    HB_CHECK_ARG(
        cap > value.size(),
        "hb_context_get_option: option %s needs %zu bytes, buf has %zu", name,
        value.size() + 1, cap);
    std::memcpy(buf, value.c_str(), value.size() + 1);
  });
}

hb_status hb_context_set_option(hb_context *ctx, const char *name,
                                const char *value) {
  return hb::guard([&] {
    hb_context &c = ctx_ref(ctx);
    HB_CHECK_ARG(name, "hb_context_set_option: name is NULL");
    HB_CHECK_ARG(value, "hb_context_set_option: value of option %s is NULL",
                 name);
    c.options.set(name, value);
  });
}

hb_status hb_context_barrier(hb_context *ctx, int64_t timeout_ms) {
  return hb::guard([&] {
    hb_context &c = ctx_ref(ctx);
    c.check();
    hb::ensure_world(c);
    if (!c.client) return;  // a world of one (or a ps / evaluator task)
    hb::timeline::Span span("barrier", "comm");
    int64_t timeout = timeout_ms > 0 ? timeout_ms : c.timeout_ms();
    uint64_t n = ++c.barriers;
    c.client->barrier(hb::format("%s/barrier/%llu", c.scope.c_str(),
                                 static_cast<unsigned long long>(n)),
                      timeout);
    c.check();
  });
}

hb_status hb_context_abort(hb_context *ctx, const char *reason) {
  return hb::guard([&] {
    hb_context &c = ctx_ref(ctx);
    std::string why = reason && *reason ? reason : "(no reason given)";
    // The client fails our Health and tells the others (same message);
    // alone, or in a world already broken, the Health is failed here.
    if (c.client) c.client->abort(why);
    c.health.fail(HB_ERR_ABORTED, hb::format("aborted by rank %d: %s",
                                             c.cluster.rank, why.c_str()));
  });
}

// The GPU side (src/gpu) answers HB_ERR_UNSUPPORTED naming what is missing
// when there is no plugin or device, and synchronize is a no-op until
// something was enqueued.
hb_status hb_context_set_cuda_stream(hb_context *ctx, void *stream) {
  return hb::guard([&] {
    hb_context &c = ctx_ref(ctx);
    c.check();
    hb::gpu::set_stream(c, stream);
  });
}

hb_status hb_context_synchronize(hb_context *ctx) {
  return hb::guard([&] {
    hb_context &c = ctx_ref(ctx);
    c.check();
    hb::gpu::synchronize(c);
  });
}

hb_status hb_context_add_listener(hb_context *ctx, int32_t event,
                                  hb_listener_fn fn, void *user_data) {
  return hb::guard([&] {
    hb_context &c = ctx_ref(ctx);
    HB_CHECK_ARG(event >= HB_EVENT_BEFORE_SAVE && event <= HB_EVENT_AFTER_LOAD,
                 "hb_context_add_listener: unknown event %d", event);
    HB_CHECK_ARG(fn, "hb_context_add_listener: fn is NULL");
    std::lock_guard<std::mutex> lock(c.listeners_mu);
    c.listeners.push_back({event, fn, user_data});
  });
}

}  // extern "C"
