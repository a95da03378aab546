// The hb_ps_dense entry points (EXPERIMENTAL section of hb.h): dense
// buffers on the parameter servers.
#include <algorithm>
#include <cstring>
#include <memory>

#include "abi/error.h"
#include "context/context.h"
#include "ps/client.h"
#include "ps/ps_table.h"
#include "tables/ps_dense.h"

namespace {

constexpr int64_t kDenseRow = 256;  // floats per row of a dense buffer

}  // namespace

extern "C" {

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
    hb_ps_dense &b = hb::emb::dense_ref(d, "hb_ps_dense_pull");
    HB_CHECK_ARG(out, "hb_ps_dense_pull('%s'): out is NULL", b.name().c_str());
    b.table().lookup(b.ids.data(), b.ids.size(), b.buf.data());
    std::memcpy(out, b.buf.data(), 4 * b.count);
  });
}

hb_status hb_ps_dense_push(hb_ps_dense *d, const float *grads) {
  return hb::guard([&] {
    hb_ps_dense &b = hb::emb::dense_ref(d, "hb_ps_dense_push");
    HB_CHECK_ARG(grads, "hb_ps_dense_push('%s'): grads is NULL",
                 b.name().c_str());
    std::memcpy(b.buf.data(), grads, 4 * b.count);
    std::fill(b.buf.begin() + b.count, b.buf.end(), 0.0f);
    b.table().apply_gradients(b.ids.data(), b.ids.size(), b.buf.data());
  });
}

}  // extern "C"
