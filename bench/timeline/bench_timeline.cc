// What the timeline (HB_TIMELINE) costs: a bare Span off and on, and small
// calls on a world-of-one context (hb_allreduce of one float, a 64-id
// embedding lookup) without and with recording. Prints a table.
//   bench_timeline [output dir, default /tmp]
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "hb.h"
#include "timeline/timeline.h"

namespace {

double ns_per(int64_t n, std::chrono::steady_clock::time_point t0) {
  auto dt = std::chrono::steady_clock::now() - t0;
  return std::chrono::duration<double, std::nano>(dt).count() /
         static_cast<double>(n);
}

hb_context *context(const std::string &options) {
  hb_context_options o = HB_CONTEXT_OPTIONS_INIT;
  o.rank = 0;
  o.world_size = 1;
  o.options = options.c_str();
  hb_context *ctx = nullptr;
  if (hb_context_create(&o, &ctx) != HB_OK) {
    std::fprintf(stderr, "hb_context_create: %s\n", hb_last_error());
    std::exit(1);
  }
  return ctx;
}

struct Row {
  double span, allreduce, lookup;
};

Row measure(hb_context *ctx) {
  Row r{};
  const int64_t spans = 200000, calls = 100000, lookups = 20000;
  auto t0 = std::chrono::steady_clock::now();
  for (int64_t i = 0; i < spans; ++i) {
    hb::timeline::Span s("bench", "bench", i);
  }
  r.span = ns_per(spans, t0);
  float x = 1;
  t0 = std::chrono::steady_clock::now();
  for (int64_t i = 0; i < calls; ++i)
    hb_allreduce(ctx, &x, &x, 1, HB_FLOAT32, HB_SUM);
  r.allreduce = ns_per(calls, t0);
  hb_embedding_config c = HB_EMBEDDING_CONFIG_INIT;
  c.name = "bench";
  c.dim = 16;
  c.num_rows = 1 << 16;
  hb_embedding *e = nullptr;
  if (hb_embedding_create(ctx, &c, &e) != HB_OK) std::exit(1);
  std::vector<int64_t> ids(64);
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int64_t>(i * 97);
  std::vector<float> out(ids.size() * 16);
  t0 = std::chrono::steady_clock::now();
  for (int64_t i = 0; i < lookups; ++i)
    hb_embedding_lookup(e, ids.data(), ids.size(), out.data());
  r.lookup = ns_per(lookups, t0);
  hb_embedding_destroy(e);
  return r;
}

}  // namespace

int main(int argc, char **argv) {
  std::string dir = argc > 1 ? argv[1] : "/tmp";
  hb_context *off = context("");
  Row a = measure(off);
  hb_context_destroy(off);
  hb_context *on = context("timeline=" + dir + "/bench_timeline.json");
  Row b = measure(on);
  hb_context_destroy(on);
  std::printf("%-28s %12s %12s %12s\n", "ns per call", "timeline off",
              "timeline on", "on - off");
  std::printf("%-28s %12.1f %12.1f %12.1f\n", "Span alone", a.span, b.span,
              b.span - a.span);
  std::printf("%-28s %12.1f %12.1f %12.1f\n", "hb_allreduce 1 float",
              a.allreduce, b.allreduce, b.allreduce - a.allreduce);
  std::printf("%-28s %12.1f %12.1f %12.1f\n", "hb_embedding_lookup 64 ids",
              a.lookup, b.lookup, b.lookup - a.lookup);
  const std::string file = dir + "/bench_timeline.0.json";
  std::printf("(world of one; %s removed)\n", file.c_str());
  std::remove(file.c_str());
  return 0;
}
