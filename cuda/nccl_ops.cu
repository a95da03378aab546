// NCCL for the core: nonblocking communicators (so every wait is a poll the
// core can bound) and the mapping of hb collectives onto NCCL calls.
#include <cstring>
#include <vector>

#include "plugin_entries.h"
#include "plugin_util.h"

namespace hb_cuda {
namespace {

bool nccl_dtype(int32_t dtype, ncclDataType_t *out) {
  switch (dtype) {
    case HB_FLOAT32:
      *out = ncclFloat32;
      return true;
    case HB_FLOAT64:
      *out = ncclFloat64;
      return true;
    case HB_FLOAT16:
      *out = ncclFloat16;
      return true;
    case HB_BFLOAT16:
      *out = ncclBfloat16;
      return true;
    case HB_INT32:
      *out = ncclInt32;
      return true;
    case HB_INT64:
      *out = ncclInt64;
      return true;
    case HB_UINT8:
      *out = ncclUint8;
      return true;
  }
  return false;
}

bool is_float(int32_t dtype) {
  return dtype == HB_FLOAT32 || dtype == HB_FLOAT64 || dtype == HB_FLOAT16 ||
         dtype == HB_BFLOAT16;
}

bool nccl_op(int32_t op, int32_t dtype, ncclRedOp_t *out) {
  switch (op) {
    case HB_SUM:
      *out = ncclSum;
      return true;
    case HB_PROD:
      *out = ncclProd;
      return true;
    case HB_MIN:
      *out = ncclMin;
      return true;
    case HB_MAX:
      *out = ncclMax;
      return true;
    case HB_AVG:
      *out = ncclAvg;
      return is_float(dtype);  // integers: the core sums, then divide_async
  }
  return false;
}

const char *kind_name(int32_t kind) {
  switch (kind) {
    case HB_CUDA_ALLREDUCE:
      return "allreduce";
    case HB_CUDA_ALLGATHER:
      return "allgather";
    case HB_CUDA_ALLGATHERV:
      return "allgatherv";
    case HB_CUDA_ALLTOALL:
      return "alltoall";
    case HB_CUDA_ALLTOALLV:
      return "alltoallv";
    case HB_CUDA_BROADCAST:
      return "broadcast";
    case HB_CUDA_REDUCE_SCATTER:
      return "reduce_scatter";
  }
  return "unknown collective";
}

// Offsets of per-peer blocks: given, or packed in rank order.
std::vector<int64_t> offsets_or_packed(const int64_t *offsets,
                                       const int64_t *counts, int n) {
  std::vector<int64_t> out(n);
  int64_t at = 0;
  for (int p = 0; p < n; ++p) {
    out[p] = offsets ? offsets[p] : at;
    at += counts[p];
  }
  return out;
}

// Grouped point-to-point exchange: to peer p, send_counts[p] elements from
// send + send_off[p]; from peer p, recv_counts[p] into recv + recv_off[p].
// Serves allgatherv (one send block for all), alltoall and alltoallv.
ncclResult_t exchange(const hb_cuda_collective *c, ncclDataType_t dt,
                      size_t esize, const int64_t *send_counts,
                      const std::vector<int64_t> &send_off,
                      const int64_t *recv_counts,
                      const std::vector<int64_t> &recv_off, ncclComm_t comm,
                      cudaStream_t s) {
  const char *send = static_cast<const char *>(c->send);
  char *recv = static_cast<char *>(c->recv);
  ncclResult_t r = ncclGroupStart();
  if (r != ncclSuccess) return r;
  for (int p = 0; p < c->nranks && r == ncclSuccess; ++p) {
    if (send_counts[p] > 0)
      r = ncclSend(send + send_off[p] * esize,
                   static_cast<size_t>(send_counts[p]), dt, p, comm, s);
    if (r == ncclSuccess && recv_counts[p] > 0)
      r = ncclRecv(recv + recv_off[p] * esize,
                   static_cast<size_t>(recv_counts[p]), dt, p, comm, s);
  }
  ncclResult_t end = ncclGroupEnd();  // always close the group
  return r != ncclSuccess ? r : end;
}

ncclResult_t enqueue(const hb_cuda_collective *c, ncclDataType_t dt,
                     ncclRedOp_t op, size_t esize, ncclComm_t comm,
                     cudaStream_t s) {
  int n = c->nranks;
  switch (c->kind) {
    case HB_CUDA_ALLREDUCE:
      return ncclAllReduce(c->send, c->recv, c->count, dt, op, comm, s);
    case HB_CUDA_ALLGATHER:
      return ncclAllGather(c->send, c->recv, c->count, dt, comm, s);
    case HB_CUDA_BROADCAST:
      return ncclBroadcast(c->send ? c->send : c->recv, c->recv, c->count, dt,
                           c->root, comm, s);
    case HB_CUDA_REDUCE_SCATTER:
      return ncclReduceScatter(c->send, c->recv, c->count, dt, op, comm, s);
    case HB_CUDA_ALLGATHERV: {
      std::vector<int64_t> one(n, static_cast<int64_t>(c->count)), zero(n, 0);
      return exchange(c, dt, esize, one.data(), zero, c->recv_counts,
                      offsets_or_packed(c->recv_offsets, c->recv_counts, n),
                      comm, s);
    }
    case HB_CUDA_ALLTOALL: {
      std::vector<int64_t> counts(n, static_cast<int64_t>(c->count));
      std::vector<int64_t> off = offsets_or_packed(nullptr, counts.data(), n);
      return exchange(c, dt, esize, counts.data(), off, counts.data(), off,
                      comm, s);
    }
    case HB_CUDA_ALLTOALLV:
      return exchange(
          c, dt, esize, c->send_counts,
          offsets_or_packed(c->send_offsets, c->send_counts, n), c->recv_counts,
          offsets_or_packed(c->recv_offsets, c->recv_counts, n), comm, s);
  }
  return ncclInvalidArgument;
}

}  // namespace

int32_t nccl_get_unique_id(uint8_t id[HB_CUDA_NCCL_ID_BYTES], char *errbuf,
                           size_t errcap) {
  static_assert(sizeof(ncclUniqueId) == HB_CUDA_NCCL_ID_BYTES,
                "NCCL unique id size changed");
  ncclUniqueId uid;
  int32_t st =
      nccl_status(ncclGetUniqueId(&uid), "ncclGetUniqueId", errbuf, errcap);
  if (st == HB_OK) std::memcpy(id, &uid, sizeof uid);
  return st;
}

int32_t nccl_comm_init(void **comm, int32_t nranks, int32_t rank,
                       const uint8_t id[HB_CUDA_NCCL_ID_BYTES], char *errbuf,
                       size_t errcap) {
  *comm = nullptr;
  HB_CUDA_CHECK_ARG(nranks > 0 && rank >= 0 && rank < nranks,
                    "nccl_comm_init: rank %d of %d is out of range", rank,
                    nranks);
  ncclUniqueId uid;
  std::memcpy(&uid, id, sizeof uid);
  ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
  cfg.blocking = 0;  // returns ncclInProgress; the core polls with a deadline
  ncclComm_t c = nullptr;
  ncclResult_t r = ncclCommInitRankConfig(&c, nranks, uid, rank, &cfg);
  if (r != ncclSuccess && r != ncclInProgress) {
    if (c) ncclCommAbort(c);
    return nccl_status(r, "ncclCommInitRankConfig", errbuf, errcap);
  }
  *comm = c;
  return HB_OK;
}

int32_t nccl_comm_poll(void *comm, int32_t *in_progress, char *errbuf,
                       size_t errcap) {
  *in_progress = 0;
  ncclResult_t state = ncclSuccess;
  ncclResult_t r = ncclCommGetAsyncError(static_cast<ncclComm_t>(comm), &state);
  if (r != ncclSuccess)
    return nccl_status(r, "ncclCommGetAsyncError", errbuf, errcap);
  if (state == ncclInProgress) {
    *in_progress = 1;
    return HB_OK;
  }
  return nccl_status(state, "NCCL asynchronous error", errbuf, errcap);
}

int32_t nccl_comm_abort(void *comm, char *errbuf, size_t errcap) {
  return nccl_status(ncclCommAbort(static_cast<ncclComm_t>(comm)),
                     "ncclCommAbort", errbuf, errcap);
}

int32_t nccl_comm_finalize(void *comm, char *errbuf, size_t errcap) {
  return nccl_status(ncclCommFinalize(static_cast<ncclComm_t>(comm)),
                     "ncclCommFinalize", errbuf, errcap);
}

int32_t nccl_comm_destroy(void *comm, char *errbuf, size_t errcap) {
  return nccl_status(ncclCommDestroy(static_cast<ncclComm_t>(comm)),
                     "ncclCommDestroy", errbuf, errcap);
}

int32_t nccl_collective(void *comm, void *stream,
                        const hb_cuda_collective *call, int32_t *in_progress,
                        char *errbuf, size_t errcap) {
  *in_progress = 0;
  ncclDataType_t dt;
  ncclRedOp_t op = ncclSum;
  HB_CUDA_CHECK_ARG(nccl_dtype(call->dtype, &dt),
                    "%s: dtype %d is not supported by NCCL",
                    kind_name(call->kind), call->dtype);
  bool reduces =
      call->kind == HB_CUDA_ALLREDUCE || call->kind == HB_CUDA_REDUCE_SCATTER;
  HB_CUDA_CHECK_ARG(!reduces || nccl_op(call->op, call->dtype, &op),
                    "%s: reduce op %d on dtype %d has no NCCL equivalent",
                    kind_name(call->kind), call->op, call->dtype);
  bool per_peer =
      call->kind == HB_CUDA_ALLGATHERV || call->kind == HB_CUDA_ALLTOALLV;
  HB_CUDA_CHECK_ARG(
      !per_peer || (call->recv_counts &&
                    (call->kind != HB_CUDA_ALLTOALLV || call->send_counts)),
      "%s: per-peer counts are NULL", kind_name(call->kind));
  size_t esize = call->dtype == HB_FLOAT64 || call->dtype == HB_INT64      ? 8
                 : call->dtype == HB_UINT8                                 ? 1
                 : call->dtype == HB_FLOAT16 || call->dtype == HB_BFLOAT16 ? 2
                                                                           : 4;
  ncclResult_t r = enqueue(call, dt, op, esize, static_cast<ncclComm_t>(comm),
                           static_cast<cudaStream_t>(stream));
  if (r == ncclInProgress) *in_progress = 1;
  return nccl_status(r, kind_name(call->kind), errbuf, errcap);
}

}  // namespace hb_cuda
