// The parameter-server entry points (EXPERIMENTAL section of hb.h):
// hb_context_serve, reader positions, statistics and dense buffers.
#include <algorithm>
#include <cstring>
#include <memory>

#include "abi/error.h"
#include "context/context.h"
#include "embedding/handle.h"
#include "ps/client.h"
#include "ps/ps_table.h"
#include "ps/server.h"
#include "recovery/registry.h"

struct hb_ps_dense {
  int64_t count = 0;
  std::vector<int64_t> ids;  // 0 .. rows - 1
  std::vector<float> buf;    // rows x dim (the last row padded)
  // Its table on the ps tasks (emb->ps), a table handle so that job
  // checkpoints hold it as they hold the tables (hb_checkpoint_add_ps_dense).
  std::unique_ptr<hb_embedding> emb;
  hb::ps::PsTable &table() { return *emb->ps; }
  const std::string &name() const { return emb->name; }
};

namespace {

constexpr int64_t kDenseRow = 256;           // floats per row of a dense buffer
constexpr size_t kMaxPositionBytes = 65536;  // hb_ps_set_position

hb_ps_dense &dense_ref(hb_ps_dense *d, const char *fn) {
  if (!d) hb::fail(HB_ERR_INVALID_ARGUMENT, "%s: buffer is NULL", fn);
  d->emb->ctx->check();
  return *d;
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
    size_t n = std::min(out->struct_size, sizeof r);
    std::memcpy(out, &r, n);
    out->struct_size = n;
  });
}

hb_status hb_ps_dense_create(hb_context *ctx, const hb_ps_dense_config *cfg,
                             hb_ps_dense **out) {
  return hb::guard([&] {
    const char *fn = "hb_ps_dense_create";
    HB_CHECK_ARG(out, "%s: out is NULL", fn);
    *out = nullptr;
    hb_context &c = hb::ctx_ref(ctx);
    c.check();
    HB_CHECK_ARG(cfg && cfg->struct_size >= offsetof(hb_ps_dense_config, init),
                 "%s: cfg is NULL or its struct_size too small", fn);
    hb_ps_dense_config d = HB_PS_DENSE_CONFIG_INIT;
    std::memcpy(&d, cfg, std::min(cfg->struct_size, sizeof d));
    HB_CHECK_ARG(d.count > 0 && d.count <= (int64_t{1} << 34),
                 "%s('%s'): count %lld", fn, d.name ? d.name : "",
                 static_cast<long long>(d.count));
    // A dense buffer is a static table of rows of at most kDenseRow floats:
    // its optimizer steps are the tables' (optimizer_math.h), row by row.
    hb_embedding_config ec = HB_EMBEDDING_CONFIG_INIT;
    ec.name = d.name;
    ec.dim = std::min(d.count, kDenseRow);
    ec.num_rows = (d.count + ec.dim - 1) / ec.dim;
    ec.optimizer = d.optimizer;
    ec.learning_rate = d.learning_rate;
    ec.initial_accumulator = d.initial_accumulator;
    ec.beta1 = d.beta1, ec.beta2 = d.beta2, ec.epsilon = d.epsilon;
    ec.l1 = d.l1, ec.l2 = d.l2, ec.lr_power = d.lr_power;
    ec.placement = HB_PLACEMENT_PS;
    hb::emb::Spec spec = hb::emb::spec_from_config(&ec);
    std::unique_ptr<hb_ps_dense> h(new hb_ps_dense);
    h->emb.reset(new hb_embedding);
    hb_embedding &e = *h->emb;
    e.ctx = ctx;
    h->count = d.count;
    h->ids.resize(spec.num_rows);
    for (int64_t i = 0; i < spec.num_rows; ++i) h->ids[i] = i;
    h->buf.assign(spec.num_rows * spec.dim, 0.0f);
    if (d.init) std::memcpy(h->buf.data(), d.init, 4 * d.count);
    auto *t = new hb::ps::PsTable(
        hb::ps::client_of(c, fn), spec,
        [&] {
          if (!c.table_names->reserve(spec.name))
            hb::fail(HB_ERR_INVALID_ARGUMENT,
                     "%s('%s'): this context already has a table or buffer "
                     "named '%s'",
                     fn, spec.name.c_str(), spec.name.c_str());
          e.names = c.table_names;
          e.name = spec.name;
        },
        &h->ids, h->buf.data());
    e.table.reset(t);
    e.ps = t;
    *out = h.release();
  });
}

void hb_ps_dense_destroy(hb_ps_dense *d) { delete d; }

hb_status hb_ps_dense_pull(hb_ps_dense *d, float *out) {
  return hb::guard([&] {
    hb_ps_dense &b = dense_ref(d, "hb_ps_dense_pull");
    HB_CHECK_ARG(out, "hb_ps_dense_pull('%s'): out is NULL", b.name().c_str());
    b.table().lookup(b.ids.data(), b.ids.size(), b.buf.data());
    std::memcpy(out, b.buf.data(), 4 * b.count);
  });
}

hb_status hb_ps_dense_push(hb_ps_dense *d, const float *grads) {
  return hb::guard([&] {
    hb_ps_dense &b = dense_ref(d, "hb_ps_dense_push");
    HB_CHECK_ARG(grads, "hb_ps_dense_push('%s'): grads is NULL",
                 b.name().c_str());
    std::memcpy(b.buf.data(), grads, 4 * b.count);
    std::fill(b.buf.begin() + b.count, b.buf.end(), 0.0f);
    b.table().apply_gradients(b.ids.data(), b.ids.size(), b.buf.data());
  });
}

hb_status hb_checkpoint_add_ps_dense(hb_checkpoint *c, hb_ps_dense *d) {
  return hb::guard([&] {
    const char *fn = "hb_checkpoint_add_ps_dense";
    HB_CHECK_ARG(c, "%s: checkpoint is NULL", fn);
    hb::recovery::add_table(*c, dense_ref(d, fn).emb.get(), fn);
  });
}

}  // extern "C"
