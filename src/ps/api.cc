// The parameter-server entry points (EXPERIMENTAL section of hb.h):
// hb_context_serve, reader positions, dynamic splits and statistics (the dense
// buffers, table handles, are in tables/ps_dense_api.cc).
#include <algorithm>
#include <cstring>
#include <memory>

#include "abi/error.h"
#include "abi/struct_out.h"
#include "context/context.h"
#include "ps/client.h"
#include "ps/server.h"

namespace {

constexpr size_t kMaxPositionBytes = 65536;  // hb_ps_set_position

// hb_ps_split_next and hb_ps_split_try: wait says which.
hb_status split_out(hb_context *ctx, hb_ps_split *out, bool wait,
                    const char *fn) {
  return hb::guard([&] {
    hb_context &c = hb::ctx_ref(ctx);
    c.check();
    HB_CHECK_ARG(out && out->struct_size >= sizeof(size_t),
                 "%s: out is NULL or its struct_size too small", fn);
    hb::ps::SplitLease l = hb::ps::client_of(c, fn)->split_take(wait);
    static_assert(hb::ps::SplitLease::kWait == HB_PS_SPLIT_LATER,
                  "the queue's kWait is the public HB_PS_SPLIT_LATER");
    hb_ps_split r = HB_PS_SPLIT_INIT;
    r.split = l.split, r.epoch = l.epoch, r.begin = l.begin, r.end = l.end;
    r.from = l.from, r.replay_end = l.replay_end;
    hb::copy_struct_out(r, out);
  });
}
}  // namespace

extern "C" {

int32_t hb_context_num_ps(const hb_context *ctx) {
  return ctx ? static_cast<int32_t>(ctx->cluster.ps_hosts.size()) : -1;
}

hb_status hb_context_serve(hb_context *ctx) {
  return hb::guard([&] {
    hb_context &c = hb::ctx_ref(ctx);
    c.check();
    if (c.cluster.task_type != "ps" || c.cluster.ps_hosts.empty())
      hb::fail(HB_ERR_INVALID_ARGUMENT,
               "hb_context_serve: this task is a %s, not a ps task",
               c.cluster.task_type.c_str());
    hb::ps::ServerConfig sc;
    std::string host;
    hb::split_host_port(c.cluster.ps_hosts.at(c.cluster.task_id),
                        "ps_hosts entry", &host, &sc.port);
    // As the rendezvous store: loopback stays loopback, any other name may
    // resolve to one of several interfaces, so listen on all of them.
    bool loopback =
        host == "localhost" || host == "::1" || host.rfind("127.", 0) == 0;
    sc.host = !loopback ? "0.0.0.0" : host == "::1" ? "::1" : "127.0.0.1";
    sc.ps_index = c.cluster.task_id;
    sc.num_ps = static_cast<int>(c.cluster.ps_hosts.size());
    sc.staleness = c.options.get_int("staleness");
    sc.age_bound = c.options.get_string("staleness_bound") == "age";
    sc.peer_timeout_ms = c.options.get_int("peer_timeout_ms");
    sc.connect_timeout_ms = c.options.get_int("connect_timeout_ms");
    sc.timeout_ms = c.options.get_int("timeout_ms");
    sc.split_samples = c.options.get_int("ps_split_samples");
    sc.split_size = c.options.get_int("ps_split_size");
    sc.split_epochs = c.options.get_int("ps_split_epochs");
    sc.split_seed = static_cast<uint64_t>(c.options.get_int("ps_split_seed"));
    sc.max_frame_bytes =
        static_cast<size_t>(c.options.get_int("max_frame_bytes"));
    hb::ps::serve(sc, c.health);
  });
}

hb_status hb_ps_set_position(hb_context *ctx, const void *data, size_t len) {
  return hb::guard([&] {
    hb_context &c = hb::ctx_ref(ctx);
    HB_CHECK_ARG(data || len == 0, "hb_ps_set_position: data is NULL");
    HB_CHECK_ARG(len <= kMaxPositionBytes,
                 "hb_ps_set_position: %zu bytes, at most %zu", len,
                 kMaxPositionBytes);
    hb::ps::client_of(c, "hb_ps_set_position")
        ->set_position(std::string(static_cast<const char *>(data), len));
  });
}

hb_status hb_ps_position(hb_context *ctx, void *buf, size_t cap, size_t *needed,
                         int64_t *step) {
  return hb::guard([&] {
    hb_context &c = hb::ctx_ref(ctx);
    c.check();
    HB_CHECK_ARG(step, "hb_ps_position: step is NULL");
    HB_CHECK_ARG(buf || cap == 0, "hb_ps_position: buf is NULL");
    int64_t s = 0;
    std::string pos = hb::ps::client_of(c, "hb_ps_position")->committed(&s);
    if (needed) *needed = pos.size();
    HB_CHECK_ARG(cap >= pos.size(),
                 "hb_ps_position: the position has %zu bytes, buf %zu",
                 pos.size(), cap);
    if (!pos.empty()) std::memcpy(buf, pos.data(), pos.size());
    *step = s;
  });
}

hb_status hb_ps_get_stats(hb_context *ctx, hb_ps_stats *out) {
  return hb::guard([&] {
    hb_context &c = hb::ctx_ref(ctx);
    c.check();
    HB_CHECK_ARG(out && out->struct_size >= sizeof(size_t),
                 "hb_ps_get_stats: out is NULL or its struct_size too small");
    hb::ps::Stats s = hb::ps::client_of(c, "hb_ps_get_stats")->stats();
    hb_ps_stats r = HB_PS_STATS_INIT;
    r.pulls = s.pulls, r.pushes = s.pushes, r.rows_pulled = s.rows_pulled;
    r.rows_pushed = s.rows_pushed, r.rounds = s.rounds;
    r.max_staleness = s.max_staleness, r.bound_violations = s.bound_violations;
    r.duplicate_pushes = s.duplicate_pushes, r.workers_lost = s.workers_lost;
    r.workers_rejoined = s.workers_rejoined, r.busy_us = s.busy_us;
    r.workers_left = s.workers_left;
    r.workers_gone = s.workers_gone;
    hb::copy_struct_out(r, out);
  });
}

hb_status hb_ps_split_next(hb_context *ctx, hb_ps_split *out) {
  return split_out(ctx, out, true, "hb_ps_split_next");
}

hb_status hb_ps_split_try(hb_context *ctx, hb_ps_split *out) {
  return split_out(ctx, out, false, "hb_ps_split_try");
}

hb_status hb_ps_split_commit(hb_context *ctx, int64_t split, int64_t offset) {
  return hb::guard([&] {
    hb_context &c = hb::ctx_ref(ctx);
    c.check();
    hb::ps::client_of(c, "hb_ps_split_commit")->split_step(split, offset);
  });
}

}  // extern "C"
