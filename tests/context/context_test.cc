// hb_context_* in a world of one (no network); the multi-rank behaviour is
// in mp_context.cc.
#include <gtest/gtest.h>

#include <cstddef>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "context/context.h"
#include "env_guard.h"
#include "gpu/gpu.h"
#include "hb.h"

namespace {

struct CtxDeleter {
  void operator()(hb_context *c) const { hb_context_destroy(c); }
};
using CtxPtr = std::unique_ptr<hb_context, CtxDeleter>;

CtxPtr create(const hb_context_options *opts = nullptr) {
  hb_context *ctx = nullptr;
  hb_status st = hb_context_create(opts, &ctx);
  EXPECT_EQ(st, HB_OK) << hb_last_error();
  return CtxPtr(ctx);
}

std::string option(const hb_context *ctx, const char *name) {
  char buf[128];
  EXPECT_EQ(hb_context_get_option(ctx, name, buf, sizeof buf, nullptr), HB_OK)
      << hb_last_error();
  return buf;
}

TEST(Context, WorldOfOne) {
  hb_test::EnvGuard env;
  CtxPtr ctx = create();
  ASSERT_TRUE(ctx);
  EXPECT_EQ(hb_context_rank(ctx.get()), 0);
  EXPECT_EQ(hb_context_world_size(ctx.get()), 1);
  EXPECT_EQ(hb_context_local_rank(ctx.get()), 0);
  EXPECT_EQ(hb_context_local_world_size(ctx.get()), 1);
  EXPECT_EQ(hb_context_is_chief(ctx.get()), 1);
  EXPECT_STREQ(hb_context_task_type(ctx.get()), "worker");
  EXPECT_EQ(hb_context_task_id(ctx.get()), 0);
  int gpus = hb_context_num_gpus(ctx.get());
  EXPECT_GE(gpus, 0);
  std::string device = hb_context_device(ctx.get());
  if (gpus == 0)
    EXPECT_EQ(device, "cpu:0");
  else
    EXPECT_EQ(device, "cuda:0");
  EXPECT_EQ(ctx->client, nullptr) << "a world of one needs no network";
  EXPECT_EQ(ctx->server, nullptr);
  for (int i = 0; i < 3; ++i)
    EXPECT_EQ(hb_context_barrier(ctx.get(), 0), HB_OK);
  EXPECT_EQ(hb_context_synchronize(ctx.get()), HB_OK);
}

TEST(Context, NullHandles) {
  hb_context_destroy(nullptr);
  EXPECT_EQ(hb_context_rank(nullptr), -1);
  EXPECT_EQ(hb_context_world_size(nullptr), -1);
  EXPECT_EQ(hb_context_local_rank(nullptr), -1);
  EXPECT_EQ(hb_context_local_world_size(nullptr), -1);
  EXPECT_EQ(hb_context_is_chief(nullptr), -1);
  EXPECT_EQ(hb_context_task_type(nullptr), nullptr);
  EXPECT_EQ(hb_context_task_id(nullptr), -1);
  EXPECT_EQ(hb_context_num_gpus(nullptr), -1);
  EXPECT_EQ(hb_context_device(nullptr), nullptr);
  EXPECT_EQ(hb_context_barrier(nullptr, 0), HB_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(hb_context_abort(nullptr, "x"), HB_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(hb_context_synchronize(nullptr), HB_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(hb_context_set_cuda_stream(nullptr, nullptr),
            HB_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(hb_context_add_listener(nullptr, 0, nullptr, nullptr),
            HB_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(hb_context_create(nullptr, nullptr), HB_ERR_INVALID_ARGUMENT);
}

TEST(Context, OptionsFromEnvironmentThenTheList) {
  hb_test::EnvGuard env;
  env.set("HB_TIMEOUT_MS", "1111");
  env.set("HB_GRAD_NBUCKETS", "3");
  hb_context_options o = HB_CONTEXT_OPTIONS_INIT;
  o.options = "grad_nbuckets=5, cpu_allreduce=ring";
  CtxPtr ctx = create(&o);
  EXPECT_EQ(option(ctx.get(), "timeout_ms"), "1111");
  EXPECT_EQ(option(ctx.get(), "grad_nbuckets"), "5")
      << "the list wins over HB_*";
  EXPECT_EQ(option(ctx.get(), "cpu_allreduce"), "ring");
  EXPECT_EQ(ctx->timeout_ms(), 1111);

  EXPECT_EQ(hb_context_set_option(ctx.get(), "timeout_ms", "2500"), HB_OK);
  EXPECT_EQ(option(ctx.get(), "timeout_ms"), "2500");
  EXPECT_EQ(hb_context_set_option(ctx.get(), "timeout_ms", "soon"),
            HB_ERR_CONFIG);
  EXPECT_NE(std::string(hb_last_error()).find("option timeout_ms='soon'"),
            std::string::npos);
  EXPECT_EQ(hb_context_set_option(ctx.get(), "bogus", "1"), HB_ERR_CONFIG);
  EXPECT_NE(std::string(hb_last_error()).find("'bogus'"), std::string::npos);
  EXPECT_EQ(hb_context_set_option(ctx.get(), "timeout_ms", nullptr),
            HB_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(option(ctx.get(), "timeout_ms"), "2500");
  // The process-wide value is untouched by a context's setting.
  EXPECT_EQ(option(nullptr, "timeout_ms"), "1111");
}

TEST(Context, ConfigErrorsFailCreate) {
  hb_test::EnvGuard env;
  hb_context *ctx = reinterpret_cast<hb_context *>(0x1);
  hb_context_options o = HB_CONTEXT_OPTIONS_INIT;
  o.options = "timeout_ms=never";
  EXPECT_EQ(hb_context_create(&o, &ctx), HB_ERR_CONFIG);
  EXPECT_EQ(ctx, nullptr) << "*out is cleared on failure";
  EXPECT_NE(std::string(hb_last_error()).find("option timeout_ms='never'"),
            std::string::npos);

  env.set("HB_PEER_TIMEOUT_MS", "5s");
  EXPECT_EQ(hb_context_create(nullptr, &ctx), HB_ERR_CONFIG);
  EXPECT_NE(std::string(hb_last_error()).find("HB_PEER_TIMEOUT_MS='5s'"),
            std::string::npos);
  env.unset("HB_PEER_TIMEOUT_MS");

  env.set("TF_CONFIG", "{\"cluster\": 3}");
  EXPECT_EQ(hb_context_create(nullptr, &ctx), HB_ERR_CONFIG);
  EXPECT_NE(std::string(hb_last_error()).find("\"cluster\" is a number"),
            std::string::npos)
      << hb_last_error();

  o = HB_CONTEXT_OPTIONS_INIT;
  o.struct_size = 0;
  EXPECT_EQ(hb_context_create(&o, &ctx), HB_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(hb_last_error()).find("struct_size is 0"),
            std::string::npos);
}

TEST(Context, OlderCallersStructIsReadOnlyUpToItsSize) {
  hb_test::EnvGuard env;
  hb_context_options o = HB_CONTEXT_OPTIONS_INIT;
  o.options = "timeout_ms=bad";  // past struct_size: never read
  o.struct_size = offsetof(hb_context_options, options);
  CtxPtr ctx = create(&o);
  ASSERT_TRUE(ctx);
  EXPECT_EQ(option(ctx.get(), "timeout_ms"), "300000");
}

TEST(Context, ExplicitWorldOfOneSkipsTheNetwork) {
  hb_test::EnvGuard env;
  hb_context_options o = HB_CONTEXT_OPTIONS_INIT;
  o.rank = 0;
  o.world_size = 1;
  o.rendezvous = "127.0.0.1:1";  // nothing listens there
  CtxPtr ctx = create(&o);
  ASSERT_TRUE(ctx);
  EXPECT_EQ(hb_context_barrier(ctx.get(), 100), HB_OK);
}

TEST(Context, ParameterServerKnowsItsRole) {
  hb_test::EnvGuard env;
  env.set(
      "TF_CONFIG",
      R"({"cluster":{"chief":["127.0.0.1:1"],"worker":["127.0.0.1:2"],)"
      R"("ps":["127.0.0.1:3","127.0.0.1:4"]},"task":{"type":"ps","index":1}})");
  CtxPtr ctx = create();  // must not try to reach the chief
  ASSERT_TRUE(ctx);
  EXPECT_STREQ(hb_context_task_type(ctx.get()), "ps");
  EXPECT_EQ(hb_context_task_id(ctx.get()), 1);
  EXPECT_EQ(hb_context_is_chief(ctx.get()), 0);
  EXPECT_EQ(hb_context_world_size(ctx.get()), 1);
  EXPECT_EQ(hb_context_barrier(ctx.get(), 100), HB_OK);
}

struct Calls {
  std::vector<std::string> seen;
};

void record(hb_context *ctx, int32_t event, const char *path, void *user) {
  static_cast<Calls *>(user)->seen.push_back(
      std::to_string(hb_context_rank(ctx)) + ":" + std::to_string(event) + ":" +
      (path ? path : "(null)"));
}

void record_twice(hb_context *ctx, int32_t event, const char *path,
                  void *user) {
  record(ctx, event, path, user);
  record(ctx, event, path, user);
}

TEST(Context, ListenersFireInOrderForTheirEvent) {
  hb_test::EnvGuard env;
  CtxPtr ctx = create();
  Calls a, b;
  ASSERT_EQ(
      hb_context_add_listener(ctx.get(), HB_EVENT_BEFORE_SAVE, record, &a),
      HB_OK);
  ASSERT_EQ(hb_context_add_listener(ctx.get(), HB_EVENT_AFTER_SAVE, record, &b),
            HB_OK);
  ASSERT_EQ(hb_context_add_listener(ctx.get(), HB_EVENT_BEFORE_SAVE,
                                    record_twice, &b),
            HB_OK);
  ctx->fire(HB_EVENT_BEFORE_SAVE, "/ckpt/1");
  ctx->fire(HB_EVENT_AFTER_SAVE, "/ckpt/1");
  ctx->fire(HB_EVENT_BEFORE_LOAD, "/ckpt/1");  // nobody listens
  EXPECT_EQ(a.seen, std::vector<std::string>({"0:0:/ckpt/1"}));
  EXPECT_EQ(b.seen, std::vector<std::string>(
                        {"0:0:/ckpt/1", "0:0:/ckpt/1", "0:1:/ckpt/1"}));
  EXPECT_EQ(hb_context_add_listener(ctx.get(), 9, record, &a),
            HB_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(hb_last_error()).find("unknown event 9"),
            std::string::npos);
  EXPECT_EQ(hb_context_add_listener(ctx.get(), -1, record, &a),
            HB_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(hb_context_add_listener(ctx.get(), 0, nullptr, &a),
            HB_ERR_INVALID_ARGUMENT);
}

TEST(Context, AbortFailsEveryLaterCall) {
  hb_test::EnvGuard env;
  CtxPtr ctx = create();
  ASSERT_EQ(hb_context_abort(ctx.get(), "stop the world"), HB_OK);
  EXPECT_EQ(hb_context_barrier(ctx.get(), 0), HB_ERR_ABORTED);
  EXPECT_STREQ(hb_last_error(), "aborted by rank 0: stop the world");
  EXPECT_EQ(hb_context_synchronize(ctx.get()), HB_ERR_ABORTED);
  // The first reason stays.
  EXPECT_EQ(hb_context_abort(ctx.get(), nullptr), HB_OK);
  EXPECT_EQ(hb_context_barrier(ctx.get(), 0), HB_ERR_ABORTED);
  EXPECT_STREQ(hb_last_error(), "aborted by rank 0: stop the world");
  // Accessors still work on an aborted context.
  EXPECT_EQ(hb_context_world_size(ctx.get()), 1);
}

TEST(Context, AbortFromAnotherThread) {
  hb_test::EnvGuard env;
  CtxPtr ctx = create();
  std::thread t([&] { hb_context_abort(ctx.get(), nullptr); });
  t.join();
  EXPECT_EQ(hb_context_barrier(ctx.get(), 0), HB_ERR_ABORTED);
  EXPECT_STREQ(hb_last_error(), "aborted by rank 0: (no reason given)");
}

TEST(Context, CudaStreamWithoutCuda) {
  hb_test::EnvGuard env;
  CtxPtr ctx = create();
  if (hb_context_num_gpus(ctx.get()) > 0) GTEST_SKIP() << "a GPU is present";
  std::string why;
  if (hb::gpu::plugin(&why)) GTEST_SKIP() << "the CUDA plugin loaded";
  EXPECT_EQ(hb_context_set_cuda_stream(ctx.get(), nullptr), HB_ERR_UNSUPPORTED);
  EXPECT_NE(std::string(hb_last_error()).find("CUDA is not available: " + why),
            std::string::npos)
      << hb_last_error();
  EXPECT_EQ(hb_context_synchronize(ctx.get()), HB_OK);
}

TEST(Context, CudaStreamWithAGpu) {
  hb_test::EnvGuard env;
  CtxPtr ctx = create();
  if (hb_context_num_gpus(ctx.get()) == 0) GTEST_SKIP() << "no GPU";
  EXPECT_STREQ(hb_context_device(ctx.get()), "cuda:0");
  EXPECT_EQ(hb_context_set_cuda_stream(ctx.get(), nullptr), HB_OK)
      << hb_last_error();
  EXPECT_EQ(hb_context_synchronize(ctx.get()), HB_OK) << hb_last_error();
}

TEST(Context, ManyContextsInOneProcess) {
  hb_test::EnvGuard env;
  CtxPtr a = create();
  CtxPtr b = create();
  EXPECT_NE(a->scope, b->scope);
  hb_context_set_option(a.get(), "timeout_ms", "5");
  EXPECT_EQ(option(b.get(), "timeout_ms"), "300000");
}

}  // namespace
