#include "comm/fingerprint.h"

#include <cstring>
#include <map>

#include "abi/dtype.h"
#include "abi/error.h"
#include "comm/p2p.h"

namespace hb {
namespace comm {

namespace {

constexpr size_t kFixed = 48;  // kind dtype op root | seq | count | extra | pad

const char *kind_name(uint32_t k) {
  switch (k) {
    case CallPrint::kAllreduce:
      return "allreduce";
    case CallPrint::kAllreduceMany:
      return "allreduce_many";
    case CallPrint::kReduceScatter:
      return "reduce_scatter";
    case CallPrint::kAllgatherv:
      return "allgather(v)";
    case CallPrint::kAlltoallv:
      return "alltoall(v)";
    case CallPrint::kBroadcast:
      return "broadcast";
    case CallPrint::kAlltoallvSized:
      return "alltoallv (sizes with the data)";
  }
  return "?";
}

const char *op_name(int op) {
  switch (op) {
    case HB_SUM:
      return "sum";
    case HB_PROD:
      return "prod";
    case HB_MIN:
      return "min";
    case HB_MAX:
      return "max";
    case HB_AVG:
      return "avg";
  }
  return "-";
}

std::string describe(const CallPrint &p, int world) {
  std::string s = format("%s #%llu", kind_name(p.kind),
                         static_cast<unsigned long long>(p.seq));
  if (p.dtype >= 0)
    s += format(" %s", dtype_name(static_cast<hb_dtype>(p.dtype)));
  if (p.op >= 0) s += format(" op=%s", op_name(p.op));
  if (p.root >= 0) s += format(" root=%d", p.root);
  if (p.kind != CallPrint::kAllgatherv && p.kind != CallPrint::kAlltoallv &&
      p.kind != CallPrint::kAlltoallvSized)
    s += format(" count=%llu", static_cast<unsigned long long>(p.count));
  if (p.kind == CallPrint::kAllreduceMany)
    s += format(" tensors=%016llx", static_cast<unsigned long long>(p.extra));
  if (p.kind == CallPrint::kAllgatherv && int(p.counts.size()) >= world) {
    s += " recv_counts=[";
    for (int q = 0; q < world && q < 16; ++q)
      s += format("%s%lld", q ? "," : "",
                  static_cast<long long>(p.counts[size_t(q)]));
    s += world > 16 ? ",...]" : "]";
  }
  return s;
}

// Everything but the alltoallv counts, which are checked pairwise.
bool same_call(const CallPrint &a, const CallPrint &b) {
  if (a.kind != b.kind || a.dtype != b.dtype || a.op != b.op ||
      a.root != b.root || a.seq != b.seq || a.count != b.count ||
      a.extra != b.extra)
    return false;
  return a.kind == CallPrint::kAlltoallv || a.counts == b.counts;
}

}  // namespace

size_t CallPrint::wire_bytes(int world) {
  return kFixed + 2 * size_t(world) * sizeof(int64_t);
}

void CallPrint::to_wire(int world, char *out) const {
  std::memset(out, 0, wire_bytes(world));
  const uint32_t head[4] = {kind, uint32_t(dtype), uint32_t(op),
                            uint32_t(root)};
  std::memcpy(out, head, 16);
  std::memcpy(out + 16, &seq, 8);
  std::memcpy(out + 24, &count, 8);
  std::memcpy(out + 32, &extra, 8);
  const size_t n = std::min(counts.size(), 2 * size_t(world));
  if (n) std::memcpy(out + kFixed, counts.data(), n * sizeof(int64_t));
}

CallPrint CallPrint::from_wire(int world, const char *in) {
  CallPrint p;
  uint32_t head[4];
  std::memcpy(head, in, 16);
  p.kind = head[0];
  p.dtype = int32_t(head[1]);
  p.op = int32_t(head[2]);
  p.root = int32_t(head[3]);
  std::memcpy(&p.seq, in + 16, 8);
  std::memcpy(&p.count, in + 24, 8);
  std::memcpy(&p.extra, in + 32, 8);
  const size_t n = p.kind == kAlltoallv    ? 2 * size_t(world)
                   : p.kind == kAllgatherv ? size_t(world)
                                           : 0;
  p.counts.resize(n);
  if (n) std::memcpy(p.counts.data(), in + kFixed, n * sizeof(int64_t));
  return p;
}

uint64_t CallPrint::wire_hash(const char *wire, size_t bytes) {
  // Each step is a bijection of the state for a given word and of the word
  // for a given state.
  uint64_t h = 0x6a09e667f3bcc908ull ^ bytes;
  for (size_t at = 0; at + 8 <= bytes; at += 8) {
    uint64_t w;
    std::memcpy(&w, wire + at, 8);
    h = (h ^ w) * 0x9e3779b97f4a7c15ull;
    h ^= h >> 29;
  }
  return h;
}

void check_prints(const std::vector<CallPrint> &prints) {
  const int n = int(prints.size());
  // Group the ranks by call; one group is the normal case.
  std::vector<int> group(size_t(n), -1);
  std::vector<int> first;  // a rank of each group
  for (int r = 0; r < n; ++r) {
    for (size_t g = 0; g < first.size() && group[size_t(r)] < 0; ++g)
      if (same_call(prints[size_t(r)], prints[size_t(first[g])]))
        group[size_t(r)] = int(g);
    if (group[size_t(r)] < 0) {
      group[size_t(r)] = int(first.size());
      first.push_back(r);
    }
  }
  if (first.size() > 1) {
    std::string msg = "mismatched collective calls:";
    for (size_t g = 0; g < first.size() && g < 8; ++g) {
      std::string ranks;
      for (int r = 0; r < n; ++r)
        if (group[size_t(r)] == int(g))
          ranks += format("%s%d", ranks.empty() ? "" : ",", r);
      msg +=
          format(" rank%s %s called %s;",
                 ranks.find(',') == std::string::npos ? "" : "s", ranks.c_str(),
                 describe(prints[size_t(first[g])], n).c_str());
    }
    msg.pop_back();
    fail(HB_ERR_MISMATCH, "%s", msg.c_str());
  }
  if (prints[0].kind != CallPrint::kAlltoallv) return;
  // Rank p's send_counts[q] must be rank q's recv_counts[p].
  for (int p = 0; p < n; ++p)
    for (int q = 0; q < n; ++q) {
      const int64_t sent = prints[size_t(p)].counts[size_t(q)];
      const int64_t expected = prints[size_t(q)].counts[size_t(n + p)];
      if (sent != expected)
        fail(HB_ERR_MISMATCH,
             "mismatched collective calls: alltoall(v) #%llu %s: rank %d "
             "sends rank %d %lld elements but rank %d expects %lld from "
             "rank %d",
             static_cast<unsigned long long>(prints[0].seq),
             dtype_name(static_cast<hb_dtype>(prints[0].dtype)), p, q,
             static_cast<long long>(sent), q, static_cast<long long>(expected),
             p);
    }
}

void check_call(P2P &p2p, int channel, const CallPrint &mine) {
  const int n = p2p.world_size(), r = p2p.rank();
  check_call(
      r, n,
      [&](char *wire) {
        const size_t w = CallPrint::wire_bytes(n);
        for (int q = 0; q < n; ++q)
          if (q != r) p2p.recv(q, channel, wire + size_t(q) * w, w);
        for (int j = 1; j < n; ++j)
          p2p.send((r + j) % n, channel, wire + size_t(r) * w, w);
        p2p.finish();
      },
      mine);
}

void check_call(int r, int n, const std::function<void(char *)> &exchange,
                const CallPrint &mine) {
  const size_t w = CallPrint::wire_bytes(n);
  std::vector<char> wire(size_t(n) * w);
  mine.to_wire(n, wire.data() + size_t(r) * w);
  exchange(wire.data());
  std::vector<CallPrint> prints;
  prints.reserve(size_t(n));
  for (int q = 0; q < n; ++q)
    prints.push_back(CallPrint::from_wire(n, wire.data() + size_t(q) * w));
  check_prints(prints);
}

uint64_t hash_counts(const size_t *counts, size_t n) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a over the 64-bit counts
  for (size_t i = 0; i < n; ++i) {
    uint64_t c = counts[i];
    for (int b = 0; b < 8; ++b) {
      h ^= (c >> (8 * b)) & 0xff;
      h *= 1099511628211ull;
    }
  }
  return h ^ n;
}

}  // namespace comm
}  // namespace hb
