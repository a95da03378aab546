#include "ps/server.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <memory>
#include <vector>

#include "common/clock.h"
#include "common/log.h"
#include "context/health.h"
#include "embedding/checkpoint.h"
#include "embedding/plan.h"
#include "embedding/shard.h"
#include "embedding/wire.h"
#include "ps/clock.h"
#include "ps/wire.h"

namespace hb {
namespace ps {
namespace {

constexpr int kSliceMs = 20;

struct Peer {
  explicit Peer(int fd_, size_t max_frame) : fd(fd_), dec(max_frame) {}
  int fd;
  rdv::FrameDecoder dec;
  std::string out;  // reply bytes not yet written
  int rank = -1;    // after hello
  int64_t last_heard = now_ms();
  bool has_parked = false;
  Frame parked;
  bool closed = false;
};

enum WorkerState { kExpected, kLive, kLost, kLeft };

struct Worker {
  WorkerState state = kExpected;
  Peer *peer = nullptr;
};

// One table (or dense buffer) this ps owns a shard of.
struct Table {
  Table(const emb::Spec &s, int ps_index, int num_ps, int world, int64_t k)
      : spec(s),
        shard(new emb::Shard(s, ps_index, num_ps)),
        clock(world, k),
        pend_ids(world),
        pend_grads(world),
        has_pend(world, 0),
        committed(world, {-1, -1}),
        position(world),
        attached(world, 0) {}
  emb::Spec spec;  // partition MOD over the ps tasks
  uint64_t fingerprint = 0;
  std::unique_ptr<emb::Shard> shard, staged;
  StalenessClock clock;
  int64_t round = 0;  // staleness 0: the round being collected
  std::vector<std::vector<int64_t>> pend_ids;
  std::vector<std::vector<float>> pend_grads;
  std::vector<char> has_pend;
  // Per rank: the last push applied, {step, k}: the worker's step (its
  // hb_ps_set_position calls) and the push's number within it. A push at
  // or below it is a replay (a restarted worker), dropped.
  std::vector<std::pair<int64_t, int64_t>> committed;
  std::vector<std::string> position;  // per rank: with the last push
  std::vector<char> attached;         // per rank: attached at least once
  // Scratch of a round.
  emb::Dedup dedup;
  std::vector<int64_t> ids;
  std::vector<float> grads, sum;
};

class Server {
 public:
  Server(const ServerConfig &cfg, Health &health)
      : cfg_(cfg), health_(health), start_ms_(now_ms()) {}
  ~Server() {
    for (auto &p : peers_) ::close(p->fd);
    if (listen_fd_ >= 0) ::close(listen_fd_);
  }
  void listen();
  void run();

 private:
  void accept_all();
  void read_peer(Peer &p);
  void write_peer(Peer &p);
  void reply(Peer &p, const Frame &f);
  void handle(Peer &p, Frame &f);
  // Serves f; false when it must wait (the staleness gate).
  bool serve_request(Peer &p, Frame &f);
  void hello(Peer &p, const Frame &f);
  Frame attach(int rank, const Frame &f);
  // Whether every table of a pull or push lets rank go (staleness bound).
  bool gate(int rank, const Frame &f) const;
  Frame pull(int rank, const Frame &f);
  Frame push(int rank, const Frame &f);
  Frame save(const Frame &f);
  Frame load(const Frame &f, bool commit_step);
  Frame dump(const Frame &f);
  Frame position(int rank);
  void apply_rounds(Table &t);
  void step_rows(Table &t, const int64_t *ids, size_t n, const float *g);
  Table &table(int64_t id);
  void check_ids(const Table &t, const std::vector<int64_t> &ids) const;
  void drop_peer(Peer &p, const std::string &why);
  void worker_lost(int rank, const std::string &why);
  void worker_revived(int rank);
  void retry_parked();
  void check_liveness();
  // Returns true (and sets the outcome) when serving is over.
  bool finished();

  ServerConfig cfg_;
  Health &health_;
  int listen_fd_ = -1;
  int64_t start_ms_;
  int world_ = 0;  // from the first hello
  std::vector<Worker> workers_;
  int64_t last_lost_ms_ = 0;
  std::vector<std::unique_ptr<Peer>> peers_;
  std::vector<std::unique_ptr<Table>> tables_;
  std::map<std::string, int64_t> table_ids_;
  Stats stats_;
  bool dirty_ = false;  // clocks changed: parked requests may go
  hb_status end_status_ = HB_OK;
  std::string end_message_;
};

void Server::listen() {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo *res = nullptr;
  int rc = getaddrinfo(cfg_.host.c_str(), std::to_string(cfg_.port).c_str(),
                       &hints, &res);
  if (rc != 0)
    fail(HB_ERR_CONFIG, "ps task %d: cannot resolve %s: %s", cfg_.ps_index,
         cfg_.host.c_str(), gai_strerror(rc));
  std::string err = "no address";
  for (addrinfo *ai = res; ai && listen_fd_ < 0; ai = ai->ai_next) {
    int fd =
        socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
               ai->ai_protocol);
    if (fd < 0) continue;
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (::bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 &&
        ::listen(fd, 128) == 0) {
      listen_fd_ = fd;
    } else {
      err = strerror(errno);
      ::close(fd);
    }
  }
  freeaddrinfo(res);
  if (listen_fd_ < 0)
    fail(HB_ERR_IO, "ps task %d: cannot listen on %s:%d: %s", cfg_.ps_index,
         cfg_.host.c_str(), cfg_.port, err.c_str());
}

void Server::accept_all() {
  for (;;) {
    int fd =
        ::accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) return;
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, 1 /* TCP_NODELAY */, &one, sizeof one);
    peers_.emplace_back(new Peer(fd, cfg_.max_frame_bytes));
  }
}

void Server::reply(Peer &p, const Frame &f) {
  if (p.closed) return;
  // Replies may be larger than requests (rows back): no cap of their own.
  rdv::encode_frame(f, SIZE_MAX, &p.out);
  write_peer(p);
}

void Server::write_peer(Peer &p) {
  while (!p.out.empty() && !p.closed) {
    ssize_t w = ::send(p.fd, p.out.data(), p.out.size(), MSG_NOSIGNAL);
    if (w > 0) {
      p.out.erase(0, static_cast<size_t>(w));
      continue;
    }
    if (w < 0 && errno == EINTR) continue;
    if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    drop_peer(p, format("send failed: %s", strerror(errno)));
  }
}

void Server::read_peer(Peer &p) {
  char buf[1 << 16];
  for (;;) {
    ssize_t r = ::recv(p.fd, buf, sizeof buf, 0);
    if (r == 0) return drop_peer(p, "closed the connection");
    if (r < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) break;
      return drop_peer(p, format("receive failed: %s", strerror(errno)));
    }
    p.last_heard = now_ms();
    try {
      p.dec.feed(buf, static_cast<size_t>(r));
      Frame f;
      while (!p.closed && p.dec.next(&f)) handle(p, f);
    } catch (const Error &e) {
      // A malformed frame closes that connection only.
      return drop_peer(p, e.what());
    }
    if (static_cast<size_t>(r) < sizeof buf) break;
  }
}

void Server::drop_peer(Peer &p, const std::string &why) {
  if (p.closed) return;
  p.closed = true;
  p.has_parked = false;
  if (p.rank >= 0 && workers_[p.rank].peer == &p) {
    workers_[p.rank].peer = nullptr;
    if (workers_[p.rank].state == kLive) worker_lost(p.rank, why);
  }
}

void Server::worker_lost(int rank, const std::string &why) {
  workers_[rank].state = kLost;
  last_lost_ms_ = now_ms();
  ++stats_.workers_lost;
  HB_LOG_WARN("ps task %d: worker rank %d lost: %s", cfg_.ps_index, rank,
              why.c_str());
  for (auto &t : tables_) {
    t->clock.lost(rank);
    apply_rounds(*t);
  }
  dirty_ = true;
}

void Server::worker_revived(int rank) {
  workers_[rank].state = kLive;
  ++stats_.workers_rejoined;
  HB_LOG_WARN("ps task %d: worker rank %d is back", cfg_.ps_index, rank);
  for (auto &t : tables_)
    if (t->attached[rank] && t->clock.state(rank) == StalenessClock::kLost)
      t->clock.attach(rank);
  dirty_ = true;
}

void Server::handle(Peer &p, Frame &f) {
  if (f.type == kPing) {
    Frame pong;
    pong.type = kPong;
    return reply(p, pong);
  }
  if (p.rank >= 0 && workers_[p.rank].peer == &p &&
      workers_[p.rank].state == kLost)
    worker_revived(p.rank);
  if (p.has_parked) {
    return drop_peer(p, "a second request while one waits (a broken client)");
  }
  if (!serve_request(p, f)) {
    p.has_parked = true;
    p.parked = std::move(f);
  }
}

bool Server::serve_request(Peer &p, Frame &f) {
  Clock::time_point t0 = Clock::now();
  try {
    if (f.type == kHello) {
      hello(p, f);
      reply(p, ok_reply(f.id));
      return true;
    }
    if (p.rank < 0)
      fail(HB_ERR_INVALID_ARGUMENT, "message type %d before hello", f.type);
    const int rank = p.rank;
    Frame r;
    switch (f.type) {
      case kAttach:
        r = attach(rank, f);
        break;
      case kDetach: {
        // Out of data (or done): it holds nobody back from now on, and a
        // round that waited only for it completes.
        Table &t = table(f.ints.at(0));
        t.clock.left(rank);
        apply_rounds(t);
        dirty_ = true;
        r = ok_reply(f.id);
        break;
      }
      case kPull:
      case kPush:
        if (!gate(rank, f)) return false;
        r = f.type == kPull ? pull(rank, f) : push(rank, f);
        break;
      case kSave:
        r = save(f);
        break;
      case kLoad:
        r = load(f, false);
        break;
      case kLoadCommit:
        r = load(f, true);
        break;
      case kDump:
        r = dump(f);
        break;
      case kPosition:
        r = position(rank);
        break;
      case kStats: {
        std::vector<int64_t> v;
        stats_.workers_left =
            std::count_if(workers_.begin(), workers_.end(),
                          [](const Worker &w) { return w.state == kLeft; });
        stats_.to_ints(&v);
        r = ok_reply(0, v);
        break;
      }
      case kBye:
        workers_[rank].state = kLeft;
        for (auto &t : tables_) {
          t->clock.left(rank);
          apply_rounds(*t);
        }
        dirty_ = true;
        r = ok_reply(0);
        break;
      default:
        fail(HB_ERR_CORRUPT, "unknown message type %d", f.type);
    }
    r.id = f.id;
    reply(p, r);
  } catch (const std::out_of_range &) {
    reply(p, error_reply(f.id, HB_ERR_CORRUPT,
                         format("message type %d: missing fields", f.type)));
  } catch (const Error &e) {
    reply(p, error_reply(f.id, e.status(), e.what()));
  } catch (const std::bad_alloc &) {
    reply(p, error_reply(f.id, HB_ERR_OUT_OF_MEMORY, "out of memory"));
  }
  stats_.busy_us +=
      std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - t0)
          .count();
  return true;
}

void Server::hello(Peer &p, const Frame &f) {
  int64_t rank = f.ints.at(0), world = f.ints.at(1), index = f.ints.at(2);
  if (index != cfg_.ps_index)
    fail(HB_ERR_CONFIG,
         "this is ps task %d but the worker's ps_hosts list puts ps task %lld "
         "here",
         cfg_.ps_index, static_cast<long long>(index));
  if (world < 1 || world > 65536 || rank < 0 || rank >= world)
    fail(HB_ERR_INVALID_ARGUMENT, "hello from rank %lld of %lld",
         static_cast<long long>(rank), static_cast<long long>(world));
  if (world_ == 0) {
    world_ = static_cast<int>(world);
    workers_.assign(world_, Worker());
  } else if (world != world_) {
    fail(HB_ERR_CONFIG, "rank %lld says the world has %lld workers, others %d",
         static_cast<long long>(rank), static_cast<long long>(world), world_);
  }
  Worker &w = workers_[rank];
  if (w.peer && w.peer != &p) {
    // A restarted worker: its old connection is gone (or about to be).
    Peer *old = w.peer;
    w.peer = nullptr;
    old->closed = true;
    old->has_parked = false;
  }
  w.peer = &p;
  p.rank = static_cast<int>(rank);
  if (w.state == kLost || w.state == kLeft) {
    ++stats_.workers_rejoined;
    HB_LOG_WARN("ps task %d: worker rank %lld rejoins", cfg_.ps_index,
                static_cast<long long>(rank));
  }
  // Its tables rejoin when it attaches them again.
  w.state = kLive;
}

Table &Server::table(int64_t id) {
  if (id < 0 || id >= static_cast<int64_t>(tables_.size()))
    fail(HB_ERR_INVALID_ARGUMENT, "no table %lld on ps task %d",
         static_cast<long long>(id), cfg_.ps_index);
  return *tables_[id];
}

Frame Server::attach(int rank, const Frame &f) {
  emb::Spec spec = decode_spec(f.strs.at(0));
  uint64_t fp = emb::spec_fingerprint(spec);
  auto it = table_ids_.find(spec.name);
  int64_t id;
  bool fresh = it == table_ids_.end();
  if (fresh) {
    emb::Spec mine = spec;
    mine.partition = HB_PARTITION_MOD;  // id mod num_ps
    mine.device = -1;
    std::unique_ptr<Table> t(
        new Table(mine, cfg_.ps_index, cfg_.num_ps, world_, cfg_.staleness));
    t->fingerprint = fp;
    id = static_cast<int64_t>(tables_.size());
    tables_.push_back(std::move(t));
    table_ids_[spec.name] = id;
  } else {
    id = it->second;
    if (tables_[id]->fingerprint != fp)
      fail(HB_ERR_INVALID_ARGUMENT,
           "table '%s': rank %d attaches with another config (name, dim, "
           "num_rows, partition, initializer, optimizer or wire dtype differ)",
           spec.name.c_str(), rank);
  }
  Table &t = *tables_[id];
  if (fresh && f.strs.size() >= 3) {
    // Initial weights (dense buffers): the first worker's.
    std::vector<int64_t> ids = unpack<int64_t>(f.strs[1], "init ids");
    std::vector<float> w = unpack<float>(f.strs[2], "init rows");
    if (w.size() != ids.size() * static_cast<size_t>(t.spec.dim))
      fail(HB_ERR_CORRUPT, "table '%s': %zu init values for %zu rows",
           spec.name.c_str(), w.size(), ids.size());
    check_ids(t, ids);
    for (size_t i = 0; i < ids.size(); ++i)
      std::memcpy(t.shard->get(ids[i]), &w[i * t.spec.dim], 4 * t.spec.dim);
  }
  t.attached[rank] = 1;
  t.clock.attach(rank);
  dirty_ = true;
  return ok_reply(0, {id, t.committed[rank].first, t.committed[rank].second});
}

bool Server::gate(int rank, const Frame &f) const {
  // Pull: ints are table ids; push: {table, step, k} triples.
  const bool is_push = f.type == kPush;
  const size_t n = is_push ? f.ints.size() / 3 : f.ints.size();
  for (size_t i = 0; i < n; ++i) {
    int64_t id = f.ints[is_push ? 3 * i : i];
    if (id < 0 || id >= static_cast<int64_t>(tables_.size()))
      continue;  // the request fails when served
    const Table &t = *tables_[id];
    if (is_push && std::make_pair(f.ints[3 * i + 1], f.ints[3 * i + 2]) <=
                       t.committed[rank])
      continue;  // a replay: dropped at once
    if (!t.clock.may_go(rank)) return false;
  }
  return true;
}

void Server::check_ids(const Table &t, const std::vector<int64_t> &ids) const {
  for (int64_t id : ids) {
    bool mine =
        static_cast<int>(static_cast<uint64_t>(id) %
                         static_cast<uint64_t>(cfg_.num_ps)) == cfg_.ps_index;
    bool in_range = t.spec.dynamic() || (id >= 0 && id < t.spec.num_rows);
    if (!mine || !in_range)
      fail(HB_ERR_INVALID_ARGUMENT, "table '%s': id %lld %s (ps task %d of %d)",
           t.spec.name.c_str(), static_cast<long long>(id),
           !in_range ? "out of range" : "is not owned here", cfg_.ps_index,
           cfg_.num_ps);
  }
}

Frame Server::pull(int rank, const Frame &f) {
  (void)rank;
  std::vector<std::string> rows(f.ints.size());
  for (size_t i = 0; i < f.ints.size(); ++i) {
    Table &t = table(f.ints[i]);
    std::vector<int64_t> ids = unpack<int64_t>(f.strs.at(i), "ids");
    check_ids(t, ids);
    const size_t rb = emb::wire_size(t.spec.wire_dtype) * t.spec.dim;
    rows[i].resize(ids.size() * rb);
    for (size_t j = 0; j < ids.size(); ++j)
      emb::wire_encode(t.shard->get(ids[j]), t.spec.dim, t.spec.wire_dtype,
                       &rows[i][j * rb]);
    ++stats_.pulls;
    stats_.rows_pulled += static_cast<int64_t>(ids.size());
  }
  return ok_reply(0, {}, std::move(rows));
}

void Server::step_rows(Table &t, const int64_t *ids, size_t n, const float *g) {
  const emb::Optimizer &opt = t.shard->optimizer();
  for (size_t j = 0; j < n; ++j)
    opt.step(t.shard->get(ids[j]), g + j * t.spec.dim);
}

Frame Server::push(int rank, const Frame &f) {
  const size_t n = f.ints.size() / 3;
  if (f.ints.size() != 3 * n || f.strs.size() != 2 * n + 1)
    fail(HB_ERR_CORRUPT, "push: %zu fields and %zu payloads", f.ints.size(),
         f.strs.size());
  const std::string &pos = f.strs.back();
  int64_t dups = 0;
  // Check everything before anything changes.
  struct Item {
    Table *t;
    std::pair<int64_t, int64_t> step;
    std::vector<int64_t> ids;
    std::vector<float> grads;
  };
  std::vector<Item> items(n);
  for (size_t i = 0; i < n; ++i) {
    Item &it = items[i];
    it.t = &table(f.ints[3 * i]);
    it.step = {f.ints[3 * i + 1], f.ints[3 * i + 2]};
    it.ids = unpack<int64_t>(f.strs[2 * i], "ids");
    check_ids(*it.t, it.ids);
    const emb::Spec &s = it.t->spec;
    const size_t m = it.ids.size() * static_cast<size_t>(s.dim);
    if (f.strs[2 * i + 1].size() != m * emb::wire_size(s.wire_dtype))
      fail(HB_ERR_CORRUPT, "push to '%s': %zu gradient bytes for %zu ids",
           s.name.c_str(), f.strs[2 * i + 1].size(), it.ids.size());
    it.grads.resize(m);
    emb::wire_decode(f.strs[2 * i + 1].data(), m, s.wire_dtype,
                     it.grads.data());
  }
  for (Item &it : items) {
    Table &t = *it.t;
    if (it.step <= t.committed[rank]) {
      // A replay of a step this ps already has (a restarted worker
      // resuming from an older position): applied once, so dropped.
      ++dups;
      ++stats_.duplicate_pushes;
      continue;
    }
    const int64_t lead = t.clock.lead(rank);
    stats_.max_staleness = std::max(stats_.max_staleness, lead);
    if (lead > t.clock.bound()) ++stats_.bound_violations;
    if (t.clock.bound() == 0 && t.has_pend[rank])
      fail(HB_ERR_INTERNAL, "table '%s': rank %d pushed twice in round %lld",
           t.spec.name.c_str(), rank, static_cast<long long>(t.round));
    t.committed[rank] = it.step;
    t.position[rank] = pos;
    ++stats_.pushes;
    stats_.rows_pushed += static_cast<int64_t>(it.ids.size());
    if (t.clock.bound() == 0) {
      t.has_pend[rank] = 1;
      t.pend_ids[rank] = std::move(it.ids);
      t.pend_grads[rank] = std::move(it.grads);
      t.clock.tick(rank);
      apply_rounds(t);
    } else {
      step_rows(t, it.ids.data(), it.ids.size(), it.grads.data());
      t.clock.tick(rank);
    }
  }
  dirty_ = true;
  return ok_reply(0, {dups});
}

void Server::apply_rounds(Table &t) {
  if (t.clock.bound() != 0) return;
  for (;;) {
    int64_t slowest = t.clock.slowest();
    bool any =
        std::find(t.has_pend.begin(), t.has_pend.end(), 1) != t.has_pend.end();
    bool complete = slowest == StalenessClock::kNone ? any : slowest > t.round;
    if (!complete) return;
    // The round's partial sums in rank order, summed per id (the first
    // copied, the later ones added: the collective owner's order).
    const int64_t dim = t.spec.dim;
    t.ids.clear();
    t.grads.clear();
    for (int r = 0; r < world_; ++r) {
      if (!t.has_pend[r]) continue;
      t.ids.insert(t.ids.end(), t.pend_ids[r].begin(), t.pend_ids[r].end());
      t.grads.insert(t.grads.end(), t.pend_grads[r].begin(),
                     t.pend_grads[r].end());
      t.has_pend[r] = 0;
      t.pend_ids[r].clear();
      t.pend_grads[r].clear();
    }
    t.dedup.run(t.ids.data(), t.ids.size());
    const std::vector<int64_t> &u = t.dedup.unique();
    t.sum.resize(u.size() * dim);
    emb::sum_rows(t.grads.data(), t.ids.size(), t.dedup.inverse().data(),
                  nullptr, dim, t.sum.data());
    step_rows(t, u.data(), u.size(), t.sum.data());
    ++t.round;
    ++stats_.rounds;
    if (slowest == StalenessClock::kNone) return;
  }
}

Frame Server::save(const Frame &f) {
  Table &t = table(f.ints.at(0));
  uint64_t nonce = static_cast<uint64_t>(f.ints.at(1));
  const std::string &dir = f.strs.at(0);
  emb::make_dirs("ps save of '" + t.spec.name + "'", dir);
  emb::ShardInfo s =
      emb::write_shard_file(*t.shard, dir, nonce, cfg_.ps_index, cfg_.num_ps);
  return ok_reply(0,
                  {static_cast<int64_t>(s.bytes), static_cast<int64_t>(s.rows),
                   static_cast<int64_t>(s.checksum)});
}

Frame Server::load(const Frame &f, bool commit_step) {
  Table &t = table(f.ints.at(0));
  if (!commit_step) {
    t.staged =
        emb::read_checkpoint(t.spec, t.shard->record_words(),
                             f.strs.at(0).c_str(), cfg_.ps_index, cfg_.num_ps);
  } else if (f.ints.at(1)) {
    if (!t.staged)
      fail(HB_ERR_INVALID_ARGUMENT, "table '%s': nothing staged to load",
           t.spec.name.c_str());
    t.shard = std::move(t.staged);
  } else {
    t.staged.reset();
  }
  return ok_reply(0);
}

// The weights of every row (an export needs no optimizer slots).
Frame Server::dump(const Frame &f) {
  Table &t = table(f.ints.at(0));
  std::vector<int64_t> ids;
  std::string rows;
  const int64_t dim = t.spec.dim;
  t.shard->for_each([&](int64_t id, const float *rec) {
    ids.push_back(id);
    rows.append(reinterpret_cast<const char *>(rec), 4 * dim);
  });
  return ok_reply(0, {}, {pack(ids.data(), ids.size()), std::move(rows)});
}

Frame Server::position(int rank) {
  // Per table this rank pushed: {table, step, k} and the position.
  std::vector<int64_t> ints;
  std::vector<std::string> strs;
  for (size_t i = 0; i < tables_.size(); ++i) {
    const Table &t = *tables_[i];
    if (t.committed[rank].first < 0) continue;
    ints.insert(ints.end(), {static_cast<int64_t>(i), t.committed[rank].first,
                             t.committed[rank].second});
    strs.push_back(t.position[rank]);
  }
  return ok_reply(0, std::move(ints), std::move(strs));
}

void Server::retry_parked() {
  while (dirty_) {
    dirty_ = false;
    for (auto &p : peers_) {
      if (!p->has_parked || p->closed) continue;
      Frame f = std::move(p->parked);
      p->has_parked = false;
      if (!serve_request(*p, f)) {
        p->has_parked = true;
        p->parked = std::move(f);
      }
    }
  }
}

void Server::check_liveness() {
  const int64_t now = now_ms();
  for (int r = 0; r < world_; ++r) {
    Worker &w = workers_[r];
    if (w.state == kLive && w.peer &&
        now - w.peer->last_heard > cfg_.peer_timeout_ms)
      worker_lost(r, format("silent for %lld ms (peer_timeout_ms)",
                            static_cast<long long>(now - w.peer->last_heard)));
    if (w.state == kExpected && now - start_ms_ > cfg_.connect_timeout_ms)
      worker_lost(r, "never connected within connect_timeout_ms");
  }
}

bool Server::finished() {
  const int64_t now = now_ms();
  if (!health_.ok()) {
    end_status_ = health_.status();
    end_message_ = health_.message();
    return true;
  }
  if (world_ == 0) {
    if (now - start_ms_ <= cfg_.connect_timeout_ms) return false;
    end_status_ = HB_ERR_TIMEOUT;
    end_message_ = format(
        "ps task %d: no worker came within "
        "connect_timeout_ms=%lld",
        cfg_.ps_index, static_cast<long long>(cfg_.connect_timeout_ms));
    return true;
  }
  int left = 0, lost = 0;
  for (const Worker &w : workers_) {
    if (w.state == kLeft) ++left;
    if (w.state == kLost) ++lost;
  }
  if (left == world_) return true;
  if (left + lost == world_ && now - last_lost_ms_ > cfg_.peer_timeout_ms) {
    end_status_ = HB_ERR_PEER_FAILED;
    end_message_ = format(
        "ps task %d: %d worker(s) lost and none left alive "
        "for peer_timeout_ms",
        cfg_.ps_index, lost);
    return true;
  }
  return false;
}

void Server::run() {
  std::vector<pollfd> fds;
  for (;;) {
    fds.assign(1, pollfd{listen_fd_, POLLIN, 0});
    for (auto &p : peers_)
      fds.push_back(pollfd{
          p->fd, static_cast<short>(POLLIN | (p->out.empty() ? 0 : POLLOUT)),
          0});
    int n = ::poll(fds.data(), fds.size(), kSliceMs);
    if (n < 0 && errno != EINTR)
      fail(HB_ERR_IO, "ps task %d: poll: %s", cfg_.ps_index, strerror(errno));
    if (n > 0) {
      const size_t npeers = fds.size() - 1;
      for (size_t i = 0; i < npeers; ++i) {
        Peer &p = *peers_[i];
        short ev = fds[i + 1].revents;
        if (ev & POLLOUT) write_peer(p);
        if (ev & (POLLIN | POLLHUP | POLLERR)) read_peer(p);
      }
      if (fds[0].revents & POLLIN) accept_all();
    }
    check_liveness();
    retry_parked();
    // Closed connections go once nothing points at them.
    for (size_t i = 0; i < peers_.size();) {
      if (!peers_[i]->closed) {
        ++i;
        continue;
      }
      ::close(peers_[i]->fd);
      peers_.erase(peers_.begin() + static_cast<long>(i));
    }
    if (finished()) break;
  }
  // Last replies (the BYEs' acknowledgements) out, bounded.
  Deadline flush(1000);
  for (auto &p : peers_)
    while (!p->closed && !p->out.empty() && !flush.expired()) {
      write_peer(*p);
      if (!p->out.empty()) {
        pollfd pf{p->fd, POLLOUT, 0};
        ::poll(&pf, 1, 10);
      }
    }
  if (end_status_ != HB_OK) fail(end_status_, "%s", end_message_.c_str());
}

}  // namespace

void serve(const ServerConfig &cfg, Health &health) {
  Server s(cfg, health);
  s.listen();
  HB_LOG_INFO("ps task %d of %d serving on %s:%d (staleness %lld)",
              cfg.ps_index, cfg.num_ps, cfg.host.c_str(), cfg.port,
              static_cast<long long>(cfg.staleness));
  s.run();
}

}  // namespace ps
}  // namespace hb
