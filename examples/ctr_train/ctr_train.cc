// End-to-end CTR training with hb: a small wide-and-deep model on
// criteo-synth data, data-parallel dense layers and sharded embeddings.
//
//   hbrun -n 4 -- ctr_train [--train-samples N] [--batch B] [--out DIR] ...
//   hbrun -n 2 -- ctr_train --data 'dir/part-*' ...   (files from
//                                 criteo_synth_tsv, read by hb_reader)
//   ctr_train --profile ...       (time per step phase, per rank)
//   hbrun -n 4 --max-restarts 3 -- ctr_train --checkpoint-dir D
//         --checkpoint-every 50    (whole-job checkpoints; a restarted job
//                                   resumes from the newest one)
//   hbrun -n 2 --evaluator -- ctr_train --checkpoint-dir D
//         --checkpoint-every 50 --eval-log L   (and an evaluator)
//   hbrun -n 2 --ps 1 -- ctr_train ...   (parameter-server mode: the tables
//                                 and dense parameters on the ps tasks;
//                                 any job with ps tasks, e.g. TF_CONFIG's)
//   hbrun -n 2 --ps 1 -- ctr_train --splits ...   (ps mode, dynamic splits:
//                                 ps task 0 hands out the train samples in
//                                 splits, a fast worker takes more, each
//                                 sample trained exactly once)
//
// Per step, on every rank: hb_data_sync where ranks may run out of data
// apart (--files N: uneven shards; --data; by default the samples are
// split evenly and every rank knows from the shard plan when any rank is
// out, without a round; --data-sync calls it anyway), one
// hb_collection_lookup for all 27 features (26 one-hot categorical tables
// and the wide table's 26 ids per sample, sum-pooled: at most three
// exchanges whatever the number of tables), a forward/backward pass of the
// MLP (three SGEMMs: CBLAS when found at configure time, else loops), dense
// gradients through hb_allreduce_many, sparse gradients through one
// hb_collection_apply_gradients (it reuses the lookup's plan: one exchange).
// The step is pipelined as TorchRec's (--no-pipeline: one lookup per step):
// the next batch's lookup is started (hb_collection_lookup_start: its ids go
// to their owners on the collection's progress thread while this batch's
// MLP runs) and finished (hb_collection_lookup_wait: the rows, read after
// this batch's update) at the top of the next step; the results are
// bit-identical. The dense gradients' allreduce overlaps the sparse update
// (--no-overlap: hb_allreduce_many first): hb_allreduce_start runs it on the
// context's progress thread while hb_collection_apply_gradients runs here,
// then hb_allreduce_wait; the same bits (rank order per element). By
// default (--dense-allreduce fused) the dense sum rides in the update's own
// exchange instead (hb_collection_apply_gradients_dense: one round less per
// step, no hand-off to the allreduce's thread; the same bits again);
// --dense-allreduce separate keeps hb_allreduce_start.
// The next train batch is generated on a thread while the step runs
// (--no-prefetch: in the step; the same samples in the same order); the
// step's data phase is the wait for it, and the step generates any part the
// thread has not reached, so a thread without a core never holds it up.
// --profile prints the thread's CPU per step on a line of its own.
// Every --eval-every steps the held-out split is scored with the exact AUC
// metric (merged across ranks). At the end: a checkpoint, a serving export,
// and the final AUC next to the planted model's AUC (the best achievable).
// With --checkpoint-dir, a checkpoint of the whole job every
// --checkpoint-every steps (job_checkpoint.h); on start the job resumes from
// the newest one there. A process whose context is an evaluator task
// (TF_CONFIG, or hbrun --evaluator) trains nothing: it follows D
// (hb_evaluator_*, docs/evaluator.md), scores every checkpoint on the
// held-out split with the exact AUC and appends a JSON line per checkpoint
// to --eval-log; the chief ends training with hb_checkpoint_finish.
// --digest prints a digest of every table, dense
// buffer and metric at the end, to compare runs bit for bit.
#include <atomic>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>

#define HB_EXPERIMENTAL 1  // embedding collections
#include "dense_math.h"
#include "file_source.h"
#include "hb.h"
#include "job_checkpoint.h"
#include "synth_data.h"

namespace {

[[noreturn]] void die(const char *what, hb_status st) {
  std::fprintf(stderr, "ctr_train: %s: %s: %s\n", what, hb_status_name(st),
               hb_last_error());
  std::exit(1);
}
#define CHECK_HB(call)                 \
  do {                                 \
    hb_status st_ = (call);            \
    if (st_ != HB_OK) die(#call, st_); \
  } while (0)

double clock_s(clockid_t clock) {
  timespec ts;
  clock_gettime(clock, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}
double now_s() { return clock_s(CLOCK_MONOTONIC); }

struct Flags {
  int64_t train_samples = 480000;
  int64_t eval_samples = 40000;
  // > 0: the train split comes as this many files of uneven size (ranks
  // hold uneven shards: hb_data_sync feeds the ones out of data empty
  // batches); 0: the samples are split evenly over the ranks.
  int64_t files = 0;
  int64_t batch = 512;
  int64_t vocab = 2048;  // per table; a power of two
  int64_t dim = 8;
  int64_t hidden = 64;
  int64_t eval_every = 100;
  int64_t log_every = 25;
  double lr = 0.05;
  double max_gap =
      0.10;  // fail if the final AUC trails the planted one by more
  uint64_t seed = 2026;
  std::string out = "ctr_out";
  std::string data;      // --data 'glob': train from Criteo-format files
  bool profile = false;  // --profile: time per step phase, printed at the end
  std::string checkpoint_dir;    // --checkpoint-dir: whole-job checkpoints
  int64_t checkpoint_every = 0;  // steps between them (0: none periodic)
  int64_t checkpoint_keep = 3;
  bool checkpoint_async = false;  // written by a background thread
  bool digest = false;            // --digest: print the final state's digest
  std::string eval_log;           // --eval-log: the evaluator's JSON lines
  bool pipeline = true;  // --no-pipeline: one hb_collection_lookup per step
  bool overlap = true;   // --no-overlap: the dense allreduce before the update
  // --dense-allreduce fused (default): the dense gradients' sum rides in the
  // sparse update's exchange (hb_collection_apply_gradients_dense);
  // separate: hb_allreduce_start beside the update. The same bits.
  bool dense_fused = true;
  // --no-prefetch: each train batch generated in its step, not on a thread
  // during the step before.
  bool prefetch = true;
  // --data-sync: hb_data_sync every step even on even shards (where the
  // shard plan decides alike without a round).
  bool data_sync = false;
  // --splits: ps mode with dynamic splits (sets HB_PS_SPLIT_SAMPLES to the
  // train samples and, unless set, HB_PS_SPLIT_SIZE to 8 batches).
  bool splits = false;
};

Flags parse_flags(int argc, char **argv) {
  Flags f;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> const char * {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "ctr_train: %s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--train-samples")
      f.train_samples = std::atoll(next());
    else if (a == "--eval-samples")
      f.eval_samples = std::atoll(next());
    else if (a == "--files")
      f.files = std::atoll(next());
    else if (a == "--batch")
      f.batch = std::atoll(next());
    else if (a == "--vocab")
      f.vocab = std::atoll(next());
    else if (a == "--dim")
      f.dim = std::atoll(next());
    else if (a == "--hidden")
      f.hidden = std::atoll(next());
    else if (a == "--eval-every")
      f.eval_every = std::atoll(next());
    else if (a == "--log-every")
      f.log_every = std::atoll(next());
    else if (a == "--lr")
      f.lr = std::atof(next());
    else if (a == "--max-gap")
      f.max_gap = std::atof(next());
    else if (a == "--seed")
      f.seed = std::strtoull(next(), nullptr, 10);
    else if (a == "--data")
      f.data = next();
    else if (a == "--out")
      f.out = next();
    else if (a == "--profile")
      f.profile = true;
    else if (a == "--checkpoint-dir")
      f.checkpoint_dir = next();
    else if (a == "--checkpoint-every")
      f.checkpoint_every = std::atoll(next());
    else if (a == "--checkpoint-keep")
      f.checkpoint_keep = std::atoll(next());
    else if (a == "--eval-log")
      f.eval_log = next();
    else if (a == "--checkpoint-async")
      f.checkpoint_async = true;
    else if (a == "--digest")
      f.digest = true;
    else if (a == "--no-pipeline")
      f.pipeline = false;
    else if (a == "--no-overlap")
      f.overlap = false;
    else if (a == "--dense-allreduce") {
      const std::string v = next();
      if (v != "fused" && v != "separate") {
        std::fprintf(stderr,
                     "ctr_train: --dense-allreduce takes fused or separate, "
                     "not '%s'\n",
                     v.c_str());
        std::exit(2);
      }
      f.dense_fused = v == "fused";
    } else if (a == "--no-prefetch")
      f.prefetch = false;
    else if (a == "--data-sync")
      f.data_sync = true;
    else if (a == "--splits")
      f.splits = true;
    else {
      std::fprintf(
          stderr,
          "usage: ctr_train [--train-samples N] [--eval-samples N] [--files N] "
          "[--batch B] "
          "[--vocab V] [--dim D] [--hidden H] [--eval-every S] [--log-every S] "
          "[--lr LR] [--max-gap G] [--seed S] [--out DIR] [--data 'GLOB'] "
          "[--profile] [--no-pipeline] [--no-overlap] "
          "[--dense-allreduce fused|separate] [--no-prefetch] "
          "[--data-sync] "
          "[--checkpoint-dir D "
          "[--checkpoint-every "
          "N] [--checkpoint-keep K] [--checkpoint-async]] [--eval-log PATH] "
          "[--digest] [--splits]\n");
      std::exit(2);
    }
  }
  if (f.batch <= 0 || f.vocab <= 0 || (f.vocab & (f.vocab - 1)) || f.dim <= 0 ||
      f.hidden <= 0 || f.files < 0 || f.checkpoint_every < 0 ||
      f.checkpoint_keep < 1) {
    std::fprintf(stderr,
                 "ctr_train: batch, dim, hidden > 0, files >= 0, vocab a power "
                 "of two, checkpoint-every >= 0 and checkpoint-keep >= 1\n");
    std::exit(2);
  }
  return f;
}

// --profile: wall time of each phase of the training steps (evaluation
// excluded), summed over the steps; printed per rank at the end, with the
// process's CPU time over the same phases (every thread: hb's progress
// threads and the prefetch) and the prefetch thread's own.
class StepProfile {
 public:
  enum Phase {
    kData,
    kLookup,
    kLookupStart,
    kMlpForward,
    kGlobalBatch,
    kMlpBackward,
    kDenseAllreduce,
    kDenseOptimizer,
    kSparseUpdate,
    kSync,
    kMetric,
    kPhases
  };
  explicit StepProfile(bool on) : on_(on) {}
  // Starts `next`, ending the running phase (if any).
  void mark(Phase next) {
    if (!on_ || paused_) return;
    double t = now_s(), c = clock_s(CLOCK_PROCESS_CPUTIME_ID);
    if (running_ != kPhases)
      total_[running_] += t - since_, process_cpu_ += c - cpu_since_;
    running_ = next, since_ = t, cpu_since_ = c;
  }
  void stop() { mark(kPhases); }
  void pause(bool p) { paused_ = p; }  // evaluation is not a training step
  // prefetch_cpu: the prefetch thread's CPU seconds (0 without one);
  // prefetch_share: the fraction of the train samples it generated.
  void print(int rank, int64_t steps, double prefetch_cpu = 0,
             double prefetch_share = 0) const {
    if (!on_ || steps == 0) return;
    static const char *names[kPhases] = {
        "data",          "lookup",    "lookup_start",    "mlp_fwd",
        "global_batch",  "mlp_bwd",   "dense_allreduce", "dense_optim",
        "sparse_update", "data_sync", "metric"};
    double sum = 0;
    for (double t : total_) sum += t;
    std::string line;
    char buf[64];
    for (int p = 0; p < kPhases; ++p) {
      std::snprintf(buf, sizeof buf, " %s %.3f", names[p],
                    1e3 * total_[p] / steps);
      line += buf;
    }
    std::printf("profile rank %d: ms/step%s | total %.3f\n", rank, line.c_str(),
                1e3 * sum / steps);
    // Its own prefix: scripts read the line above by "profile rank R:".
    std::printf(
        "profile cpu rank %d: ms/step prefetch thread %.3f (%.0f%% of "
        "the samples) | process %.3f\n",
        rank, 1e3 * prefetch_cpu / steps, 100 * prefetch_share,
        1e3 * process_cpu_ / steps);
  }

 private:
  bool on_, paused_ = false;
  Phase running_ = kPhases;
  double since_ = 0, total_[kPhases] = {};
  double cpu_since_ = 0, process_cpu_ = 0;
};

// Samples [begin, end) of split from the generator into *out.
void generate(const synth::Generator &gen, int split, int64_t begin,
              int64_t end, std::vector<synth::Sample> *out) {
  out->resize(end - begin);
  for (int64_t i = begin; i < end; ++i)
    gen.sample(split, i, &(*out)[i - begin]);
}

// The train batch after the one handed out, generated on a thread while the
// step that trains the current one runs (--no-prefetch: in the step). Sample
// i depends only on (seed, split, i), so a prefetched range holds the
// samples generated in place, bit for bit; a range it did not guess (the
// first after a start or a resume) is generated in place. The range goes in
// chunks that the thread and take() claim from one counter: a batch the
// thread has not finished when the step wants it (its core busy with other
// ranks or tasks) is finished by the caller, so the step never waits longer
// than for the chunk the thread holds, and a thread that never ran costs
// the step nothing but the handoff.
class Prefetcher {
 public:
  Prefetcher(const synth::Generator &gen, int64_t batch, int64_t shard_end)
      : gen_(gen), batch_(batch), shard_end_(shard_end) {
    thread_ = std::thread([this] { run(); });
  }
  ~Prefetcher() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }

  // Train samples [begin, end) into *out; posts the range next_batch asks
  // for next, [end, min(shard end, end + batch)).
  void take(int64_t begin, int64_t end, std::vector<synth::Sample> *out) {
    bool hit = false;
    if (posted_) {
      claim_chunks();  // what the thread has not started
      std::unique_lock<std::mutex> lock(mu_);
      // The thread holds at most one chunk (tens of microseconds); a minute
      // means it is gone (every wait in the demo is bounded).
      if (!cv_.wait_for(lock, std::chrono::seconds(60),
                        [this] { return !thread_busy_; })) {
        std::fprintf(stderr,
                     "ctr_train: the prefetch thread kept a chunk for 60 s\n");
        std::exit(1);
      }
      posted_ = false;
      hit = begin_ == begin && end_ == end;
      if (hit) out->swap(slot_);
    }
    if (!hit) generate(gen_, /*split=*/0, begin, end, out);
    const int64_t nb = end, ne = std::min(shard_end_, end + batch_);
    if (ne <= nb) return;
    {
      std::lock_guard<std::mutex> lock(mu_);
      begin_ = nb, end_ = ne, posted_ = true, ++seq_;
      slot_.resize(ne - nb);
      chunks_ = (ne - nb + kChunk - 1) / kChunk;
      next_chunk_.store(0, std::memory_order_relaxed);
    }
    cv_.notify_all();
  }
  // The thread's CPU seconds, and the samples it generated (the rest of the
  // prefetched ranges the caller finished).
  double cpu_s() {
    std::lock_guard<std::mutex> lock(mu_);
    return cpu_s_;
  }
  int64_t thread_samples() {
    std::lock_guard<std::mutex> lock(mu_);
    return thread_samples_;
  }

 private:
  static constexpr int64_t kChunk = 32;  // samples: ~30 us at vocab 2048

  // Generates the posted range's unclaimed chunks into slot_; how many
  // samples. Chunks are disjoint, so the two threads write apart; the
  // mutex (taken after) orders the writes before the swap.
  int64_t claim_chunks() {
    int64_t made = 0;
    for (;;) {
      const int64_t k = next_chunk_.fetch_add(1, std::memory_order_relaxed);
      if (k >= chunks_) return made;
      const int64_t lo = begin_ + k * kChunk, hi = std::min(end_, lo + kChunk);
      for (int64_t i = lo; i < hi; ++i) gen_.sample(0, i, &slot_[i - begin_]);
      made += hi - lo;
    }
  }

  void run() {
    std::unique_lock<std::mutex> lock(mu_);
    uint64_t seen = 0;
    for (;;) {
      // Idle until a range or the end (the destructor); no peer involved.
      cv_.wait(lock, [&] { return stop_ || (posted_ && seq_ != seen); });
      if (stop_) return;
      seen = seq_;
      thread_busy_ = true;  // take() waits for it before the next post
      lock.unlock();
      const double c0 = clock_s(CLOCK_THREAD_CPUTIME_ID);
      const int64_t made = claim_chunks();
      const double c = clock_s(CLOCK_THREAD_CPUTIME_ID) - c0;
      lock.lock();
      cpu_s_ += c, thread_samples_ += made;
      thread_busy_ = false;
      cv_.notify_all();
    }
  }

  const synth::Generator &gen_;  // read-only: sample() is const
  const int64_t batch_, shard_end_;
  std::mutex mu_;
  std::condition_variable cv_;
  // The posted range, changed only under mu_ while the thread is not busy.
  int64_t begin_ = 0, end_ = 0, chunks_ = 0;
  std::vector<synth::Sample> slot_;
  std::atomic<int64_t> next_chunk_{0};
  bool posted_ = false, thread_busy_ = false, stop_ = false;
  uint64_t seq_ = 0;  // posts so far: the thread takes each range once
  double cpu_s_ = 0;
  int64_t thread_samples_ = 0;
  std::thread thread_;  // last: started once the rest is set
};

// Dense parameters, replicated on every rank, with Adagrad accumulators.
struct Dense {
  int in, hidden;
  std::vector<float> w1, b1, w2, b2;      // parameters
  std::vector<float> gw1, gb1, gw2, gb2;  // gradients (allreduced)
  std::vector<float> aw1, ab1, aw2, ab2;  // Adagrad accumulators

  Dense(int in_, int hidden_, uint64_t seed) : in(in_), hidden(hidden_) {
    w1.resize(static_cast<size_t>(in) * hidden);
    double scale = std::sqrt(2.0 / in);
    for (size_t i = 0; i < w1.size(); ++i)
      w1[i] = static_cast<float>(scale * synth::gauss(synth::mix(seed + i)));
    b1.assign(hidden, 0.0f);
    w2.resize(hidden);
    for (int i = 0; i < hidden; ++i)
      w2[i] = static_cast<float>(0.1 * synth::gauss(synth::mix(~seed + i)));
    b2.assign(1, 0.0f);
    gw1.assign(w1.size(), 0.0f), gb1.assign(hidden, 0.0f),
        gw2.assign(hidden, 0.0f), gb2.assign(1, 0.0f);
    aw1.assign(w1.size(), 0.1f), ab1.assign(hidden, 0.1f),
        aw2.assign(hidden, 0.1f), ab2.assign(1, 0.1f);
  }
  void zero_grads() {
    for (auto *g : {&gw1, &gb1, &gw2, &gb2})
      std::fill(g->begin(), g->end(), 0.0f);
  }
  static void adagrad(std::vector<float> &p, const std::vector<float> &g,
                      std::vector<float> &acc, float lr) {
    for (size_t i = 0; i < p.size(); ++i) {
      acc[i] += g[i] * g[i];
      p[i] -= lr * g[i] / std::sqrt(acc[i]);
    }
  }
  // Parameters (or gradients) as one buffer: w1, b1, w2, b2.
  void pack_params(std::vector<float> *out) const {
    pack(out, {&w1, &b1, &w2, &b2});
  }
  void pack_grads(std::vector<float> *out) const {
    pack(out, {&gw1, &gb1, &gw2, &gb2});
  }
  void unpack_params(const std::vector<float> &in) {
    unpack(in, {&w1, &b1, &w2, &b2});
  }
  void unpack_grads(const std::vector<float> &in) {
    unpack(in, {&gw1, &gb1, &gw2, &gb2});
  }
  static void unpack(const std::vector<float> &in,
                     std::initializer_list<std::vector<float> *> parts) {
    size_t at = 0;
    for (auto *v : parts) {
      std::copy(in.begin() + at, in.begin() + at + v->size(), v->begin());
      at += v->size();
    }
  }
  static void pack(std::vector<float> *out,
                   std::initializer_list<const std::vector<float> *> parts) {
    out->clear();
    for (const auto *v : parts) out->insert(out->end(), v->begin(), v->end());
  }
  void step(float lr) {
    adagrad(w1, gw1, aw1, lr), adagrad(b1, gb1, ab1, lr),
        adagrad(w2, gw2, aw2, lr), adagrad(b2, gb2, ab2, lr);
  }
};

// One batch's activations (reused across steps).
struct Batch {
  std::vector<synth::Sample> samples;
  std::vector<std::vector<int64_t>> ids;  // [table][n]
  std::vector<int64_t> wide_ids;          // n * tables
  // The collection's jagged input: feature t < tables reads ids[t] (one id
  // per sample), feature `tables` reads wide_ids (tables ids per sample).
  std::vector<int64_t> one_hot, wide_bags;  // offsets, n + 1 each
  std::vector<const int64_t *> feat_ids, feat_offsets;
  hb_jagged_batch jagged = HB_JAGGED_BATCH_INIT;
  // Pooled output: n x (tables * dim + 1), the wide sum in the last column;
  // and its gradient.
  std::vector<float> pooled, grad_pooled;
  std::vector<float> x, z1, logit, prob, label;
};

class Trainer {
 public:
  Trainer(hb_context *ctx, const Flags &f)
      : ctx_(ctx),
        f_(f),
        gen_(f.seed, f.vocab, 1.1),
        dense_(static_cast<int>(synth::kTables * f.dim + synth::kDense),
               static_cast<int>(f.hidden), f.seed) {
    rank_ = hb_context_rank(ctx), world_ = hb_context_world_size(ctx);
    evaluator_ = std::strcmp(hb_context_task_type(ctx), "evaluator") == 0;
    ps_job_ = hb_context_num_ps(ctx) > 0;
    ps_ = ps_job_ && !evaluator_;  // the evaluator reads checkpoints only
    create_model();
    for (Batch *b : {&train_[0], &train_[1], &eval_})
      b->ids.resize(synth::kTables);
    if (!f.data.empty() && ps_) {
      std::fprintf(stderr,
                   "ctr_train: --data is not supported in "
                   "parameter-server mode\n");
      std::exit(2);
    }
    if (!f.data.empty())
      files_ = std::make_unique<FileSource>(ctx, f.data, f.batch);
    else if (!ps_)
      plan_train_shard();
    if (ps_) {
      if (!f.checkpoint_dir.empty()) open_ps_checkpoints();
      return;
    }
    hb_metric_config mc = HB_METRIC_CONFIG_INIT;  // TF's thresholded AUC
    CHECK_HB(hb_metric_create(ctx_, &mc, &running_auc_));
    if (!f.checkpoint_dir.empty() && !evaluator_) open_checkpoints();
  }
  ~Trainer() {
    hb_checkpoint_destroy(ckpt_);  // waits for a write in flight
    hb_metric_destroy(running_auc_);
    release_model();
  }

  // The evaluator role, parameter-server training or collective training.
  int run() { return evaluator_ ? follow() : ps_ ? run_ps() : train(); }

 private:
  // The tables, their collection and (parameter-server mode) the dense
  // parameters and the job's sample counter on the ps tasks.
  void create_model() {
    for (int t = 0; t < synth::kTables; ++t) {
      char name[32];
      std::snprintf(name, sizeof name, "cat_%02d", t);
      tables_.push_back(
          make_table(name, f_.vocab, f_.dim, HB_INIT_NORMAL, 0.0, 0.05));
    }
    wide_ = make_table("wide", f_.vocab * synth::kTables, 1, HB_INIT_ZEROS, 0.0,
                       0.0);
    // One collection: the 26 categorical features and the wide feature.
    std::vector<hb_collection_feature> feats(synth::kTables + 1);
    for (int t = 0; t <= synth::kTables; ++t) {
      feats[t] = HB_COLLECTION_FEATURE_INIT;
      feats[t].table = t < synth::kTables ? tables_[t] : wide_;
      feats[t].pooling = HB_POOLING_SUM;
    }
    CHECK_HB(hb_collection_create(ctx_, feats.data(), feats.size(), &coll_));
    if (!ps_) return;
    // Dense parameters on the ps tasks, with the same Adagrad (epsilon 0).
    dense_.pack_params(&flat_);
    hb_ps_dense_config dc = HB_PS_DENSE_CONFIG_INIT;
    dc.name = "dense";
    dc.count = static_cast<int64_t>(flat_.size());
    dc.init = flat_.data();
    dc.optimizer = HB_OPT_ADAGRAD;
    dc.learning_rate = f_.lr;
    dc.initial_accumulator = 0.1;
    dc.epsilon = 0.0;
    CHECK_HB(hb_ps_dense_create(ctx_, &dc, &dense_ps_));
    hb_embedding_config cc = HB_EMBEDDING_CONFIG_INIT;
    cc.name = "samples";  // id 0: the job's samples so far (SGD, lr 1)
    cc.dim = 1;
    cc.num_rows = 1;
    cc.learning_rate = 1.0;
    cc.placement = HB_PLACEMENT_PS;
    CHECK_HB(hb_embedding_create(ctx_, &cc, &samples_));
  }
  // Destroying them on a worker leaves them on the ps tasks: with
  // staleness 0 nobody waits for this worker's next step any more.
  void release_model() {
    hb_collection_destroy(coll_);  // before its tables
    coll_ = nullptr;
    for (auto *t : tables_) hb_embedding_destroy(t);
    tables_.clear();
    hb_embedding_destroy(wide_);
    wide_ = nullptr;
    hb_ps_dense_destroy(dense_ps_);
    dense_ps_ = nullptr;
    hb_embedding_destroy(samples_);
    samples_ = nullptr;
  }
  int train();
  // The evaluator: each checkpoint's exact held-out AUC, one JSON line each.
  int follow();
  int run_ps();
  void save_and_export(const std::string &ckpt, const std::string &exp);
  void pull_dense() {
    if (!ps_) return;
    CHECK_HB(hb_ps_dense_pull(dense_ps_, flat_.data()));
    dense_.unpack_params(flat_);
  }

  // The model and data it trains: another configuration's checkpoints in
  // the directory are refused, not restored into this one.
  std::string job_id() const {
    return "ctr_train seed=" + std::to_string(f_.seed) +
           " vocab=" + std::to_string(f_.vocab) +
           " dim=" + std::to_string(f_.dim) +
           " hidden=" + std::to_string(f_.hidden) +
           " batch=" + std::to_string(f_.batch) +
           (!f_.data.empty() ? " data=" + f_.data
                             : " samples=" + std::to_string(f_.train_samples) +
                                   "/" + std::to_string(f_.files));
  }

  // The job's checkpoint handle (--checkpoint-dir) with the tables of the
  // collection registered: both modes start so.
  void create_checkpoints() {
    hb_checkpoint_config cc = HB_CHECKPOINT_CONFIG_INIT;
    cc.dir = f_.checkpoint_dir.c_str();
    cc.keep = static_cast<int32_t>(f_.checkpoint_keep);
    cc.async_write = f_.checkpoint_async ? 1 : 0;
    job_id_ = job_id();
    cc.job_id = job_id_.c_str();
    CHECK_HB(hb_checkpoint_create(ctx_, &cc, &ckpt_));
    CHECK_HB(hb_checkpoint_add_collection(ckpt_, coll_));
  }

  // Whole-job checkpoints: registers everything a resumed job needs to go
  // on exactly as if it had not stopped.
  void open_checkpoints() {
    create_checkpoints();
    struct {
      const char *name;
      std::vector<float> *v;
    } dense[] = {{"dense.w1", &dense_.w1},    {"dense.b1", &dense_.b1},
                 {"dense.w2", &dense_.w2},    {"dense.b2", &dense_.b2},
                 {"adagrad.w1", &dense_.aw1}, {"adagrad.b1", &dense_.ab1},
                 {"adagrad.w2", &dense_.aw2}, {"adagrad.b2", &dense_.ab2}};
    for (auto &d : dense)
      CHECK_HB(hb_checkpoint_add_buffer(ckpt_, d.name, d.v->data(),
                                        d.v->size() * sizeof(float),
                                        HB_BUFFER_REPLICATED));
    CHECK_HB(hb_checkpoint_add_buffer(ckpt_, "trained", &tally_, sizeof tally_,
                                      HB_BUFFER_REPLICATED));
    CHECK_HB(hb_checkpoint_add_metric(ckpt_, "running_auc", running_auc_));
    if (files_)
      CHECK_HB(hb_checkpoint_add_reader(ckpt_, files_->reader()));
    else  // the synthetic shard is planned per world size: same size only
      CHECK_HB(hb_checkpoint_add_buffer(ckpt_, "data.pos", &pos_, sizeof pos_,
                                        HB_BUFFER_PER_RANK));
  }

  // Parameter-server mode: the tables, the dense parameters and the sample
  // counter live on the ps tasks, which write them (and every worker's
  // committed position) into the job checkpoint.
  void open_ps_checkpoints() {
    create_checkpoints();
    CHECK_HB(hb_checkpoint_add_ps_dense(ckpt_, dense_ps_));
    CHECK_HB(hb_checkpoint_add_table(ckpt_, samples_));
  }

  void save_ps_checkpoint(int64_t step) {
    CHECK_HB(hb_checkpoint_save(ckpt_, step));
    if (rank_ == 0 && !f_.checkpoint_async)
      std::printf("checkpoint: step %" PRId64 " committed\n", step);
  }

  // The step to start from: 0, or the newest checkpoint's.
  int64_t resume() {
    pos_ = shard_begin_;
    if (!ckpt_) return 0;
    ckpt::KillHook("restore", rank_, f_.seed)
        .maybe_fire(restart_count(), "the restore of restart");
    double t0 = now_s();
    int64_t step = -1;
    CHECK_HB(hb_checkpoint_restore_latest(ckpt_, &step));
    if (step < 0) return 0;
    hb_checkpoint_stats st = HB_CHECKPOINT_STATS_INIT;
    CHECK_HB(hb_checkpoint_get_stats(ckpt_, &st));
    if (!files_ && st.restored_world != world_) {
      std::fprintf(stderr,
                   "ctr_train: the checkpoint at step %" PRId64
                   " was written by %d ranks; the synthetic data is sharded "
                   "per world size, so only --data (hb_reader) resumes at "
                   "another world size (this one: %d)\n",
                   step, st.restored_world, world_);
      std::exit(1);
    }
    if (hb_context_is_chief(ctx_))
      std::printf("resumed from the checkpoint of step %" PRId64
                  " (written by %d ranks, %" PRId64
                  " samples trained) in %.3f s: %s\n",
                  step, st.restored_world, tally_.count, now_s() - t0,
                  st.restored_path);
    resumed_ = true;
    return step;
  }

  // Collective: every rank's samples since the last call, into tally_.
  void merge_tally() {
    std::vector<ckpt::Tally> all(world_);
    CHECK_HB(hb_allgather(ctx_, &local_tally_, all.data(), 3, HB_INT64));
    for (const auto &t : all) {
      tally_.count += t.count;
      tally_.sum += t.sum;
      tally_.sum_sq += t.sum_sq;
    }
    local_tally_ = ckpt::Tally();
  }

  // Says (rank 0) when a save has been committed: with --checkpoint-async
  // that is some steps after hb_checkpoint_save returned.
  void report_commits() {
    hb_checkpoint_stats st = HB_CHECKPOINT_STATS_INIT;
    if (!ckpt_ || hb_checkpoint_get_stats(ckpt_, &st) != HB_OK ||
        st.committed_step == committed_step_)
      return;
    committed_step_ = st.committed_step;
    if (hb_context_is_chief(ctx_))
      std::printf("checkpoint: step %" PRId64
                  " committed (%.2f MB of state on rank 0; the save blocked "
                  "training %.1f ms, writing took %.1f ms)\n",
                  st.committed_step, st.state_bytes / 1e6,
                  1e3 * st.blocked_seconds, 1e3 * st.write_seconds);
  }

  void save(int64_t step) {
    merge_tally();
    if (!ckpt_ || step == saved_step_) return;
    if (restart_count() == 0)
      ckpt::KillHook("save", rank_, f_.seed)
          .maybe_fire(step, "the save of step");
    CHECK_HB(hb_checkpoint_save(ckpt_, step));
    saved_step_ = step;
    report_commits();
  }

  static int64_t restart_count() {
    const char *v = std::getenv("HB_RESTART_COUNT");
    return v ? std::atoll(v) : 0;
  }

  // --digest (collective; rank 0 prints): every table (the checksums of its
  // saved shards), the dense buffers, the metrics and the tally.
  void print_digest(const std::string &table_dir, double auc);

  hb_embedding *make_table(const char *name, int64_t rows, int64_t dim,
                           int32_t init, double a, double b) {
    hb_embedding_config cfg = HB_EMBEDDING_CONFIG_INIT;
    cfg.name = name;
    cfg.dim = dim;
    cfg.num_rows = rows;
    cfg.partition = HB_PARTITION_MOD;
    cfg.initializer = init;
    cfg.init_a = a;
    cfg.init_b = b;
    cfg.seed = f_.seed;
    cfg.optimizer = HB_OPT_ADAGRAD;
    cfg.learning_rate = f_.lr;
    cfg.initial_accumulator = 0.1;
    cfg.placement = ps_ ? HB_PLACEMENT_PS : HB_PLACEMENT_WORKERS;
    hb_embedding *e = nullptr;
    CHECK_HB(hb_embedding_create(ctx_, &cfg, &e));
    return e;
  }

  // By default hb_shard_range hands each rank a contiguous, even share of
  // the samples (sizes differ by at most one: no rank idles while the
  // others train). With --files N the train split is N files of uneven
  // size and each rank gets a contiguous run of files, so ranks hold
  // different amounts of data and hb_data_sync keeps them in step.
  void plan_train_shard() {
    if (f_.files == 0) {
      for (int r = 0; r < world_; ++r) {
        int64_t b = 0, e = 0;
        CHECK_HB(hb_shard_range(f_.train_samples, world_, r, 0, &b, &e));
        shard_sizes_.push_back(e - b);
        if (r == rank_) shard_begin_ = b, shard_end_ = e;
      }
      return;
    }
    // File i weighs 1 + i % 5: sizes differ up to 5x.
    std::vector<double> cum(f_.files + 1, 0.0);
    for (int64_t i = 0; i < f_.files; ++i)
      cum[i + 1] = cum[i] + 1.0 + static_cast<double>(i % 5);
    std::vector<int64_t> file_begin(f_.files + 1, 0);
    for (int64_t i = 0; i <= f_.files; ++i)
      file_begin[i] = std::llround(static_cast<double>(f_.train_samples) *
                                   cum[i] / cum[f_.files]);
    // Every rank's share, to know each step's global batch without asking.
    for (int r = 0; r < world_; ++r) {
      int64_t fb = 0, fe = 0;
      CHECK_HB(hb_shard_range(f_.files, world_, r, 0, &fb, &fe));
      shard_sizes_.push_back(file_begin[fe] - file_begin[fb]);
      if (r == rank_)
        shard_begin_ = file_begin[fb], shard_end_ = file_begin[fe];
    }
  }

  // The number of samples in training step `step` (from 0) over all ranks:
  // from the shard plan (each rank's batch is min(batch, what it has left)),
  // or with --data, where only each rank knows its batch, by an allreduce.
  int64_t global_batch(int64_t step, int64_t local_n) {
    int64_t n = 0;
    if (files_) {
      CHECK_HB(hb_allreduce(ctx_, &local_n, &n, 1, HB_INT64, HB_SUM));
      return n;
    }
    for (int64_t size : shard_sizes_)
      n += std::min(f_.batch, std::max<int64_t>(0, size - step * f_.batch));
    return n;
  }

  // Fills b with samples [begin, end) of split and the collection's
  // jagged input for them.
  void prepare(Batch &b, int split, int64_t begin, int64_t end);
  // The next training batch of this rank into b, the batch of step `step`
  // (from 0), after hb_data_sync (a rank out of data gets an empty batch);
  // false once every rank is out.
  bool next_batch(Batch &b, int64_t step);
  // The forward pass of b, whose pooled rows were looked up.
  void forward(Batch &b);
  // Backward pass and updates; `global_n` is the step's sample count over
  // all ranks (the loss is a mean over the global batch).
  void backward(Batch &b, int64_t global_n);
  double evaluate(double *planted_auc);
  // Scores the held-out split (this rank's share) into the metrics.
  void score_held_out(hb_metric *model, hb_metric *planted);
  static double loss_sum(const Batch &b);

  // Samples [begin, end) of split into b.samples: from the generator (the
  // prefetch thread's, training collectively), or the batch fetched from
  // the files (train split with --data).
  void fill_samples(Batch &b, int split, int64_t begin, int64_t end) {
    if (split == 0 && files_) return files_->samples(&b.samples);
    if (split == 0 && prefetch_) return prefetch_->take(begin, end, &b.samples);
    generate(gen_, split, begin, end, &b.samples);
  }

  hb_context *ctx_;
  Flags f_;
  synth::Generator gen_;
  std::unique_ptr<FileSource> files_;  // --data
  // The train batches' generator thread (train(): collective training on
  // the synthetic data, unless --no-prefetch).
  std::unique_ptr<Prefetcher> prefetch_;
  Dense dense_;
  std::vector<hb_embedding *> tables_;
  hb_embedding *wide_ = nullptr;
  hb_collection *coll_ = nullptr;
  bool ps_ = false;      // parameter-server mode (the job has ps tasks)
  bool ps_job_ = false;  // the job has ps tasks (this may be its evaluator)
  hb_ps_dense *dense_ps_ = nullptr;
  hb_embedding *samples_ = nullptr;
  std::vector<float> flat_;  // the dense parameters or gradients, packed
  int rank_ = 0, world_ = 1;
  int64_t shard_begin_ = 0, shard_end_ = 0;
  std::vector<int64_t> shard_sizes_;  // per rank (synthetic data)
  int64_t pos_ = 0;                   // next train sample of this shard
  // Two train batches (the pipelined step looks the next one up while the
  // current one is updated) and the evaluation's.
  Batch train_[2], eval_;
  std::vector<float> dz1_;  // n x hidden: the loss gradient at z1
  StepProfile prof_{f_.profile};
  hb_metric *running_auc_ = nullptr;
  hb_checkpoint *ckpt_ = nullptr;
  std::string job_id_;
  ckpt::Tally tally_;        // samples trained by every rank, to the last merge
  ckpt::Tally local_tally_;  // this rank's since then
  int64_t saved_step_ = -1, committed_step_ = -1;
  bool resumed_ = false;
  bool evaluator_ = false;  // the context is a TF_CONFIG evaluator task
};

void Trainer::print_digest(const std::string &table_dir, double auc) {
  double running = 0;
  CHECK_HB(hb_metric_result(running_auc_, &running));
  if (!hb_context_is_chief(ctx_)) return;
  uint64_t tables = ckpt::fnv("", 0);
  std::vector<std::string> names;
  for (size_t t = 0; t < tables_.size(); ++t) {
    char name[32];
    std::snprintf(name, sizeof name, "cat_%02zu", t);
    names.push_back(name);
  }
  names.push_back("wide");
  // A save's shard checksums cover every row and optimizer slot; the file
  // names carry a fresh nonce, so only the "shard" fields after them count.
  for (const auto &n : names) {
    std::string path = table_dir + "/" + n + "/" + n + ".manifest";
    FILE *fp = std::fopen(path.c_str(), "r");
    if (!fp) {
      std::fprintf(stderr, "ctr_train: --digest: cannot read %s\n",
                   path.c_str());
      std::exit(1);
    }
    char line[512];
    while (std::fgets(line, sizeof line, fp)) {
      char file[256];
      long long r = 0, bytes = 0, rows = 0;
      char sum[32];
      if (std::sscanf(line, "shard %lld %255s %lld %lld %31s", &r, file, &bytes,
                      &rows, sum) == 5) {
        tables = ckpt::fnv(n.data(), n.size(), tables);
        tables = ckpt::fnv(&r, sizeof r, tables);
        tables = ckpt::fnv(&rows, sizeof rows, tables);
        tables = ckpt::fnv(sum, std::strlen(sum), tables);
      }
    }
    std::fclose(fp);
  }
  uint64_t dense = ckpt::fnv("", 0);
  for (auto *v : {&dense_.w1, &dense_.b1, &dense_.w2, &dense_.b2, &dense_.aw1,
                  &dense_.ab1, &dense_.aw2, &dense_.ab2})
    dense = ckpt::fnv(v->data(), v->size() * sizeof(float), dense);
  std::printf("digest: tables %016" PRIx64 " dense %016" PRIx64
              " metrics running_auc %.17g held_out_auc %.17g\n",
              tables, dense, running, auc);
  std::printf("digest: trained samples %" PRId64 " fingerprints %016" PRIx64
              " %016" PRIx64 "\n",
              tally_.count, tally_.sum, tally_.sum_sq);
}

void Trainer::prepare(Batch &b, int split, int64_t begin, int64_t end) {
  const int64_t n = end - begin, D = f_.dim, T = synth::kTables;
  fill_samples(b, split, begin, end);
  b.wide_ids.resize(n * T);
  for (int t = 0; t < T; ++t) {
    b.ids[t].resize(n);
    for (int64_t i = 0; i < n; ++i) {
      b.ids[t][i] = b.samples[i].ids[t];
      b.wide_ids[i * T + t] = t * f_.vocab + b.samples[i].ids[t];
    }
  }
  b.one_hot.resize(n + 1), b.wide_bags.resize(n + 1);
  for (int64_t i = 0; i <= n; ++i) b.one_hot[i] = i, b.wide_bags[i] = i * T;
  b.feat_ids.resize(T + 1), b.feat_offsets.resize(T + 1);
  for (int t = 0; t < T; ++t)
    b.feat_ids[t] = b.ids[t].data(), b.feat_offsets[t] = b.one_hot.data();
  b.feat_ids[T] = b.wide_ids.data(), b.feat_offsets[T] = b.wide_bags.data();
  b.jagged.batch_size = n;
  b.jagged.ids = b.feat_ids.data();
  b.jagged.offsets = b.feat_offsets.data();
  b.pooled.resize(n * (T * D + 1));  // pooled width
}

bool Trainer::next_batch(Batch &b, int64_t step) {
  prof_.mark(StepProfile::kData);
  bool has_data = files_ ? files_->fetch() : pos_ < shard_end_;
  prof_.mark(StepProfile::kSync);
  int32_t cont = 0, empty = 0;
  if (!files_ && f_.files == 0 && !f_.data_sync) {
    // Even shards: every rank knows every rank's shard (shard_sizes_), so
    // whether any rank still has data at this step is known here, as
    // global_batch() knows the step's size: the same decision as
    // hb_data_sync's, without its round (one rendezvous per step fewer,
    // docs/performance.md, "Rendezvous per step"). Uneven files (--files)
    // and --data keep hb_data_sync: only then may ranks run out apart.
    for (int64_t size : shard_sizes_) cont |= size > step * f_.batch;
    empty = !has_data;
  } else {
    CHECK_HB(hb_data_sync(ctx_, has_data, /*drop_remainder=*/0, &cont, &empty));
  }
  if (!cont) return false;
  int64_t lo = pos_, hi = empty    ? pos_
                          : files_ ? pos_ + files_->size()
                                   : std::min(shard_end_, pos_ + f_.batch);
  prof_.mark(StepProfile::kData);
  prepare(b, /*split=*/0, lo, hi);
  pos_ = hi;
  return true;
}

void Trainer::forward(Batch &b) {
  const int64_t n = static_cast<int64_t>(b.samples.size()), D = f_.dim,
                T = synth::kTables, in = dense_.in, H = dense_.hidden;
  const int64_t P = T * D + 1;  // pooled width
  prof_.mark(StepProfile::kMlpForward);
  b.x.resize(n * in), b.z1.resize(n * H), b.logit.resize(n), b.prob.resize(n),
      b.label.resize(n);
  // x = [pooled embeddings | dense features]; z1 = x W1^T + b1 (one GEMM).
  for (int64_t i = 0; i < n; ++i) {
    float *x = &b.x[i * in];
    std::memcpy(x, &b.pooled[i * P], T * D * sizeof(float));
    std::memcpy(x + T * D, b.samples[i].dense, synth::kDense * sizeof(float));
    std::memcpy(&b.z1[i * H], dense_.b1.data(), H * sizeof(float));
  }
  dense_math::gemm(false, true, n, H, in, 1.0f, b.x.data(), in,
                   dense_.w1.data(), in, 1.0f, b.z1.data(), H);
  for (int64_t i = 0; i < n; ++i) {
    const float *z = &b.z1[i * H];
    double logit = dense_.b2[0];
    for (int64_t h = 0; h < H; ++h)
      if (z[h] > 0) logit += dense_.w2[h] * z[h];
    logit += b.pooled[i * P + T * D];  // the wide part: its pooled sum
    b.logit[i] = static_cast<float>(logit);
    b.prob[i] = static_cast<float>(1.0 / (1.0 + std::exp(-logit)));
    b.label[i] = b.samples[i].label;
  }
}

void Trainer::backward(Batch &b, int64_t global_n) {
  const int64_t n = static_cast<int64_t>(b.samples.size()), D = f_.dim,
                T = synth::kTables;
  const int64_t in = dense_.in, H = dense_.hidden;
  const float inv = 1.0f / static_cast<float>(global_n);
  prof_.mark(StepProfile::kMlpBackward);
  dense_.zero_grads();
  dz1_.resize(n * H);
  const int64_t P = T * D + 1;
  b.grad_pooled.resize(n * P);
  for (int64_t i = 0; i < n; ++i) {
    // d(mean logistic loss)/d(logit) = (p - y) / N
    float dl = (b.prob[i] - b.label[i]) * inv;
    const float *z = &b.z1[i * H];
    float *dz = &dz1_[i * H];
    dense_.gb2[0] += dl;
    for (int64_t h = 0; h < H; ++h) {
      bool on = z[h] > 0;  // ReLU
      dense_.gw2[h] += on ? dl * z[h] : 0.0f;
      dz[h] = on ? dl * dense_.w2[h] : 0.0f;
      dense_.gb1[h] += dz[h];
    }
    b.grad_pooled[i * P + T * D] = dl;  // each wide id gets dl
  }
  // gW1 = dz1^T x; the pooled embeddings' gradient is dz1 W1 restricted to
  // their T * D columns, written straight into grad_pooled (row stride P).
  dense_math::gemm(true, false, H, in, n, 1.0f, dz1_.data(), H, b.x.data(), in,
                   0.0f, dense_.gw1.data(), in);
  dense_math::gemm(false, false, n, T * D, H, 1.0f, dz1_.data(), H,
                   dense_.w1.data(), in, 0.0f, b.grad_pooled.data(), P);
  // Dense gradients: one fused allreduce over the four tensors.
  void *bufs[4] = {dense_.gw1.data(), dense_.gb1.data(), dense_.gw2.data(),
                   dense_.gb2.data()};
  size_t counts[4] = {dense_.gw1.size(), dense_.gb1.size(), dense_.gw2.size(),
                      dense_.gb2.size()};
  prof_.mark(StepProfile::kDenseAllreduce);
  if (!ps_ && f_.overlap && f_.dense_fused) {
    // The dense sum rides in the sparse update's partial-sums exchange: no
    // round and no progress-thread hand-off of its own. Packed into one
    // buffer: per element the same rank-order sum as hb_allreduce_many's,
    // so the same bits.
    dense_.pack_grads(&flat_);
    hb_collection_dense d = HB_COLLECTION_DENSE_INIT;
    d.send = d.recv = flat_.data();
    d.count = flat_.size();
    prof_.mark(StepProfile::kSparseUpdate);
    CHECK_HB(hb_collection_apply_gradients_dense(
        coll_, &b.jagged, b.grad_pooled.data(), nullptr, &d));
    dense_.unpack_grads(flat_);
    prof_.mark(StepProfile::kDenseOptimizer);
    dense_.step(static_cast<float>(f_.lr));
    return;
  }
  if (!ps_ && f_.overlap) {
    // The dense allreduce runs on the context's progress thread while the
    // sparse update runs here (its rounds on the collection's channel); the
    // dense step waits for it. Packed into one buffer: per element the same
    // rank-order sum as hb_allreduce_many's, so the same bits.
    dense_.pack_grads(&flat_);
    hb_allreduce_request *req = nullptr;
    CHECK_HB(hb_allreduce_start(ctx_, flat_.data(), flat_.data(), flat_.size(),
                                HB_FLOAT32, HB_SUM, &req));
    prof_.mark(StepProfile::kSparseUpdate);
    CHECK_HB(hb_collection_apply_gradients(coll_, &b.jagged,
                                           b.grad_pooled.data(), nullptr));
    prof_.mark(StepProfile::kDenseAllreduce);  // what the update left to wait
    CHECK_HB(hb_allreduce_wait(req));
    dense_.unpack_grads(flat_);
    prof_.mark(StepProfile::kDenseOptimizer);
    dense_.step(static_cast<float>(f_.lr));
    return;
  }
  if (ps_) {
    // The ps tasks sum the workers' gradients and apply Adagrad.
    dense_.pack_grads(&flat_);
    CHECK_HB(hb_ps_dense_push(dense_ps_, flat_.data()));
  } else {
    CHECK_HB(hb_allreduce_many(ctx_, bufs, counts, 4, HB_FLOAT32, HB_SUM));
    prof_.mark(StepProfile::kDenseOptimizer);
    dense_.step(static_cast<float>(f_.lr));
  }
  prof_.mark(StepProfile::kSparseUpdate);
  // Sparse gradients go to the ranks that own the rows: one call, which
  // reuses the plan of this batch's lookup.
  CHECK_HB(hb_collection_apply_gradients(coll_, &b.jagged, b.grad_pooled.data(),
                                         nullptr));
}

double Trainer::loss_sum(const Batch &b) {
  double s = 0;
  for (size_t i = 0; i < b.prob.size(); ++i) {
    double p =
        std::min(std::max(static_cast<double>(b.prob[i]), 1e-7), 1 - 1e-7);
    s -= b.label[i] > 0.5f ? std::log(p) : std::log(1 - p);
  }
  return s;
}

// Exact AUC of the model on the held-out split, merged over the ranks; the
// planted model's AUC on the same samples goes to *planted_auc.
double Trainer::evaluate(double *planted_auc) {
  hb_metric_config mc = HB_METRIC_CONFIG_INIT;
  mc.kind = HB_METRIC_AUC_EXACT;
  hb_metric *model = nullptr, *planted = nullptr;
  // Parameter-server mode: the chief scores the whole split alone.
  hb_context *mctx = ps_ ? nullptr : ctx_;
  CHECK_HB(hb_metric_create(mctx, &mc, &model));
  CHECK_HB(hb_metric_create(mctx, &mc, &planted));
  score_held_out(model, planted);
  double auc = 0;
  CHECK_HB(hb_metric_result(model, &auc));
  CHECK_HB(hb_metric_result(planted, planted_auc));
  hb_metric_destroy(model);
  hb_metric_destroy(planted);
  return auc;
}

void Trainer::score_held_out(hb_metric *model, hb_metric *planted) {
  int64_t begin = 0, end = f_.eval_samples;
  if (!ps_)
    CHECK_HB(hb_shard_range(f_.eval_samples, world_, rank_, 0, &begin, &end));
  // Every rank runs the same number of (collective) lookups.
  int64_t batches = (end - begin + f_.batch - 1) / f_.batch;
  if (!ps_)
    CHECK_HB(hb_allreduce(ctx_, &batches, &batches, 1, HB_INT64, HB_MAX));
  pull_dense();
  std::vector<float> pp;
  prof_.pause(true);
  Batch &b = eval_;
  for (int64_t k = 0; k < batches; ++k) {
    int64_t lo = std::min(end, begin + k * f_.batch),
            hi = std::min(end, lo + f_.batch);
    prepare(b, /*split=*/1, lo, hi);
    CHECK_HB(hb_collection_lookup(coll_, &b.jagged, b.pooled.data(), nullptr));
    forward(b);
    pp.resize(hi - lo);
    for (int64_t i = 0; i < hi - lo; ++i) pp[i] = b.samples[i].planted_prob;
    CHECK_HB(hb_metric_update(model, b.label.data(), b.prob.data(), nullptr,
                              hi - lo));
    CHECK_HB(
        hb_metric_update(planted, b.label.data(), pp.data(), nullptr, hi - lo));
  }
  prof_.pause(false);
}

int Trainer::follow() {
  if (f_.checkpoint_dir.empty()) {
    std::fprintf(stderr,
                 "ctr_train: this process is the job's evaluator (task type "
                 "evaluator): it needs --checkpoint-dir, the directory "
                 "training writes its checkpoints to\n");
    return 2;
  }
  hb_evaluator_config ec = HB_EVALUATOR_CONFIG_INIT;
  std::string job = job_id();
  ec.dir = f_.checkpoint_dir.c_str();
  ec.job_id = job.c_str();
  ec.log_path = f_.eval_log.empty() ? nullptr : f_.eval_log.c_str();
  ec.poll_ms = 50;
  hb_evaluator *ev = nullptr;
  CHECK_HB(hb_evaluator_create(ctx_, &ec, &ev));
  // The model only: training's optimizer slots of the dense layers, its
  // data position and running metric are not needed.
  CHECK_HB(hb_evaluator_add_collection(ev, coll_));
  struct {
    const char *name;
    std::vector<float> *v;
  } dense[] = {{"dense.w1", &dense_.w1},
               {"dense.b1", &dense_.b1},
               {"dense.w2", &dense_.w2},
               {"dense.b2", &dense_.b2}};
  // A ps job saves its dense parameters as the ps tasks hold them: a table
  // "dense" of rows of up to 256 floats (hb_checkpoint_add_ps_dense).
  hb_embedding *dense_rows = nullptr;
  std::vector<int64_t> dense_ids;
  if (ps_job_) {
    dense_.pack_params(&flat_);
    hb_embedding_config dc = HB_EMBEDDING_CONFIG_INIT;
    dc.name = "dense";
    dc.dim = std::min<int64_t>(static_cast<int64_t>(flat_.size()), 256);
    dc.num_rows = (static_cast<int64_t>(flat_.size()) + dc.dim - 1) / dc.dim;
    dc.optimizer = HB_OPT_ADAGRAD;
    CHECK_HB(hb_embedding_create(ctx_, &dc, &dense_rows));
    CHECK_HB(hb_evaluator_add_table(ev, dense_rows));
    for (int64_t i = 0; i < dc.num_rows; ++i) dense_ids.push_back(i);
  } else {
    for (auto &d : dense)
      CHECK_HB(hb_evaluator_add_buffer(ev, d.name, d.v->data(),
                                       d.v->size() * sizeof(float), 0));
  }
  hb_metric_config mc = HB_METRIC_CONFIG_INIT;
  mc.kind = HB_METRIC_AUC_EXACT;
  hb_metric *auc = nullptr, *planted = nullptr;
  CHECK_HB(hb_metric_create(ctx_, &mc, &auc));
  CHECK_HB(hb_metric_create(ctx_, &mc, &planted));
  CHECK_HB(hb_evaluator_add_metric(ev, "auc", auc));
  CHECK_HB(hb_evaluator_add_metric(ev, "planted_auc", planted));
  const bool chief = rank_ == 0;
  int64_t step = -1;
  for (;;) {
    CHECK_HB(hb_evaluator_next(ev, &step));
    if (step < 0) break;
    if (dense_rows) {
      std::vector<float> rows(dense_ids.size() * hb_embedding_dim(dense_rows));
      CHECK_HB(hb_embedding_lookup(dense_rows, dense_ids.data(),
                                   dense_ids.size(), rows.data()));
      std::copy(rows.begin(), rows.begin() + flat_.size(), flat_.begin());
      dense_.unpack_params(flat_);
    }
    score_held_out(auc, planted);
    double v[2] = {0, 0};
    CHECK_HB(hb_evaluator_report(ev, v));
    if (chief)
      std::printf("evaluator: step %" PRId64
                  "  held-out exact AUC %.4f (planted model %.4f)\n",
                  step, v[0], v[1]);
    std::fflush(stdout);
  }
  hb_evaluator_stats st = HB_EVALUATOR_STATS_INIT;
  CHECK_HB(hb_evaluator_get_stats(ev, &st));
  if (chief)
    std::printf("evaluator: training finished; %" PRId64
                " checkpoint(s) evaluated, %" PRId64 " skipped\n",
                st.evaluated, st.skipped);
  hb_evaluator_destroy(ev);
  hb_embedding_destroy(dense_rows);
  hb_metric_destroy(auc);
  hb_metric_destroy(planted);
  return 0;
}

void Trainer::save_and_export(const std::string &ckpt, const std::string &exp) {
  std::vector<hb_embedding *> all = tables_;
  all.push_back(wide_);
  for (size_t t = 0; t < all.size(); ++t) {
    char name[32];
    if (t < tables_.size())
      std::snprintf(name, sizeof name, "cat_%02zu", t);
    else
      std::snprintf(name, sizeof name, "wide");
    CHECK_HB(hb_embedding_save(all[t], (ckpt + "/" + name).c_str()));
    CHECK_HB(hb_embedding_export(all[t], (exp + "/" + name + ".hbe").c_str()));
  }
}

// Parameter-server mode, as TensorFlow's: every worker trains at its own
// pace (bounded by the staleness option) on its own stream of batches --
// worker r takes batches r, r + W, r + 2W, ... of the train split -- until
// the job as a whole has seen --train-samples samples (a counter on the ps
// tasks): faster workers take more batches. The dense parameters live on
// the ps tasks (pulled before each step, gradients pushed after). At the
// end the chief waits for the others to leave, then scores the held-out
// split alone and saves the tables.
int Trainer::run_ps() {
  const bool chief = hb_context_is_chief(ctx_) != 0;
  char staleness[32] = "?";
  hb_context_get_option(ctx_, "staleness", staleness, sizeof staleness,
                        nullptr);
  if (chief)
    std::printf(
        "ctr_train: parameter-server mode, %d ps task(s), %d "
        "workers, staleness %s; %" PRId64
        " train samples in all, batch %" PRId64
        "/worker, %d tables x dim %" PRId64 " + wide, MLP %d-%d-1 (%s)\n",
        hb_context_num_ps(ctx_), world_, staleness, f_.train_samples, f_.batch,
        synth::kTables, f_.dim, dense_.in, dense_.hidden,
        dense_math::gemm_name());
  std::fflush(stdout);
  const int64_t zero = 0;
  int64_t step = 0, mine = 0, interval = 0;
  // Dynamic splits (option ps_split_samples: --splits, or set for the job):
  // the train split's samples [0, N) handed out by ps task 0 in splits, a
  // fast worker taking more, every sample exactly once.
  char opt[32] = "0";
  CHECK_HB(hb_context_get_option(ctx_, "ps_split_samples", opt, sizeof opt,
                                 nullptr));
  const bool splits = std::atoll(opt) > 0;
  hb_ps_split sp = HB_PS_SPLIT_INIT;
  int64_t at = 0;  // the next sample of split sp
  if (splits && chief)
    std::printf("ctr_train: dynamic splits of %s samples\n", opt);
  // With job checkpoints (collective: every worker saves at the same step)
  // each worker makes the same number of steps; without, workers go on
  // until the job's sample counter says the data is done. Dynamic splits
  // with job checkpoints: hb_ps_split_try never waits (a worker the queue
  // has nothing for makes an empty step), and every `sync` steps -- where
  // the saves are -- hb_data_sync says whether any worker still has work.
  const int64_t steps =
      ckpt_ && !splits
          ? std::max<int64_t>(1, f_.train_samples / (f_.batch * world_))
          : -1;
  const int64_t sync = std::max<int64_t>(1, f_.checkpoint_every);
  int64_t empty_steps = 0;
  if (ckpt_) {
    CHECK_HB(hb_checkpoint_restore_latest(ckpt_, &step));
    if (step < 0) step = 0;
    if (step > 0 && chief)
      std::printf("resumed from the checkpoint of step %" PRId64 "\n", step);
  }
  float seen = 0;
  double t0 = now_s(), t_interval = t0;
  for (;;) {
    prof_.mark(StepProfile::kSync);
    int64_t lo = 0, hi = 0;
    if (splits) {
      if (sp.split < 0 || at >= sp.end) {
        CHECK_HB(ckpt_ ? hb_ps_split_try(ctx_, &sp)
                       : hb_ps_split_next(ctx_, &sp));
        if (sp.split == -1 && !ckpt_) break;  // every split finished
        at = sp.from;
      }
      if (sp.split < 0) {  // nothing now (or, with checkpoints, any more)
        ++step, ++empty_steps;
        if (step % sync != 0) continue;
        int32_t go = 0, empty = 0;
        CHECK_HB(hb_data_sync(ctx_, sp.split != -1, 0, &go, &empty));
        if (!go) break;
        if (f_.checkpoint_every > 0) save_ps_checkpoint(step);
        continue;
      }
      // A lost holder's last batch goes again whole (hb_ps_split).
      lo = at,
      hi = at < sp.replay_end ? sp.replay_end : std::min(sp.end, at + f_.batch);
    } else {
      CHECK_HB(hb_embedding_lookup(samples_, &zero, 1, &seen));
      if (steps >= 0 ? step >= steps
                     : seen >= static_cast<float>(f_.train_samples))
        break;
      lo = (step * world_ + rank_) * f_.batch, hi = lo + f_.batch;
    }
    prof_.mark(StepProfile::kDenseAllreduce);
    pull_dense();
    Batch &b = train_[0];
    prepare(b, /*split=*/0, lo, hi);
    prof_.mark(StepProfile::kLookup);
    CHECK_HB(hb_collection_lookup(coll_, &b.jagged, b.pooled.data(), nullptr));
    forward(b);
    // The position rides with this step's pushes (dense, tables, counter).
    if (splits) {
      CHECK_HB(hb_ps_split_commit(ctx_, sp.split, hi));
      at = hi;
    }
    // The gradient of the mean loss over a global batch of W local ones.
    backward(b, f_.batch * world_);
    prof_.mark(StepProfile::kSync);
    const float minus_n = -static_cast<float>(hi - lo);
    CHECK_HB(hb_embedding_apply_gradients(samples_, &zero, 1, &minus_n));
    prof_.stop();
    ++step, mine += hi - lo, interval += hi - lo;
    if (splits && ckpt_ && step % sync == 0) {
      // This worker has work (a split, or one may come back): go on.
      int32_t go = 0, empty = 0;
      CHECK_HB(hb_data_sync(ctx_, 1, 0, &go, &empty));
      if (f_.checkpoint_every > 0) save_ps_checkpoint(step);
    } else if (ckpt_ && f_.checkpoint_every > 0 &&
               step % f_.checkpoint_every == 0 && step < steps) {
      save_ps_checkpoint(step);
    }
    if (step % f_.log_every == 0 && chief) {
      double now = now_s();
      std::printf("step %5" PRId64
                  "  samples/s (this worker) %9.0f  job "
                  "samples %.0f\n",
                  step, interval / (now - t_interval), seen);
      std::fflush(stdout);
      t_interval = now, interval = 0;
    }
  }
  if (ckpt_) {  // the last one, then followers know training is done
    save_ps_checkpoint(step);
    CHECK_HB(hb_checkpoint_finish(ckpt_));
  }
  double train_s = now_s() - t0;
  prof_.print(rank_, step);
  std::printf("worker %d: %" PRId64 " steps, %" PRId64
              " samples in %.3f s (%.0f samples/s)\n",
              rank_, step, mine, train_s, mine / train_s);
  if (empty_steps > 0)
    std::printf("worker %d: %" PRId64
                " empty steps (hb_ps_split_try had no split for it)\n",
                rank_, empty_steps);
  std::fflush(stdout);
  // Leave the tables: with staleness 0 the others' rounds no longer wait
  // for this worker.
  release_model();
  if (!chief) return 0;
  // The chief: once every other worker has left (or is lost: one that
  // failed is not waited for), the final model.
  for (int tries = 0;; ++tries) {
    hb_ps_stats st = HB_PS_STATS_INIT;
    CHECK_HB(hb_ps_get_stats(ctx_, &st));
    if (st.workers_gone >= world_ - 1) {
      if (st.workers_left < world_ - 1)
        std::printf("ctr_train: %" PRId64 " worker(s) lost, not waited for\n",
                    world_ - 1 - st.workers_left);
      break;
    }
    if (tries > 36000) {
      std::fprintf(stderr, "ctr_train: workers still training after 1 h\n");
      return 1;
    }
    struct timespec ts = {0, 100 * 1000 * 1000};
    nanosleep(&ts, nullptr);
  }
  double job_s = now_s() - t0;
  hb_ps_stats st = HB_PS_STATS_INIT;
  CHECK_HB(hb_ps_get_stats(ctx_, &st));
  create_model();
  float total = 0;
  CHECK_HB(hb_embedding_lookup(samples_, &zero, 1, &total));
  double planted = 0;
  double auc = evaluate(&planted);
  std::string ckpt = f_.out + "/checkpoint", exp = f_.out + "/export";
  mkdir(f_.out.c_str(), 0755), mkdir(ckpt.c_str(), 0755),
      mkdir(exp.c_str(), 0755);
  save_and_export(ckpt, exp);
  bool ok = auc >= planted - f_.max_gap;
  // The ps tasks' sample counter: every push adds its batch's samples,
  // once per committed position (and a job checkpoint saves it with the
  // tables), so it counts the samples applied whatever was killed and
  // restarted meanwhile. With splits every train sample once; with job
  // checkpoints every worker's fixed steps once.
  const int64_t expected = splits       ? f_.train_samples
                           : steps >= 0 ? steps * f_.batch * world_
                                        : -1;
  if (expected >= 0) {
    const bool once = total == static_cast<float>(expected);
    std::printf("exactly once: the ps applied %.0f samples of %" PRId64
                " expected: %s\n",
                total, expected, once ? "OK" : "WRONG");
    ok = ok && once;
  }
  std::printf(
      "ps: %lld pulls, %lld pushes, %lld rows pulled, %lld rows "
      "pushed, max lead %lld, ps busy %.3f s\n",
      (long long)st.pulls, (long long)st.pushes, (long long)st.rows_pulled,
      (long long)st.rows_pushed, (long long)st.max_staleness,
      st.busy_us * 1e-6);
  std::printf(
      "final: %.0f samples in %.2f s (%.0f samples/s, all workers); "
      "held-out exact AUC %.4f vs planted model %.4f (gap %.4f, "
      "allowed %.2f): %s\n",
      total, job_s, total / job_s, auc, planted, planted - auc, f_.max_gap,
      ok ? "OK" : "TOO LOW");
  std::printf("final: checkpoint in %s, serving export in %s\n", ckpt.c_str(),
              exp.c_str());
  return ok ? 0 : 1;
}

int Trainer::train() {
  const bool chief = hb_context_is_chief(ctx_) != 0;
  if (chief && files_)
    std::printf(
        "ctr_train: world %d, train samples from files '%s', batch "
        "%" PRId64 "/rank, %d tables x dim %" PRId64
        " + wide, MLP %d-%d-1 (%s)\n",
        world_, f_.data.c_str(), f_.batch, synth::kTables, f_.dim, dense_.in,
        dense_.hidden, dense_math::gemm_name());
  else if (chief)
    std::printf("ctr_train: world %d, %" PRId64
                " train samples %s (this "
                "rank: %" PRId64 "), batch %" PRId64
                "/rank, %d tables x dim %" PRId64 " + wide, MLP %d-%d-1 (%s)\n",
                world_, f_.train_samples,
                f_.files ? ("in " + std::to_string(f_.files) + " files").c_str()
                         : "split evenly",
                shard_end_ - shard_begin_, f_.batch, synth::kTables, f_.dim,
                dense_.in, dense_.hidden, dense_math::gemm_name());
  hb_metric *running_auc = running_auc_;
  int64_t step = resume(), interval_samples = 0;  // resume() sets pos_
  const int64_t start_pos = pos_;
  if (!files_ && f_.prefetch)
    prefetch_ = std::make_unique<Prefetcher>(gen_, f_.batch, shard_end_);
  const int64_t first_step = step;
  const bool tally = ckpt_ || f_.digest;
  // This rank's loss sum of each step since the last log line; summed over
  // the ranks when printed (one allreduce per log line, not per step).
  std::vector<double> interval_losses;
  double t0 = now_s(), t_interval = t0, auc = 0, planted = 0;
  double step_s = 0;
  // started: the lookup of train_[cur] was started (pipelined step) by the
  // previous step; done: every rank is out of data.
  int cur = 0;
  bool started = false, done = false;
  for (;;) {
    double t_step = now_s();
    Batch &b = train_[cur];
    if (!started) {
      if (!next_batch(b, step)) {
        prof_.stop();
        break;
      }
      prof_.mark(StepProfile::kLookup);
      CHECK_HB(
          hb_collection_lookup(coll_, &b.jagged, b.pooled.data(), nullptr));
    } else {
      // The rows of this batch, read after the last step's update.
      prof_.mark(StepProfile::kLookup);
      CHECK_HB(hb_collection_lookup_wait(coll_));
    }
    started = false;
    // The evaluation after this step looks up on its own: no lookup may be
    // pending then.
    const bool eval_next = (step + 1) % f_.eval_every == 0;
    // Nor at a checkpoint: it saves the position after this batch, and the
    // reader must not have handed out the next one yet.
    const bool save_next = ckpt_ && f_.checkpoint_every > 0 &&
                           (step + 1) % f_.checkpoint_every == 0;
    if (f_.pipeline && !eval_next && !save_next) {
      // Pipelined: the next batch's ids go to their owners now, on the
      // collection's progress thread while this batch's MLP runs (and its
      // dense allreduce, on the context's own communicator); its rows come
      // back at the top of the next step, after this batch's update.
      Batch &nb = train_[1 - cur];
      if (!next_batch(nb, step + 1)) {
        done = true;
      } else {
        prof_.mark(StepProfile::kLookupStart);
        CHECK_HB(hb_collection_lookup_start(coll_, &nb.jagged, nb.pooled.data(),
                                            nullptr));
        started = true;
      }
    }
    forward(b);
    const int64_t n = static_cast<int64_t>(b.samples.size());
    interval_losses.push_back(loss_sum(b));
    if (tally)
      for (const auto &smp : b.samples)
        local_tally_.add(ckpt::fingerprint(smp));
    prof_.mark(StepProfile::kGlobalBatch);
    int64_t global_n = global_batch(step, n);
    backward(b, global_n);
    prof_.mark(StepProfile::kMetric);
    CHECK_HB(hb_metric_update(running_auc, b.label.data(), b.prob.data(),
                              nullptr, n));
    interval_samples += global_n;
    ++step;
    if (step % f_.log_every == 0) {
      CHECK_HB(hb_allreduce(ctx_, interval_losses.data(),
                            interval_losses.data(), interval_losses.size(),
                            HB_FLOAT64, HB_SUM));
      double interval_loss = 0;
      for (double l : interval_losses) interval_loss += l;
      interval_losses.clear();
      double r = 0;
      CHECK_HB(hb_metric_result(running_auc, &r));
      CHECK_HB(hb_metric_reset(running_auc));
      double now = now_s();
      if (chief)
        std::printf("step %5" PRId64
                    "  samples/s %9.0f  loss %.4f  running AUC %.4f\n",
                    step, interval_samples / (now - t_interval),
                    interval_loss / interval_samples, r);
      std::fflush(stdout);
      t_interval = now, interval_samples = 0;
    }
    prof_.stop();
    step_s += now_s() - t_step;
    if (step % f_.eval_every == 0) {
      auc = evaluate(&planted);
      if (chief)
        std::printf("step %5" PRId64
                    "  held-out exact AUC %.4f (planted model %.4f)\n",
                    step, auc, planted);
    }
    if (resumed_ && step == first_step + 1 && chief) {
      // For bench/recovery: from a kill to training again.
      std::printf("resumed: step %" PRId64 " done at wall time %.6f\n", step,
                  ckpt::wall_s());
      std::fflush(stdout);
    }
    if (ckpt_ && f_.checkpoint_every > 0 && step % f_.checkpoint_every == 0)
      save(step);
    else
      report_commits();
    if (done) break;
    if (started) cur = 1 - cur;
  }
  double train_s = now_s() - t0;
  double prefetch_cpu = 0, prefetch_share = 0;
  if (prefetch_) {
    prefetch_cpu = prefetch_->cpu_s();
    prefetch_share = static_cast<double>(prefetch_->thread_samples()) /
                     std::max<int64_t>(1, pos_ - start_pos);
    prefetch_.reset();
  }
  // The end of training is a checkpoint too: a job started again after it
  // only evaluates and exports.
  if (ckpt_) {
    save(step);
    // Committed, and followers (an evaluator) told that training is over.
    CHECK_HB(hb_checkpoint_finish(ckpt_));
    report_commits();
  } else if (tally) {
    merge_tally();
  }
  prof_.print(rank_, step, prefetch_cpu, prefetch_share);
  if (files_) {
    // Input wait: time in hb_reader_next, against the training steps' time
    // (evaluation excluded), worst rank.
    double w[2] = {files_->wait_s(), step_s};
    CHECK_HB(hb_allreduce(ctx_, w, w, 2, HB_FLOAT64, HB_MAX));
    if (chief)
      std::printf("input: %" PRIu64
                  " lines on rank 0; steps waited %.3f s for "
                  "input out of %.3f s (%.2f%%, worst rank)\n",
                  files_->lines(), w[0], w[1], 100.0 * w[0] / w[1]);
  }
  auc = evaluate(&planted);

  // Checkpoint and serving export: one directory / file per table.
  std::string ckpt = f_.out + "/checkpoint", exp = f_.out + "/export";
  if (chief) {
    mkdir(f_.out.c_str(), 0755), mkdir(ckpt.c_str(), 0755),
        mkdir(exp.c_str(), 0755);
  }
  CHECK_HB(hb_context_barrier(ctx_, 0));
  save_and_export(ckpt, exp);
  bool ok = auc >= planted - f_.max_gap;
  if (f_.digest) print_digest(ckpt, auc);
  if (chief) {
    std::printf(
        "final: %" PRId64
        " steps in %.2f s; held-out exact AUC %.4f vs planted model %.4f "
        "(gap %.4f, allowed %.2f): %s\n",
        step, train_s, auc, planted, planted - auc, f_.max_gap,
        ok ? "OK" : "TOO LOW");
    std::printf("final: checkpoint in %s, serving export in %s\n", ckpt.c_str(),
                exp.c_str());
  }
  return ok ? 0 : 1;
}

}  // namespace

int main(int argc, char **argv) {
  blas_core::rerun_if_misdetected(argv);  // before any output or state
  Flags f = parse_flags(argc, argv);
  if (f.splits) {  // before the context: ps task 0 reads them at its start
    setenv("HB_PS_SPLIT_SAMPLES", std::to_string(f.train_samples).c_str(), 1);
    setenv("HB_PS_SPLIT_SIZE", std::to_string(8 * f.batch).c_str(), 0);
  }
  hb_context *ctx = nullptr;
  CHECK_HB(hb_context_create(nullptr, &ctx));
  if (std::strcmp(hb_context_task_type(ctx), "ps") == 0) {
    // A ps task (TF_CONFIG "ps", or hbrun --ps): it serves the workers'
    // tables and dense parameters until they are done.
    hb_status st = hb_context_serve(ctx);
    rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    std::printf("ps task %d: cpu %.3f s\n", hb_context_task_id(ctx),
                ru.ru_utime.tv_sec + ru.ru_stime.tv_sec +
                    1e-6 * (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec));
    if (st != HB_OK)
      std::fprintf(stderr, "ctr_train: ps task %d: %s: %s\n",
                   hb_context_task_id(ctx), hb_status_name(st),
                   hb_last_error());
    hb_context_destroy(ctx);
    return st == HB_OK ? 0 : 1;
  }
  int rc;
  {
    Trainer trainer(ctx, f);
    rc = trainer.run();
  }
  hb_context_destroy(ctx);
  return rc;
}
