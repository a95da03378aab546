// hb_allreduce_start / hb_allreduce_wait (hb.h EXPERIMENTAL section): the
// request wraps the outcome of the job that comm/progress.h posts.
#define HB_EXPERIMENTAL 1

#include <memory>

#include "abi/error.h"
#include "comm/progress.h"
#include "comm/validate.h"
#include "context/context.h"
#include "gpu/gpu.h"

struct hb_allreduce_request {
  std::shared_ptr<hb::comm::AsyncCall> call;
};

extern "C" hb_status hb_allreduce_start(hb_context *ctx, const void *send,
                                        void *recv, size_t count,
                                        hb_dtype dtype, hb_reduce_op op,
                                        hb_allreduce_request **out) {
  if (out) *out = nullptr;
  return hb::guard([&] {
    const char *fn = "hb_allreduce_start";
    HB_CHECK_ARG(out, "%s: out is NULL", fn);
    hb_context &c = hb::ctx_ref(ctx);
    c.check();
    hb::comm::check_buffer(fn, "send", send, count, dtype);
    hb::comm::check_buffer(fn, "recv", recv, count, dtype);
    hb::comm::check_op(fn, op);
    if ((send && hb::gpu::is_device_pointer(send)) ||
        (recv && hb::gpu::is_device_pointer(recv)))
      hb::fail(HB_ERR_UNSUPPORTED,
               "%s: CUDA buffers are not supported (hb_allreduce enqueues "
               "on the context's stream, already asynchronous)",
               fn);
    auto req = std::unique_ptr<hb_allreduce_request>(new hb_allreduce_request);
    req->call = hb::comm::allreduce_async(c, send, recv, count, dtype, op);
    *out = req.release();
  });
}

extern "C" hb_status hb_allreduce_wait(hb_allreduce_request *req) {
  return hb::guard([&] {
    HB_CHECK_ARG(req, "hb_allreduce_wait: req is NULL");
    // Kept while the job is in flight (it still uses the caller's
    // buffers); freed once it has ended, failed or not.
    std::unique_ptr<hb_allreduce_request> owned(req);
    if (!owned->call->wait()) {
      owned.release();
      hb::fail(HB_ERR_TIMEOUT,
               "hb_allreduce_wait: the allreduce did not finish in time and "
               "is still in flight (its buffers are in use): wait again");
    }
  });
}
