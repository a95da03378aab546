// exact_apply: what an order-independent, exact accumulation of gradients
// would cost on the apply path of the CTR demo (examples/ctr_train: 26
// tables of --vocab rows and width --dim plus the wide table of width 1,
// one id per table per sample, --batch samples per rank and step, ids from
// the demo's own generator).
//
// Today a step sums each unique id's gradient contributions in float32:
// every rank adds its own (the local dedup), the owner adds the ranks'
// partial sums in rank order. The bits then depend on how the samples are
// split over ranks. Exact: one ExactSum (src/metrics/exact_sum.h, as the
// metrics use) per id and column; every contribution added exactly, the
// partial sums sent exact (ExactSum::kWireBytes per element instead of 4)
// and merged at the owner, rounded once. The bits then depend only on the
// multiset of contributions.
//
// Both variants get the same precomputed dedup (what they share); the
// table is the summation alone, per rank and step, for a world of
// --world ranks (the global batch is world x batch; each rank's share of
// the work is the total divided by the world), in CPU milliseconds.
// Compare with the demo's CPU time per step and rank, measured in the same
// session (bench/exact_apply/measure.sh runs both, interleaved).
//
//   exact_apply [--batch 512] [--vocab 2048] [--dim 8] [--steps 50]
//               [--world 1] [--reps 3]
#include <time.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <unordered_map>
#include <vector>

#include "metrics/exact_sum.h"
#include "synth_data.h"

namespace {

using hb::metrics::ExactSum;

// CPU time of this process: the machine is shared, and the variants are
// compared with the demo's CPU time per step (single-threaded work).
double now_s() {
  timespec t;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

// One table's step: contributions grouped by the rank that holds them,
// each with its id's index among the rank's unique ids (the local dedup)
// and, per rank unique id, its index among the owner's unique ids.
struct TableStep {
  int64_t dim = 0;
  std::vector<std::vector<uint32_t>> inv;    // [rank][contribution]
  std::vector<std::vector<float>> grads;     // [rank][contribution * dim]
  std::vector<std::vector<uint32_t>> owner;  // [rank][rank unique id]
  size_t owner_unique = 0;                   // all owners together
};

std::vector<TableStep> make_step(const synth::Generator &gen, int64_t step,
                                 int world, int64_t batch, int64_t dim,
                                 uint64_t *seed) {
  std::vector<TableStep> ts(synth::kTables + 1);  // + the wide table
  std::vector<synth::Sample> samples(static_cast<size_t>(world * batch));
  for (size_t i = 0; i < samples.size(); ++i)
    gen.sample(0, step * world * batch + static_cast<int64_t>(i), &samples[i]);
  for (int t = 0; t <= synth::kTables; ++t) {
    TableStep &s = ts[t];
    s.dim = t < synth::kTables ? dim : 1;
    s.inv.resize(world);
    s.grads.resize(world);
    s.owner.resize(world);
    std::unordered_map<int64_t, uint32_t> global;
    for (int r = 0; r < world; ++r) {
      std::unordered_map<int64_t, uint32_t> local;
      for (int64_t b = 0; b < batch; ++b) {
        const synth::Sample &x = samples[static_cast<size_t>(b * world + r)];
        // The wide table holds every table's ids, offset by table.
        int64_t id = t < synth::kTables
                         ? x.ids[t]
                         : x.ids[b % synth::kTables] +
                               (b % synth::kTables) * gen.vocab();
        auto it = local.emplace(id, static_cast<uint32_t>(local.size())).first;
        s.inv[r].push_back(it->second);
        if (it->second == s.owner[r].size()) {
          auto g =
              global.emplace(id, static_cast<uint32_t>(global.size())).first;
          s.owner[r].push_back(g->second);
        }
        for (int64_t c = 0; c < s.dim; ++c) {
          // Gradients of a logistic loss: values whose sums round.
          *seed = synth::mix(*seed);
          s.grads[r].push_back(
              static_cast<float>((synth::unit(*seed) - 0.5) * 1e-3));
        }
      }
    }
    s.owner_unique = global.size();
  }
  return ts;
}

struct Totals {
  double float_s = 0, exact_s = 0;
  double contributions = 0, unique = 0, wire_float = 0, wire_exact = 0;
};

// Today's sums: float adds per rank, then the owner's rank-order adds.
void float_sums(const TableStep &s, std::vector<float> &part,
                std::vector<float> &out) {
  const size_t dim = static_cast<size_t>(s.dim);
  out.assign(s.owner_unique * dim, 0.f);
  for (size_t r = 0; r < s.inv.size(); ++r) {
    part.assign(s.owner[r].size() * dim, 0.f);
    const float *g = s.grads[r].data();
    for (size_t j = 0; j < s.inv[r].size(); ++j)
      for (size_t c = 0; c < dim; ++c)
        part[s.inv[r][j] * dim + c] += g[j * dim + c];
    for (size_t u = 0; u < s.owner[r].size(); ++u)
      for (size_t c = 0; c < dim; ++c)
        out[s.owner[r][u] * dim + c] += part[u * dim + c];
  }
}

// Exact sums: ExactSum adds per rank, the partials serialized as they
// would travel, merged at the owner, rounded once.
void exact_sums(const TableStep &s, std::vector<ExactSum> &part,
                std::vector<unsigned char> &wire, std::vector<ExactSum> &acc,
                std::vector<float> &out) {
  const size_t dim = static_cast<size_t>(s.dim);
  acc.assign(s.owner_unique * dim, ExactSum());
  if (s.inv.size() == 1) {  // one rank: it owns every id, nothing travels
    const float *g = s.grads[0].data();
    for (size_t j = 0; j < s.inv[0].size(); ++j)
      for (size_t c = 0; c < dim; ++c)
        acc[s.inv[0][j] * dim + c].add(g[j * dim + c]);
  }
  for (size_t r = 0; r < s.inv.size() && s.inv.size() > 1; ++r) {
    part.assign(s.owner[r].size() * dim, ExactSum());
    const float *g = s.grads[r].data();
    for (size_t j = 0; j < s.inv[r].size(); ++j)
      for (size_t c = 0; c < dim; ++c)
        part[s.inv[r][j] * dim + c].add(g[j * dim + c]);
    wire.resize(part.size() * ExactSum::kWireBytes);
    for (size_t k = 0; k < part.size(); ++k) {
      part[k].normalize();
      part[k].write(wire.data() + k * ExactSum::kWireBytes);
    }
    ExactSum in;
    for (size_t u = 0; u < s.owner[r].size(); ++u)
      for (size_t c = 0; c < dim; ++c) {
        if (!in.read(wire.data() + (u * dim + c) * ExactSum::kWireBytes))
          std::abort();
        acc[s.owner[r][u] * dim + c].add(in);
      }
  }
  out.resize(acc.size());
  for (size_t k = 0; k < acc.size(); ++k)
    out[k] = static_cast<float>(acc[k].to_double());
}

}  // namespace

int main(int argc, char **argv) {
  int64_t batch = 512, vocab = 2048, dim = 8, steps = 50;
  int world = 1, reps = 3;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&] {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "exact_apply: %s needs a value\n", a.c_str());
        std::exit(2);
      }
      return std::atoll(argv[++i]);
    };
    if (a == "--batch")
      batch = next();
    else if (a == "--vocab")
      vocab = next();
    else if (a == "--dim")
      dim = next();
    else if (a == "--steps")
      steps = next();
    else if (a == "--world")
      world = static_cast<int>(next());
    else if (a == "--reps")
      reps = static_cast<int>(next());
    else {
      std::fprintf(stderr,
                   "usage: exact_apply [--batch B] [--vocab V] [--dim D] "
                   "[--steps S] [--world W] [--reps R]\n");
      return 2;
    }
  }
  synth::Generator gen(1, vocab, 1.1);
  uint64_t seed = 7;
  std::vector<std::vector<TableStep>> all;
  for (int64_t s = 0; s < steps; ++s)
    all.push_back(make_step(gen, s, world, batch, dim, &seed));
  std::vector<float> part, out;
  std::vector<ExactSum> epart, acc;
  std::vector<unsigned char> wire;
  std::vector<double> fl, ex;
  double differ = 0, elems = 0;
  Totals t;
  for (int rep = 0; rep < reps; ++rep) {
    double f = 0, e = 0;
    for (const auto &step : all) {
      double t0 = now_s();
      for (const TableStep &s : step) float_sums(s, part, out);
      double t1 = now_s();
      std::vector<float> exact;
      for (const TableStep &s : step) {
        exact_sums(s, epart, wire, acc, out);
        if (rep == 0) exact.insert(exact.end(), out.begin(), out.end());
      }
      double t2 = now_s();
      f += t1 - t0;
      e += t2 - t1;
      if (rep == 0) {
        // How many sums today's float order rounds differently.
        size_t at = 0;
        for (const TableStep &s : step) {
          float_sums(s, part, out);
          for (size_t k = 0; k < out.size(); ++k, ++at)
            differ += out[k] != exact[at];
          elems += static_cast<double>(out.size());
          for (size_t r = 0; r < s.inv.size(); ++r) {
            t.contributions += static_cast<double>(s.grads[r].size());
            // Partial sums for the other ranks' ids (id mod world).
            double sent = static_cast<double>(s.owner[r].size() * s.dim) *
                          (world - 1) / world;
            t.wire_float += sent * 4;
            t.wire_exact += sent * ExactSum::kWireBytes;
          }
          t.unique += static_cast<double>(s.owner_unique * s.dim);
        }
      }
    }
    fl.push_back(f);
    ex.push_back(e);
  }
  std::sort(fl.begin(), fl.end());
  std::sort(ex.begin(), ex.end());
  const double per = 1e3 / static_cast<double>(steps * world);  // ms/step/rank
  const double fm = fl[fl.size() / 2] * per, em = ex[ex.size() / 2] * per;
  const double n = static_cast<double>(steps * world);
  std::printf(
      "exact_apply: batch %lld/rank, vocab %lld, dim %lld, world %d, %lld "
      "steps, median of %d\n",
      (long long)batch, (long long)vocab, (long long)dim, world,
      (long long)steps, reps);
  std::printf("| per rank and step | float32 (today) | exact |\n");
  std::printf("|---|---|---|\n");
  std::printf("| gradient contributions | %.0f | %.0f |\n", t.contributions / n,
              t.contributions / n);
  std::printf("| summed elements (owner) | %.0f | %.0f |\n", t.unique / n,
              t.unique / n);
  std::printf("| summation, CPU ms | %.3f | %.3f |\n", fm, em);
  std::printf("| partial sums on the wire, bytes | %.0f | %.0f |\n",
              t.wire_float / n, t.wire_exact / n);
  std::printf(
      "exact - float: %.3f CPU ms per rank and step; %.2f%% of the "
      "summed elements round differently in float32 order\n",
      em - fm, 100.0 * differ / std::max(elems, 1.0));
  return 0;
}
