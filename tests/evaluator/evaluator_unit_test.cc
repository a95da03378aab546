// The evaluator in one process (hb_evaluator_*, docs/evaluator.md): a
// training context saves job checkpoints, a second context follows them
// restoring a subset (one table and one replicated buffer of what training
// registered), in step order, each once, until hb_checkpoint_finish.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "embedding/temp_dirs.h"
#include "hb.h"

namespace {

std::string temp(const char *tag) {
  return hbtest::temp_dir("hb_evaluator", tag);
}

struct Ctx {
  hb_context *ctx = nullptr;
  Ctx() { EXPECT_EQ(hb_context_create(nullptr, &ctx), HB_OK); }
  ~Ctx() { hb_context_destroy(ctx); }
};

hb_embedding *make_table(hb_context *ctx) {
  hb_embedding_config c = HB_EMBEDDING_CONFIG_INIT;
  c.name = "t";
  c.dim = 4;
  c.num_rows = 0;
  c.optimizer = HB_OPT_ADAGRAD;
  c.initializer = HB_INIT_UNIFORM;
  c.init_a = -0.1;
  c.init_b = 0.1;
  hb_embedding *e = nullptr;
  EXPECT_EQ(hb_embedding_create(ctx, &c, &e), HB_OK) << hb_last_error();
  return e;
}

std::vector<float> rows(hb_embedding *e) {
  std::vector<int64_t> ids = {0, 1, 2, 3, 4, 5, 6, 101, 102, 103};
  std::vector<float> out(ids.size() * 4);
  EXPECT_EQ(hb_embedding_lookup(e, ids.data(), ids.size(), out.data()), HB_OK);
  return out;
}

// Training: a table, a replicated buffer, a per-rank buffer and a metric.
struct Trainer {
  Ctx x;
  hb_embedding *emb = make_table(x.ctx);
  std::vector<float> w = std::vector<float>(8);
  int64_t mine = 0;
  hb_metric *running = nullptr;
  hb_checkpoint *c = nullptr;
  explicit Trainer(const std::string &dir, const char *job = "job-a") {
    hb_metric_config mc = HB_METRIC_CONFIG_INIT;
    EXPECT_EQ(hb_metric_create(x.ctx, &mc, &running), HB_OK);
    hb_checkpoint_config cfg = HB_CHECKPOINT_CONFIG_INIT;
    cfg.dir = dir.c_str();
    cfg.job_id = job;
    cfg.keep = 100;
    EXPECT_EQ(hb_checkpoint_create(x.ctx, &cfg, &c), HB_OK) << hb_last_error();
    EXPECT_EQ(hb_checkpoint_add_table(c, emb), HB_OK);
    EXPECT_EQ(hb_checkpoint_add_buffer(c, "w", w.data(), w.size() * 4, 0),
              HB_OK);
    EXPECT_EQ(hb_checkpoint_add_buffer(c, "mine", &mine, sizeof mine,
                                       HB_BUFFER_PER_RANK),
              HB_OK);
    EXPECT_EQ(hb_checkpoint_add_metric(c, "running", running), HB_OK);
  }
  ~Trainer() {
    hb_checkpoint_destroy(c);
    hb_metric_destroy(running);
    hb_embedding_destroy(emb);
  }
  // One step, then a checkpoint of it; what the evaluator should see.
  std::vector<float> step_and_save(int64_t step) {
    std::vector<int64_t> ids = {step % 7, 100 + step % 4};
    std::vector<float> g(ids.size() * 4, 0.05f * (step + 1));
    EXPECT_EQ(
        hb_embedding_apply_gradients(emb, ids.data(), ids.size(), g.data()),
        HB_OK);
    for (size_t i = 0; i < w.size(); ++i) w[i] = float(step * 10 + i);
    ++mine;
    EXPECT_EQ(hb_checkpoint_save(c, step), HB_OK) << hb_last_error();
    return rows(emb);
  }
};

// The evaluator: the table and "w" only; a metric fed w[0] as prediction.
struct Evaluator {
  Ctx x;
  hb_embedding *emb = make_table(x.ctx);
  std::vector<float> w = std::vector<float>(8);
  hb_metric *mean = nullptr;
  hb_evaluator *ev = nullptr;
  hb_status created;
  Evaluator(const std::string &dir, const std::string &log,
            const char *job = "job-a", int64_t timeout_ms = 400) {
    hb_metric_config mc = HB_METRIC_CONFIG_INIT;
    mc.kind = HB_METRIC_MEAN;
    EXPECT_EQ(hb_metric_create(x.ctx, &mc, &mean), HB_OK);
    hb_evaluator_config cfg = HB_EVALUATOR_CONFIG_INIT;
    cfg.dir = dir.c_str();
    cfg.job_id = job;
    cfg.log_path = log.empty() ? nullptr : log.c_str();
    cfg.poll_ms = 20;
    cfg.timeout_ms = timeout_ms;
    created = hb_evaluator_create(x.ctx, &cfg, &ev);
    if (created != HB_OK) return;
    EXPECT_EQ(hb_evaluator_add_table(ev, emb), HB_OK);
    EXPECT_EQ(hb_evaluator_add_buffer(ev, "w", w.data(), w.size() * 4, 0),
              HB_OK);
    EXPECT_EQ(hb_evaluator_add_metric(ev, "mean_w0", mean), HB_OK);
  }
  ~Evaluator() {
    hb_evaluator_destroy(ev);
    hb_metric_destroy(mean);
    hb_embedding_destroy(emb);
  }
  // next + score + report: the step (-1 at the end) and the metric value.
  int64_t one(double *value = nullptr) {
    int64_t step = -2;
    hb_status st = hb_evaluator_next(ev, &step);
    EXPECT_EQ(st, HB_OK) << hb_last_error();
    if (st != HB_OK || step < 0) return step;
    float l = 0, p = w[0] / 1000.0f;
    EXPECT_EQ(hb_metric_update(mean, &l, &p, nullptr, 1), HB_OK);
    double v = -1;
    EXPECT_EQ(hb_evaluator_report(ev, &v), HB_OK) << hb_last_error();
    if (value) *value = v;
    return step;
  }
  hb_evaluator_stats stats() {
    hb_evaluator_stats s = HB_EVALUATOR_STATS_INIT;
    EXPECT_EQ(hb_evaluator_get_stats(ev, &s), HB_OK);
    return s;
  }
};

std::vector<std::string> lines_of(const std::string &path) {
  std::ifstream in(path);
  std::vector<std::string> out;
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

TEST(Evaluator, FollowsEveryCheckpointOnceInStepOrderUntilTheJobFinishes) {
  std::string dir = temp("follow"), log = temp("follow_log") + "/eval.jsonl";
  Trainer t(dir);
  Evaluator e(dir, log);
  ASSERT_EQ(e.created, HB_OK) << hb_last_error();
  std::vector<std::vector<float>> want;
  want.push_back(t.step_and_save(3));
  double v = 0;
  ASSERT_EQ(e.one(&v), 3);
  EXPECT_EQ(rows(e.emb), want[0]);
  EXPECT_EQ(e.w[0], 30.0f);
  EXPECT_DOUBLE_EQ(v, double(30.0f / 1000.0f));
  // Two saves before the evaluator looks again: the older one first.
  want.push_back(t.step_and_save(5));
  want.push_back(t.step_and_save(9));
  ASSERT_EQ(e.one(), 5);
  EXPECT_EQ(rows(e.emb), want[1]);
  EXPECT_EQ(e.w[0], 50.0f);
  ASSERT_EQ(e.one(), 9);
  EXPECT_EQ(rows(e.emb), want[2]);
  // Nothing newer and training not finished: a bounded wait.
  int64_t step = 0;
  EXPECT_EQ(hb_evaluator_next(e.ev, &step), HB_ERR_TIMEOUT);
  EXPECT_NE(std::string(hb_last_error()).find("no checkpoint after step 9"),
            std::string::npos)
      << hb_last_error();
  EXPECT_EQ(step, -1);
  // Training ends with one more checkpoint: it is evaluated, then the end.
  want.push_back(t.step_and_save(12));
  ASSERT_EQ(hb_checkpoint_finish(t.c), HB_OK) << hb_last_error();
  ASSERT_EQ(e.one(), 12);
  EXPECT_EQ(rows(e.emb), want[3]);
  EXPECT_EQ(e.one(), -1);
  EXPECT_EQ(e.one(), -1);  // and stays ended
  hb_evaluator_stats s = e.stats();
  EXPECT_EQ(s.evaluated, 4);
  EXPECT_EQ(s.reported, 4);
  EXPECT_EQ(s.skipped, 0);
  EXPECT_EQ(s.last_step, 12);
  EXPECT_EQ(s.finished, 1);
  auto lines = lines_of(log);
  ASSERT_EQ(lines.size(), 4u);
  const char *steps[] = {"3", "5", "9", "12"};
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(
        lines[i].rfind(std::string("{\"step\":") + steps[i] + ",\"time\":", 0),
        0u)
        << lines[i];
    EXPECT_NE(lines[i].find(",\"mean_w0\":"), std::string::npos);
    EXPECT_EQ(lines[i].back(), '}');
  }
  EXPECT_NE(lines[0].find("\"mean_w0\":0.029999999"), std::string::npos)
      << lines[0];
}

TEST(Evaluator, ARestartedEvaluatorGoesOnAfterItsLog) {
  std::string dir = temp("restarted"),
              log = temp("restarted_log") + "/eval.jsonl";
  Trainer t(dir);
  t.step_and_save(1);
  t.step_and_save(2);
  {
    Evaluator e(dir, log);
    ASSERT_EQ(e.one(), 1);
  }
  t.step_and_save(3);
  ASSERT_EQ(hb_checkpoint_finish(t.c), HB_OK);
  Evaluator e(dir, log);
  EXPECT_EQ(e.stats().last_step, 1);
  EXPECT_EQ(e.one(), 2);
  EXPECT_EQ(e.one(), 3);
  EXPECT_EQ(e.one(), -1);
  auto lines = lines_of(log);
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[1].rfind("{\"step\":2,", 0), 0u);
}

TEST(Evaluator, TrainingAgainClearsTheFinishMark) {
  std::string dir = temp("again");
  {
    Trainer t(dir);
    t.step_and_save(1);
    ASSERT_EQ(hb_checkpoint_finish(t.c), HB_OK);
  }
  EXPECT_TRUE(std::filesystem::exists(dir + "/FINISHED"));
  Trainer t(dir);  // the job trains again: followers must wait for it
  EXPECT_FALSE(std::filesystem::exists(dir + "/FINISHED"));
  Evaluator e(dir, "");
  EXPECT_EQ(e.one(), 1);
  int64_t step = 0;
  EXPECT_EQ(hb_evaluator_next(e.ev, &step), HB_ERR_TIMEOUT);
  t.step_and_save(2);
  ASSERT_EQ(hb_checkpoint_finish(t.c), HB_OK);
  EXPECT_EQ(e.one(), 2);
  EXPECT_EQ(e.one(), -1);
}

TEST(Evaluator, ADamagedCheckpointIsSkippedAndCounted) {
  std::string dir = temp("damaged");
  Trainer t(dir);
  t.step_and_save(1);
  auto want = t.step_and_save(2);
  ASSERT_EQ(hb_checkpoint_finish(t.c), HB_OK);
  // Step 1's copy of "w" is gone (as if `keep` removed it mid-load).
  std::string first;
  for (auto &d : std::filesystem::directory_iterator(dir))
    if (d.path().filename().string().rfind("ckpt-000000000001-", 0) == 0)
      first = d.path().string();
  ASSERT_FALSE(first.empty());
  ASSERT_EQ(std::remove((first + "/buffers/w").c_str()), 0);
  Evaluator e(dir, "");
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(e.one(), 2);
  std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("skipping the checkpoint of step 1"), std::string::npos)
      << err;
  EXPECT_EQ(rows(e.emb), want);
  EXPECT_EQ(e.stats().skipped, 1);
  EXPECT_EQ(e.stats().evaluated, 1);
  EXPECT_EQ(e.one(), -1);
}

TEST(Evaluator, WaitsForADirectoryThatDoesNotExistYet) {
  std::string dir = temp("later") + "/not-yet";
  Evaluator e(dir, "", "job-a", 300);
  ASSERT_EQ(e.created, HB_OK) << hb_last_error();
  int64_t step = 0;
  EXPECT_EQ(hb_evaluator_next(e.ev, &step), HB_ERR_TIMEOUT);
  EXPECT_NE(std::string(hb_last_error()).find(dir), std::string::npos);
  Trainer t(dir);
  t.step_and_save(4);
  EXPECT_EQ(e.one(), 4);
}

TEST(Evaluator, BadInputIsAClearError) {
  std::string dir = temp("bad");
  Trainer t(dir);
  t.step_and_save(1);
  {  // another job's directory, at create
    Evaluator e(dir, "", "job-b");
    EXPECT_EQ(e.created, HB_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(hb_last_error())
                  .find("holds the checkpoints of "
                        "job 'job-a'"),
              std::string::npos)
        << hb_last_error();
  }
  {  // no directory at all
    Ctx x;
    hb_evaluator *ev = nullptr;
    EXPECT_EQ(hb_evaluator_create(x.ctx, nullptr, &ev),
              HB_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(hb_last_error()).find("no checkpoint directory"),
              std::string::npos);
    EXPECT_EQ(ev, nullptr);
  }
  Evaluator e(dir, "");
  int64_t step = 0;
  // Reporting before anything is restored.
  EXPECT_EQ(hb_evaluator_report(e.ev, nullptr), HB_ERR_INVALID_ARGUMENT);
  // Names and flags.
  EXPECT_EQ(hb_evaluator_add_metric(e.ev, "step", e.mean),
            HB_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(hb_evaluator_add_metric(e.ev, "bad name", e.mean),
            HB_ERR_INVALID_ARGUMENT);
  int64_t mine = 0;
  EXPECT_EQ(hb_evaluator_add_buffer(e.ev, "mine", &mine, sizeof mine,
                                    HB_BUFFER_PER_RANK),
            HB_ERR_INVALID_ARGUMENT);
  // Something training never saved (or saved with another size).
  std::vector<float> wrong(3);
  ASSERT_EQ(hb_evaluator_add_buffer(e.ev, "w2", wrong.data(), 12, 0), HB_OK);
  EXPECT_EQ(hb_evaluator_next(e.ev, &step), HB_ERR_INVALID_ARGUMENT);
  std::string msg = hb_last_error();
  EXPECT_NE(msg.find("lacks 'buffer w2 replicated 12'"), std::string::npos)
      << msg;
  Evaluator f(dir, "");
  std::vector<float> small(2);
  hb_evaluator_destroy(f.ev);
  f.ev = nullptr;
  hb_evaluator_config cfg = HB_EVALUATOR_CONFIG_INIT;
  cfg.dir = dir.c_str();
  cfg.job_id = "job-a";
  ASSERT_EQ(hb_evaluator_create(f.x.ctx, &cfg, &f.ev), HB_OK);
  ASSERT_EQ(hb_evaluator_add_buffer(f.ev, "w", small.data(), 8, 0), HB_OK);
  EXPECT_EQ(hb_evaluator_next(f.ev, &step), HB_ERR_INVALID_ARGUMENT);
  msg = hb_last_error();
  EXPECT_NE(msg.find("it holds 'buffer w replicated 32'"), std::string::npos)
      << msg;
  EXPECT_EQ(hb_evaluator_next(nullptr, &step), HB_ERR_INVALID_ARGUMENT);
}

}  // namespace
