// hb_context_*: forming the cluster, its accessors, barrier, abort,
// listeners, and the CUDA stream hooks.
#include "context/context.h"

#include <algorithm>
#include <cstring>

#include "common/log.h"
#include "gpu/gpu.h"
#include "rendezvous/client.h"
#include "rendezvous/server.h"

namespace hb {
namespace {

std::atomic<uint64_t> g_contexts{0};

bool is_loopback(const std::string &host) {
  return host == "localhost" || host == "::1" || host.rfind("127.", 0) == 0;
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

// The network part of hb_context_create: serve the store (rank 0, unless
// the launcher does), connect, and meet every rank at a barrier.
void join_world(hb_context &ctx) {
  const ClusterInfo &c = ctx.cluster;
  const Options &o = ctx.options;
  std::string host;
  int port = 0;
  split_host_port(c.rendezvous, "rendezvous", &host, &port);
  std::string token = o.get_string("rendezvous_token");
  int64_t heartbeat = o.get_int("heartbeat_interval_ms");
  int64_t peer_timeout = o.get_int("peer_timeout_ms");
  int64_t connect_timeout = o.get_int("connect_timeout_ms");
  size_t max_frame = static_cast<size_t>(o.get_int("max_frame_bytes"));
  std::string prefix =
      format("hb_context_create (rank %d of %d, rendezvous %s): ", c.rank,
             c.world_size, c.rendezvous.c_str());
  with_context(prefix, [&] {
    if (c.rank == 0 && !c.launcher_serves) {
      rdv::ServerConfig sc;
      // A loopback address stays on loopback; any other name may resolve to
      // one of several interfaces, so listen on all of them.
      sc.host =
          is_loopback(host) ? (host == "::1" ? "::1" : "127.0.0.1") : "0.0.0.0";
      sc.port = port;
      sc.token = token;
      sc.world_size = c.world_size;
      sc.heartbeat_interval_ms = heartbeat;
      sc.peer_timeout_ms = peer_timeout;
      sc.max_frame_bytes = max_frame;
      ctx.server = rdv::Server::start(sc);
    }
    rdv::ClientConfig cc;
    cc.host = host;
    cc.port = port;
    cc.token = token;
    cc.rank = c.rank;
    cc.world_size = c.world_size;
    cc.connect_timeout_ms = connect_timeout;
    cc.heartbeat_interval_ms = heartbeat;
    cc.peer_timeout_ms = peer_timeout;
    cc.max_frame_bytes = max_frame;
    ctx.client = rdv::Client::connect(cc, &ctx.health);
    ctx.client->barrier(ctx.scope + "/create", connect_timeout);
  });
  ctx.formed = true;
}

// Before rank 0 stops the store it serves, it waits (bounded) for the other
// ranks to say goodbye, so that a rank still finishing its last calls does
// not see the store vanish and report a failure.
void leave_world(hb_context &ctx) {
  const ClusterInfo &c = ctx.cluster;
  try {
    if (ctx.formed && ctx.health.ok()) {
      if (c.rank != 0) {
        ctx.client->set(format("%s/bye/%d", ctx.scope.c_str(), c.rank), "1");
      } else if (ctx.server) {
        std::vector<std::string> keys;
        for (int r = 1; r < c.world_size; ++r)
          keys.push_back(format("%s/bye/%d", ctx.scope.c_str(), r));
        ctx.client->wait(keys, ctx.timeout_ms());
      }
    }
  } catch (const std::exception &e) {
    HB_LOG_INFO("leaving the context without every rank's goodbye: %s",
                e.what());
  }
  try {
    ctx.client->close();
  } catch (const std::exception &e) {
    HB_LOG_INFO("closing the rendezvous connection: %s", e.what());
  }
}

std::string pick_device(const ClusterInfo &c) {
  int n = gpu::device_count();
  return n > 0 ? format("cuda:%d", c.local_rank % n) : "cpu:0";
}

}  // namespace
}  // namespace hb

hb_context::hb_context(hb::ClusterInfo c, hb::Options o)
    : cluster(std::move(c)), options(std::move(o)) {}

hb_context::~hb_context() {
  // Backends first: they may still talk through the client.
  gpu.reset();
  cpu_comm.reset();
  if (client) {
    hb::leave_world(*this);
    client.reset();
  }
  server.reset();  // last: the other ranks may still be saying goodbye
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
    ctx->scope = hb::format("hb/ctx/%llu",
                            static_cast<unsigned long long>(++hb::g_contexts));
    ctx->device = hb::pick_device(cluster);
    if (cluster.in_world) hb::set_log_rank(cluster.rank);
    if (cluster.in_world && cluster.world_size > 1) hb::join_world(*ctx);
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
    if (!c.client) return;  // a world of one (or a ps / evaluator task)
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
    // Tell the others first: once our own health has failed the client
    // refuses to send anything.
    if (c.client && c.health.ok()) {
      try {
        c.client->abort(why);
      } catch (const std::exception &e) {
        HB_LOG_WARN("abort could not reach the other ranks: %s", e.what());
      }
    }
    c.health.fail(HB_ERR_ABORTED, hb::format("context aborted by rank %d: %s",
                                             c.cluster.rank, why.c_str()));
  });
}

hb_status hb_context_set_cuda_stream(hb_context *ctx, void *stream) {
  return hb::guard([&] {
    hb_context &c = ctx_ref(ctx);
    c.check();
    std::string why;
    if (!hb::gpu::plugin(&why))
      hb::fail(HB_ERR_UNSUPPORTED,
               "hb_context_set_cuda_stream: CUDA is not available: %s",
               why.c_str());
    hb::gpu::set_stream(c, stream);
  });
}

hb_status hb_context_synchronize(hb_context *ctx) {
  return hb::guard([&] {
    hb_context &c = ctx_ref(ctx);
    c.check();
    if (!hb::gpu::plugin(nullptr)) return;  // nothing can have been enqueued
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
