// The CTR demo's per-id planning, alone: per step and rank, 26 tables of
// `vocab` rows with one id per sample and the wide table (26 * vocab rows,
// 26 ids per sample), StepPlan::prepare on each (the local dedup, the bound
// check and the counting sort by owner) and, at world 2, each owner's dedup
// of what both ranks sent it (the blocks built as the collection does).
//   dedup_cost [--vocab V] [--world 1|2] [--steps S] [--batch B]
//              [--evict-kb K]
// --evict-kb writes K KiB (untimed) before each step, as the rest of a demo
// step does between two plannings (8192: past a core's 2 MiB L2).
// Prints CPU ns per sample of prepare and of owner_dedup (both ranks' work
// summed, as the demo's CPU per sample is). Deterministic work per step, so
// `valgrind --tool=callgrind dedup_cost --steps 20` counts instructions.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <memory>
#include <string>
#include <vector>

#include "embedding/plan.h"
#include "embedding/spec.h"
#include "synth_data.h"

namespace {

using hb::emb::StepPlan;

// This thread's CPU time: the machine is shared, and the planning is
// what the demo's CPU per sample counts.
double now() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

}  // namespace

int main(int argc, char **argv) {
  int64_t vocab = 2048, steps = 200, batch = 512, evict_kb = 0;
  int world = 2;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    const int64_t v = std::atoll(argv[i + 1]);
    if (a == "--vocab")
      vocab = v;
    else if (a == "--world")
      world = static_cast<int>(v);
    else if (a == "--steps")
      steps = v;
    else if (a == "--batch")
      batch = v;
    else if (a == "--evict-kb")
      evict_kb = v;
  }
  if (world < 1 || world > 2 || vocab <= 0 || (vocab & (vocab - 1))) {
    std::fprintf(stderr, "dedup_cost: world 1 or 2, vocab a power of two\n");
    return 2;
  }
  const int T = synth::kTables;
  synth::Generator gen(1, vocab, 1.1);
  // [rank][table]: tables 0..25 one-hot, table 26 the wide one.
  std::vector<std::vector<std::unique_ptr<StepPlan>>> plans(world);
  for (int r = 0; r < world; ++r)
    for (int t = 0; t <= T; ++t) {
      hb_embedding_config c = HB_EMBEDDING_CONFIG_INIT;
      c.name = t < T ? "t" : "wide";
      c.dim = t < T ? 16 : 1;
      c.num_rows = t < T ? vocab : vocab * T;
      plans[r].push_back(
          std::make_unique<StepPlan>(hb::emb::spec_from_config(&c), r, world));
    }
  // Ids of every step, generated first (the generator is not timed).
  std::vector<std::vector<std::vector<int64_t>>> ids(
      steps * world, std::vector<std::vector<int64_t>>(T + 1));
  synth::Sample s;
  for (int64_t st = 0; st < steps * world; ++st) {
    for (int t = 0; t <= T; ++t) ids[st][t].resize(t < T ? batch : batch * T);
    for (int64_t i = 0; i < batch; ++i) {
      gen.sample(0, st * batch + i, &s);
      for (int t = 0; t < T; ++t) {
        ids[st][t][i] = s.ids[t];
        ids[st][T][i * T + t] = t * vocab + s.ids[t];
      }
    }
  }
  std::vector<int64_t> recv;
  double t_prep = 0, t_owner = 0;
  uint64_t check = 0;
  // The rest of a demo step (lookups, MLP, updates) between two plannings:
  // written untimed, so the planning finds its arrays as the demo does.
  std::vector<char> evict(static_cast<size_t>(evict_kb) * 1024);
  for (int64_t st = 0; st < steps; ++st) {
    for (size_t i = 0; i < evict.size(); i += 64) evict[i] += 1;
    double t0 = now();
    for (int r = 0; r < world; ++r)
      for (int t = 0; t <= T; ++t) {
        const std::vector<int64_t> &v = ids[st * world + r][t];
        plans[r][t]->prepare(v.data(), v.size(), v.data(), "dedup_cost");
      }
    double t1 = now();
    t_prep += t1 - t0;
    if (world == 1) continue;
    for (int t = 0; t <= T; ++t)
      for (int o = 0; o < world; ++o) {
        // What owner o receives: each rank's block for o, by rank.
        recv.clear();
        std::vector<int64_t> counts(world);
        for (int p = 0; p < world; ++p) {
          const StepPlan &pl = *plans[p][t];
          int64_t at = 0;
          for (int q = 0; q < o; ++q) at += pl.send_counts()[q];
          counts[p] = pl.send_counts()[o];
          recv.insert(recv.end(), pl.send_ids().begin() + at,
                      pl.send_ids().begin() + at + counts[p]);
        }
        StepPlan &pl = *plans[o][t];
        pl.set_recv_counts(counts);
        double a = now();
        check += pl.owner_dedup(recv.data(), recv.size());
        t_owner += now() - a;
      }
  }
  const double samples = static_cast<double>(steps) * batch * world;
  std::printf(
      "vocab %lld world %d steps %lld: prepare %.1f ns/sample, "
      "owner_dedup %.1f ns/sample (check %llu)\n",
      (long long)vocab, world, (long long)steps, t_prep * 1e9 / samples,
      t_owner * 1e9 / samples, (unsigned long long)check);
  return 0;
}
