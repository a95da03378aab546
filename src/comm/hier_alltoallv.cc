#include "comm/hier_alltoallv.h"

#include <algorithm>
#include <cstring>

#include "comm/p2p.h"
#include "comm/p2p_collectives.h"
#include "comm/region_p2p.h"

namespace hb {
namespace comm {

HostGroups HostGroups::from_leaders(const std::vector<int> &leaders) {
  HostGroups g;
  const int n = int(leaders.size());
  std::vector<int> host_of_leader(size_t(n), -1);
  g.host_of.assign(size_t(n), -1);
  // A leader is the lowest rank of its host, so it is met first.
  for (int r = 0; r < n; ++r) {
    int &h = host_of_leader[size_t(leaders[size_t(r)])];
    if (h < 0) {
      h = int(g.members.size());
      g.members.emplace_back();
    }
    g.host_of[size_t(r)] = h;
    g.members[size_t(h)].push_back(r);
  }
  return g;
}

bool HostGroups::hierarchical() const {
  if (members.size() < 2) return false;
  for (const auto &m : members)
    if (m.size() > 1) return true;
  return false;
}

namespace {

// One call's view: byte counts of every member of this host.
struct Call {
  P2P &p2p;
  const HostGroups &g;
  HierScratch &s;
  int channel, n, host;
  const std::vector<int> &mine;  // this host's ranks, leader first
  size_t fit;                    // region_fit
  // Bytes member k sends to rank j / receives from rank i.
  int64_t sent(size_t k, int j) const { return s.counts[k][size_t(j)]; }
  int64_t got(size_t k, int i) const { return s.counts[k][size_t(n + i)]; }
  // Bytes member k sends to / receives from the other hosts.
  int64_t remote(size_t k, bool recv) const {
    int64_t t = 0;
    for (int q = 0; q < n; ++q)
      if (g.host_of[size_t(q)] != host) t += recv ? got(k, q) : sent(k, q);
    return t;
  }
};

void set_counts(std::vector<int64_t> &c, int n, const int64_t *send_counts,
                const int64_t *recv_counts, size_t es) {
  c.resize(2 * size_t(n));
  for (int q = 0; q < n; ++q) {
    c[size_t(q)] = send_counts[q] * int64_t(es);
    c[size_t(n + q)] = recv_counts[q] * int64_t(es);
  }
}

// A rank that is not its host's leader: counts and blocks up, its blocks
// from the other hosts down, all over shared memory.
void member(Call &c, const char *send, const int64_t *send_offsets, char *recv,
            const int64_t *recv_offsets, size_t es) {
  const int leader = c.mine[0];
  c.s.counts.resize(1);
  c.p2p.send(leader, c.channel, c.s.counts[0].data(),
             c.s.counts[0].size() * sizeof(int64_t));
  c.s.mine_up.resize(size_t(c.remote(0, false)));
  char *at = c.s.mine_up.data();
  for (size_t h = 0; h < c.g.members.size(); ++h) {
    if (int(h) == c.host) continue;
    for (int j : c.g.members[h]) {
      const size_t len = size_t(c.sent(0, j));
      if (len) std::memcpy(at, send + size_t(send_offsets[j]) * es, len);
      at += len;
    }
  }
  if (!c.s.mine_up.empty())
    c.p2p.send(leader, c.channel, c.s.mine_up.data(), c.s.mine_up.size());
  c.s.mine_down.resize(size_t(c.remote(0, true)));
  if (!c.s.mine_down.empty())
    c.p2p.recv(leader, c.channel, c.s.mine_down.data(), c.s.mine_down.size());
  c.p2p.finish();
  const char *from = c.s.mine_down.data();
  for (size_t h = 0; h < c.g.members.size(); ++h) {
    if (int(h) == c.host) continue;
    for (int i : c.g.members[h]) {
      const size_t len = size_t(c.got(0, i));
      if (len) std::memcpy(recv + size_t(recv_offsets[i]) * es, from, len);
      from += len;
    }
  }
}

// This leader's message to / from host h's (3.), on the regions or per-call
// buffers (see the header); the payload's id, -1 when there is none.
int leader_message(Call &c, bool is_send, size_t h, char *data, size_t bytes) {
  const int peer = c.g.members[h][0];
  auto post = [&](int channel, char *at, size_t len) {
    return is_send ? c.p2p.send(peer, channel, at, len)
                   : c.p2p.recv(peer, channel, at, len);
  };
  if (c.fit == 0) return bytes ? post(c.channel, data, bytes) : -1;
  const int on_regions = c.channel + SplitP2P::kRegions;
  if (bytes && bytes <= c.fit) return post(on_regions, data, bytes);
  post(on_regions, &c.s.tokens[2 * h + size_t(is_send)], 1);
  return bytes ? post(c.channel, data, bytes) : -1;
}

void leader(Call &c, const char *send, const int64_t *send_offsets, char *recv,
            const int64_t *recv_offsets, size_t es) {
  const size_t m = c.mine.size(), nh = c.g.members.size(), n = size_t(c.n);
  HierScratch &s = c.s;
  s.counts.resize(m);
  std::vector<int> ids(m, -1);
  for (size_t k = 1; k < m; ++k) {
    s.counts[k].resize(2 * n);
    ids[k] = c.p2p.recv(c.mine[k], c.channel, s.counts[k].data(),
                        2 * n * sizeof(int64_t));
  }
  for (size_t k = 1; k < m; ++k) c.p2p.wait(ids[k]);

  s.up.resize(m);
  for (size_t k = 1; k < m; ++k) {
    s.up[k].resize(size_t(c.remote(k, false)));
    ids[k] = s.up[k].empty() ? -1
                             : c.p2p.recv(c.mine[k], c.channel, s.up[k].data(),
                                          s.up[k].size());
  }
  // The other leaders' messages: rank j of this host (in order), then the
  // blocks of the sending host's ranks i for j.
  s.in.resize(nh);
  s.tokens.assign(2 * nh, 0);
  std::vector<int> in_ids(nh, -1);
  for (size_t h = 0; h < nh; ++h) {
    if (int(h) == c.host) continue;
    int64_t bytes = 0;
    for (size_t k = 0; k < m; ++k)
      for (int i : c.g.members[h]) bytes += c.got(k, i);
    s.in[h].resize(size_t(bytes));
    in_ids[h] = leader_message(c, false, h, s.in[h].data(), s.in[h].size());
  }
  for (size_t k = 1; k < m; ++k)
    if (ids[k] >= 0) c.p2p.wait(ids[k]);

  // Where member k's block for remote rank j is.
  std::vector<const char *> src(m * n, nullptr);
  for (int j = 0; j < c.n; ++j)
    if (c.g.host_of[size_t(j)] != c.host)
      src[size_t(j)] = send + size_t(send_offsets[j]) * es;
  for (size_t k = 1; k < m; ++k) {
    const char *at = s.up[k].data();
    for (size_t h = 0; h < nh; ++h) {
      if (int(h) == c.host) continue;
      for (int j : c.g.members[h]) {
        src[k * n + size_t(j)] = at;
        at += c.sent(k, j);
      }
    }
  }
  s.out.resize(nh);
  for (size_t h = 0; h < nh; ++h) {
    if (int(h) == c.host) continue;
    int64_t bytes = 0;
    for (int j : c.g.members[h])
      for (size_t k = 0; k < m; ++k) bytes += c.sent(k, j);
    s.out[h].resize(size_t(bytes));
    char *at = s.out[h].data();
    for (int j : c.g.members[h])
      for (size_t k = 0; k < m; ++k) {
        const size_t len = size_t(c.sent(k, j));
        if (len) std::memcpy(at, src[k * n + size_t(j)], len);
        at += len;
      }
    leader_message(c, true, h, s.out[h].data(), s.out[h].size());
  }

  // Down: this leader's own blocks straight into recv, the others' packed
  // in (host, rank) order.
  s.down.resize(m);
  std::vector<size_t> fill(m, 0);
  for (size_t k = 1; k < m; ++k) s.down[k].resize(size_t(c.remote(k, true)));
  for (size_t h = 0; h < nh; ++h) {
    if (in_ids[h] < 0) continue;
    c.p2p.wait(in_ids[h]);
    const char *from = s.in[h].data();
    for (size_t k = 0; k < m; ++k)
      for (int i : c.g.members[h]) {
        const size_t len = size_t(c.got(k, i));
        if (!len) continue;
        char *to = k == 0 ? recv + size_t(recv_offsets[i]) * es
                          : s.down[k].data() + fill[k];
        std::memcpy(to, from, len);
        from += len;
        fill[k] += len;
      }
  }
  for (size_t k = 1; k < m; ++k)
    if (!s.down[k].empty())
      c.p2p.send(c.mine[k], c.channel, s.down[k].data(), s.down[k].size());
}

}  // namespace

void hier_alltoallv(P2P &p2p, const HostGroups &g, HierScratch &s, int channel,
                    const char *send, const int64_t *send_counts,
                    const int64_t *send_offsets, char *recv,
                    const int64_t *recv_counts, const int64_t *recv_offsets,
                    size_t es, size_t region_fit) {
  const int n = p2p.world_size(), r = p2p.rank();
  const int host = g.host_of[size_t(r)];
  const std::vector<int> &mine = g.members[size_t(host)];
  int me = 0;
  while (mine[size_t(me)] != r) ++me;
  // 1. This host's blocks go directly. Between two ranks of a host they
  // come before the leader's messages, in the same order on both sides.
  p2p_alltoallv_post(p2p, channel, mine.data(), int(mine.size()), me, send,
                     send_counts, send_offsets, recv, recv_counts, recv_offsets,
                     es);
  s.counts.resize(std::max<size_t>(s.counts.size(), 1));
  set_counts(s.counts[0], n, send_counts, recv_counts, es);
  Call c{p2p, g, s, channel, n, host, mine, region_fit};
  if (r == mine[0])
    leader(c, send, send_offsets, recv, recv_offsets, es);
  else
    member(c, send, send_offsets, recv, recv_offsets, es);
  p2p.finish();
}

}  // namespace comm
}  // namespace hb
