// The timeline (src/timeline): file names, events recorded from the
// collectives, data sync, metric merge and embedding exchange of a context,
// a file that is valid JSON after every append, and nothing when off.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "embedding/temp_dirs.h"
#include "hb.h"
#include "timeline/timeline.h"
#include "timeline/trace_reader.h"

namespace {

using hb_test::read_trace;
using hb_test::Trace;

// A world of one with the given option list.
hb_context *make_context(const std::string &options) {
  hb_context_options o = HB_CONTEXT_OPTIONS_INIT;
  o.rank = 0;
  o.world_size = 1;
  o.options = options.c_str();
  hb_context *ctx = nullptr;
  EXPECT_EQ(hb_context_create(&o, &ctx), HB_OK) << hb_last_error();
  return ctx;
}

// One of each thing the timeline records.
void run_step(hb_context *ctx) {
  float x[4] = {1, 2, 3, 4}, y[4];
  ASSERT_EQ(hb_allreduce(ctx, x, y, 4, HB_FLOAT32, HB_SUM), HB_OK);
  int64_t counts[1] = {4};
  ASSERT_EQ(
      hb_alltoallv(ctx, x, counts, nullptr, y, counts, nullptr, HB_FLOAT32),
      HB_OK);
  int32_t cont = 0;
  ASSERT_EQ(hb_data_sync(ctx, 1, 0, &cont, nullptr), HB_OK);
  hb_embedding_config c = HB_EMBEDDING_CONFIG_INIT;
  c.name = "t";
  c.dim = 2;
  c.num_rows = 10;
  hb_embedding *e = nullptr;
  ASSERT_EQ(hb_embedding_create(ctx, &c, &e), HB_OK) << hb_last_error();
  int64_t ids[3] = {1, 5, 1};
  float rows[6];
  ASSERT_EQ(hb_embedding_lookup(e, ids, 3, rows), HB_OK) << hb_last_error();
  hb_embedding_destroy(e);
}

TEST(Timeline, FileForRank) {
  EXPECT_EQ(hb::timeline::file_for_rank("/tmp/trace.json", 3),
            "/tmp/trace.3.json");
  EXPECT_EQ(hb::timeline::file_for_rank("/tmp/trace", 0), "/tmp/trace.0.json");
  EXPECT_EQ(hb::timeline::file_for_rank(".json", 1), ".json.1.json");
}

TEST(Timeline, OffByDefaultRecordsNothing) {
  hb_context *off = make_context("");
  ASSERT_NE(off, nullptr);
  EXPECT_FALSE(hb::timeline::enabled());
  run_step(off);
  EXPECT_FALSE(hb::timeline::enabled());
  // Spans that ran while off left nothing behind for a later recording.
  std::string dir = hbtest::temp_dir("hb_timeline", "off");
  hb_context *on = make_context("timeline=" + dir + "/t.json");
  ASSERT_NE(on, nullptr);
  hb::timeline::flush();
  Trace t = read_trace(dir + "/t.0.json");
  ASSERT_TRUE(t.valid) << t.error;
  EXPECT_EQ(t.events.size(), 0u);
  hb_context_destroy(on);
  hb_context_destroy(off);
}

TEST(Timeline, RecordsEveryLayer) {
  std::string dir = hbtest::temp_dir("hb_timeline", "on");
  hb_context *ctx = make_context("timeline=" + dir + "/trace.json");
  ASSERT_NE(ctx, nullptr);
  EXPECT_TRUE(hb::timeline::enabled());
  run_step(ctx);
  hb_context_destroy(ctx);
  EXPECT_FALSE(hb::timeline::enabled());

  Trace t = read_trace(dir + "/trace.0.json");
  ASSERT_TRUE(t.valid) << t.error;
  EXPECT_EQ(t.process_name, "rank 0");
  for (const char *name : {"allreduce", "alltoallv", "alltoall", "data_sync"})
    EXPECT_GE(t.count(name), 1u) << name;
  const hb_test::TraceEvent *ar = t.find("allreduce");
  ASSERT_NE(ar, nullptr);
  EXPECT_EQ(ar->category, "comm");
  EXPECT_EQ(ar->pid, 0);
  EXPECT_GE(ar->dur, 0.0);
  // The first allreduce is hb_allreduce's 4 floats (data_sync's is later).
  EXPECT_EQ(ar->bytes, 16);
  EXPECT_EQ(t.find("data_sync")->category, "data");
  // The table's exchange (plan counts, then ids) shows as collectives.
  EXPECT_GE(t.count("alltoallv"), 2u);
}

TEST(Timeline, ValidAfterEveryAppendAndFromThreads) {
  std::string dir = hbtest::temp_dir("hb_timeline", "flush");
  hb_context *ctx = make_context("timeline=" + dir + "/t");
  ASSERT_NE(ctx, nullptr);
  const std::string file = dir + "/t.0.json";
  {
    Trace t = read_trace(file);  // header only, already complete
    ASSERT_TRUE(t.valid) << t.error;
    EXPECT_EQ(t.events.size(), 0u);
  }
  // More spans than the buffer holds: appended while recording.
  const int kThreads = 4, kSpans = 5000;
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i)
    threads.emplace_back([] {
      for (int k = 0; k < kSpans; ++k) {
        hb::timeline::Span s("work", "test", k);
        s.arg("k", k);
      }
    });
  for (std::thread &th : threads) th.join();
  {
    Trace t = read_trace(file);
    ASSERT_TRUE(t.valid) << t.error;
    EXPECT_GE(t.events.size(), 8192u);  // at least one full buffer
    EXPECT_LT(t.events.size(), size_t{kThreads * kSpans});
  }
  hb::timeline::flush();
  {
    Trace t = read_trace(file);
    ASSERT_TRUE(t.valid) << t.error;
    EXPECT_EQ(t.count("work"), size_t{kThreads * kSpans});
    std::vector<int> tids;
    for (const auto &e : t.events)
      if (std::find(tids.begin(), tids.end(), e.tid) == tids.end())
        tids.push_back(e.tid);
    EXPECT_EQ(tids.size(), size_t{kThreads});
  }
  hb_context_destroy(ctx);
}

TEST(Timeline, ContextsShareOneRecording) {
  std::string dir = hbtest::temp_dir("hb_timeline", "share");
  hb_context *a = make_context("timeline=" + dir + "/a.json");
  hb_context *b = make_context("timeline=" + dir + "/b.json");
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  float x = 1;
  ASSERT_EQ(hb_allreduce(b, &x, &x, 1, HB_FLOAT32, HB_SUM), HB_OK);
  hb_context_destroy(a);
  EXPECT_TRUE(hb::timeline::enabled());  // b still holds it
  ASSERT_EQ(hb_allreduce(b, &x, &x, 1, HB_FLOAT32, HB_SUM), HB_OK);
  hb_context_destroy(b);
  EXPECT_FALSE(hb::timeline::enabled());
  EXPECT_FALSE(std::filesystem::exists(dir + "/b.0.json"));
  Trace t = read_trace(dir + "/a.0.json");
  ASSERT_TRUE(t.valid) << t.error;
  EXPECT_EQ(t.count("allreduce"), 2u);
}

TEST(Timeline, ExitWithoutDestroyStillWritesTheBuffer) {
  std::string dir = hbtest::temp_dir("hb_timeline", "exit");
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // Held by a global, so LeakSanitizer does not count it at exit.
    static hb_context *ctx;
    ctx = make_context("timeline=" + dir + "/t.json");
    float x = 1;
    if (!ctx || hb_allreduce(ctx, &x, &x, 1, HB_FLOAT32, HB_SUM) != HB_OK)
      _exit(2);
    std::exit(0);  // no hb_context_destroy
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  Trace t = read_trace(dir + "/t.0.json");
  ASSERT_TRUE(t.valid) << t.error;
  EXPECT_EQ(t.count("allreduce"), 1u);
}

TEST(Timeline, UnwritablePathFailsContextCreation) {
  hb_context_options o = HB_CONTEXT_OPTIONS_INIT;
  o.rank = 0;
  o.world_size = 1;
  o.options = "timeline=/nonexistent_dir_hb/trace.json";
  hb_context *ctx = nullptr;
  EXPECT_EQ(hb_context_create(&o, &ctx), HB_ERR_IO);
  EXPECT_EQ(ctx, nullptr);
  EXPECT_NE(
      std::string(hb_last_error()).find("/nonexistent_dir_hb/trace.0.json"),
      std::string::npos)
      << hb_last_error();
  EXPECT_FALSE(hb::timeline::enabled());
}

}  // namespace
