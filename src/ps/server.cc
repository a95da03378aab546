#include "ps/server.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <memory>
#include <vector>

#include "common/clock.h"
#include "common/file_io.h"
#include "common/health.h"
#include "common/log.h"
#include "embedding/checkpoint.h"
#include "embedding/plan.h"
#include "embedding/shard.h"
#include "embedding/wire.h"
#include "ps/owned_table.h"
#include "ps/split_queue.h"
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
  int64_t parked_ms = 0;  // when it was parked (timeout_ms bounds the wait)
  bool closed = false;
};

enum WorkerState { kExpected, kLive, kLost, kLeft };

// A push's split batch (its last payload after the position, when it has
// one). Throws HB_ERR_CORRUPT when the frame's fields do not add up.
SplitTag push_tag(const Frame &f) {
  const size_t n = f.ints.size() / kPushInts;
  if (f.ints.size() != kPushInts * n ||
      (f.strs.size() != 2 * n + 1 && f.strs.size() != 2 * n + 2))
    fail(HB_ERR_CORRUPT, "push: %zu fields and %zu payloads", f.ints.size(),
         f.strs.size());
  SplitTag t;
  if (f.strs.size() == 2 * n + 1) return t;
  std::vector<int64_t> v = unpack<int64_t>(f.strs.back(), "split tag");
  if (v.size() != 4 || v[1] < 0 || v[2] > v[3])
    fail(HB_ERR_CORRUPT, "push: a malformed split tag (%zu values)", v.size());
  t.epoch = v[0], t.split = v[1], t.begin = v[2], t.end = v[3];
  return t;
}

struct Worker {
  WorkerState state = kExpected;
  // Waiting for a split (kIdle): its clocks hold nobody back (left) until
  // its next pull or push revives them at the slowest.
  bool idle = false;
  Peer *peer = nullptr;
  int64_t lost_ms = 0;  // when it was lost
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
  // Every table: rank left or was lost.
  void all_tables(int rank, bool lost);
  // The first table of a pull or push that does not let rank go yet (the
  // staleness bound), or -1 when every one does.
  int64_t blocking_table(int rank, const Frame &f) const;
  // Why a parked request of rank still waits (for the timeout's error).
  std::string wait_reason(int rank, const Frame &f) const;
  // Parked requests past timeout_ms get HB_ERR_TIMEOUT saying what they
  // waited for.
  void expire_parked();
  Frame pull(const Frame &f);
  Frame push(int rank, const Frame &f);
  Frame save(const Frame &f);
  Frame load(const Frame &f, bool commit_step);
  Frame dump(const Frame &f);
  Frame position(int rank);
  // The queue into / out of a job checkpoint (ps task 0).
  Frame split_save(const Frame &f);
  void split_load(const Frame &f);
  OwnedTable &table(int64_t id);
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
  std::vector<std::unique_ptr<OwnedTable>> tables_;
  std::map<std::string, int64_t> table_ids_;
  Stats stats_;
  // Dynamic splits (ps task 0, created at the first hello: it needs the
  // world).
  std::unique_ptr<SplitQueue> splits_;
  SplitQueue &splits();
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
  workers_[rank].lost_ms = now_ms();
  last_lost_ms_ = now_ms();
  ++stats_.workers_lost;
  HB_LOG_WARN("ps task %d: worker rank %d lost: %s", cfg_.ps_index, rank,
              why.c_str());
  all_tables(rank, /*lost=*/true);
}

void Server::all_tables(int rank, bool lost) {
  for (auto &t : tables_) {
    if (lost)
      t->lost(rank, stats_);
    else
      t->left(rank, stats_);
  }
  dirty_ = true;
}

void Server::worker_revived(int rank) {
  workers_[rank].state = kLive;
  ++stats_.workers_rejoined;
  HB_LOG_WARN("ps task %d: worker rank %d is back", cfg_.ps_index, rank);
  for (auto &t : tables_)
    if (t->attached(rank) && t->clock().state(rank) == StalenessClock::kLost)
      t->revive(rank);
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
    p.parked_ms = now_ms();
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
      case kDetach:
        // Out of data (or done): it holds nobody back from now on, and a
        // round that waited only for it completes.
        table(f.ints.at(0)).left(rank, stats_);
        dirty_ = true;
        r = ok_reply(f.id);
        break;
      case kIdle:
        if (!workers_[rank].idle) {
          workers_[rank].idle = true;
          all_tables(rank, /*lost=*/false);
        }
        r = ok_reply(0);
        break;
      case kPull:
      case kPush:
        if (workers_[rank].idle) {
          // Back from waiting for a split: it resumes at the slowest clock.
          workers_[rank].idle = false;
          for (auto &t : tables_)
            if (t->attached(rank)) t->revive(rank);
          dirty_ = true;
        }
        if (blocking_table(rank, f) >= 0) return false;
        r = f.type == kPull ? pull(f) : push(rank, f);
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
        stats_.workers_gone = std::count_if(
            workers_.begin(), workers_.end(), [](const Worker &w) {
              return w.state == kLeft || w.state == kLost;
            });
        rusage ru;
        getrusage(RUSAGE_SELF, &ru);
        stats_.cpu_us = (ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000LL +
                        ru.ru_utime.tv_usec + ru.ru_stime.tv_usec;
        stats_.to_ints(&v);
        r = ok_reply(0, v);
        break;
      }
      case kSplitNext: {
        SplitLease l = splits().next(rank);
        r = ok_reply(0, {l.split, l.epoch, l.begin, l.end, l.from});
        break;
      }
      case kSplitApplied: {
        std::vector<int64_t> ends;
        for (const auto &t : tables_) {
          const int64_t e = t->split_applied(f.ints.at(0), f.ints.at(1));
          if (e >= 0) ends.push_back(e);
        }
        r = ok_reply(0, std::move(ends));
        break;
      }
      case kSplitSave:
        r = split_save(f);
        break;
      case kSplitLoad:
        split_load(f);
        r = ok_reply(0);
        break;
      case kSplitCommit:
        if (f.ints.at(2))
          splits().done(rank, f.ints.at(0));
        else
          splits().commit(rank, f.ints.at(0), f.ints.at(1));
        r = ok_reply(0);
        break;
      case kBye:
        if (splits_) (void)splits_->give_back(rank);  // left: resumed by others
        workers_[rank].state = kLeft;
        all_tables(rank, /*lost=*/false);
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
    if (cfg_.ps_index == 0 && cfg_.split_samples > 0)
      splits_.reset(new SplitQueue(cfg_.split_samples, cfg_.split_size,
                                   cfg_.split_epochs, cfg_.split_seed, world_));
  } else if (rank >= world_) {
    // A worker beyond the world (elastic: a TF_CONFIG task started later):
    // admitted, and the ranks between it and the old world (if any) are
    // counted as gone until they come. Its clocks start at the slowest
    // (clock.h), so it holds nobody back; it takes splits at once.
    const int old = world_;
    world_ = static_cast<int>(rank) + 1;
    workers_.resize(world_);
    for (int r = old; r < world_; ++r) workers_[r].state = kLeft;
    workers_[rank].state = kExpected;
    for (auto &t : tables_) t->grow(world_);
    if (splits_) splits_->grow(world_);
    HB_LOG_WARN("ps task %d: worker rank %lld joins (the world was %d)",
                cfg_.ps_index, static_cast<long long>(rank), old);
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
  w.state = kLive;
  // The tables it had when it was lost, all at this instant (clock.h): the
  // restarted worker attaches them again one by one, and the others move
  // on meanwhile.
  for (auto &t : tables_)
    if (t->attached(p.rank) &&
        t->clock().state(p.rank) == StalenessClock::kLost)
      t->revive(p.rank);
  dirty_ = true;
}

SplitQueue &Server::splits() {
  if (!splits_)
    fail(HB_ERR_INVALID_ARGUMENT,
         "ps task %d: no dynamic splits here (ps task 0 hands them out, when "
         "option ps_split_samples > 0)",
         cfg_.ps_index);
  return *splits_;
}

OwnedTable &Server::table(int64_t id) {
  if (id < 0 || id >= static_cast<int64_t>(tables_.size()))
    fail(HB_ERR_INVALID_ARGUMENT, "no table %lld on ps task %d",
         static_cast<long long>(id), cfg_.ps_index);
  return *tables_[id];
}

Frame Server::attach(int rank, const Frame &f) {
  emb::Spec spec = decode_spec(f.strs.at(0));
  auto it = table_ids_.find(spec.name);
  const bool fresh = it == table_ids_.end();
  int64_t id;
  if (fresh) {
    std::unique_ptr<OwnedTable> t(
        new OwnedTable(spec, cfg_.ps_index, cfg_.num_ps, world_, cfg_.staleness,
                       cfg_.age_bound));
    // Initial weights (dense buffers): the first worker's.
    if (f.strs.size() >= 3)
      t->set_rows(unpack<int64_t>(f.strs[1], "init ids"),
                  unpack<float>(f.strs[2], "init rows"));
    id = static_cast<int64_t>(tables_.size());
    tables_.push_back(std::move(t));
    table_ids_[spec.name] = id;
  } else {
    id = it->second;
    if (tables_[id]->fingerprint() != emb::spec_fingerprint(spec))
      fail(HB_ERR_INVALID_ARGUMENT,
           "table '%s': rank %d attaches with another config (name, dim, "
           "num_rows, partition, initializer, optimizer or wire dtype differ)",
           spec.name.c_str(), rank);
  }
  OwnedTable &t = *tables_[id];
  t.attach(rank);
  dirty_ = true;
  return ok_reply(0, {id, t.committed(rank).first, t.committed(rank).second});
}

int64_t Server::blocking_table(int rank, const Frame &f) const {
  // Pull: ints are table ids (then the worker's step); push: {table, step,
  // k, version} quads.
  const bool is_push = f.type == kPush;
  const size_t n = is_push ? f.ints.size() / kPushInts : f.strs.size();
  SplitTag tag;
  if (is_push) {
    try {
      tag = push_tag(f);
    } catch (const Error &) {
      return -1;  // the request fails when served
    }
  }
  for (size_t i = 0; i < n && i < f.ints.size(); ++i) {
    int64_t id = f.ints[is_push ? kPushInts * i : i];
    if (id < 0 || id >= static_cast<int64_t>(tables_.size()))
      continue;  // the request fails when served
    const OwnedTable &t = *tables_[id];
    try {
      if (is_push && (t.replay(rank, {f.ints[kPushInts * i + 1],
                                      f.ints[kPushInts * i + 2]}) ||
                      t.split_replay(tag)))
        continue;  // dropped at once
    } catch (const Error &) {
      return -1;  // a straddling batch: fails when served
    }
    if (!t.clock().may_go(rank)) return id;
  }
  return -1;
}

std::string Server::wait_reason(int rank, const Frame &f) const {
  const int64_t id = blocking_table(rank, f);
  const bool is_push = f.type == kPush;
  int64_t step = -1;
  if (is_push) {
    for (size_t i = 0; i + kPushInts - 1 < f.ints.size(); i += kPushInts)
      if (f.ints[i] == id) step = f.ints[i + 1];
  } else if (f.ints.size() > f.strs.size()) {
    step = f.ints.back();
  }
  std::string what =
      format("ps task %d: worker rank %d's %s of step %lld", cfg_.ps_index,
             rank, is_push ? "push" : "pull", static_cast<long long>(step));
  if (id < 0) return what + " waited past timeout_ms";
  const OwnedTable &t = *tables_[id];
  const StalenessClock &c = t.clock();
  const int64_t slowest = c.slowest();
  int who = -1;
  for (int r = 0; r < c.world() && who < 0; ++r)
    if ((c.state(r) == StalenessClock::kLive ||
         c.state(r) == StalenessClock::kExpected) &&
        c.clock(r) == slowest)
      who = r;
  return format(
      "%s waited timeout_ms=%lld on table '%s' for the staleness bound %lld: "
      "it pushed the table %lld times, the slowest active worker, rank %d "
      "(%s), %lld times, and no push of rank %d came",
      what.c_str(), static_cast<long long>(cfg_.timeout_ms),
      t.spec().name.c_str(), static_cast<long long>(c.bound()),
      static_cast<long long>(c.clock(rank)), who,
      who >= 0 && c.state(who) == StalenessClock::kExpected
          ? "not connected yet"
          : "alive",
      static_cast<long long>(slowest), who);
}

void Server::expire_parked() {
  const int64_t now = now_ms();
  for (auto &p : peers_) {
    if (!p->has_parked || p->closed || now - p->parked_ms <= cfg_.timeout_ms)
      continue;
    std::string why = wait_reason(p->rank, p->parked);
    HB_LOG_WARN("%s", why.c_str());
    p->has_parked = false;
    reply(*p, error_reply(p->parked.id, HB_ERR_TIMEOUT, why));
  }
}

Frame Server::pull(const Frame &f) {
  // ints: a table per ids payload, then the worker's step.
  if (f.ints.size() < f.strs.size())
    fail(HB_ERR_CORRUPT, "pull: %zu tables for %zu id lists", f.ints.size(),
         f.strs.size());
  std::vector<std::string> rows(f.strs.size());
  std::vector<int64_t> versions(f.strs.size());
  for (size_t i = 0; i < f.strs.size(); ++i) {
    OwnedTable &t = table(f.ints[i]);
    rows[i] = t.pull(unpack<int64_t>(f.strs.at(i), "ids"), stats_);
    versions[i] = t.version();
  }
  return ok_reply(0, std::move(versions), std::move(rows));
}

Frame Server::push(int rank, const Frame &f) {
  const size_t n = f.ints.size() / kPushInts;
  const SplitTag tag = push_tag(f);
  const std::string &pos = f.strs[2 * n];
  // Decode and check everything before anything changes.
  struct Item {
    OwnedTable *t;
    std::pair<int64_t, int64_t> step;
    int64_t pulled;
    std::vector<int64_t> ids;
    std::vector<float> grads;
    bool split_replay;
  };
  std::vector<Item> items(n);
  for (size_t i = 0; i < n; ++i) {
    Item &it = items[i];
    const int64_t *q = &f.ints[kPushInts * i];
    it.t = &table(q[0]);
    it.step = {q[1], q[2]};
    it.pulled = q[3];
    it.ids = unpack<int64_t>(f.strs[2 * i], "ids");
    it.t->check_ids(it.ids);
    it.split_replay = it.t->split_replay(tag);
    const emb::Spec &s = it.t->spec();
    const size_t m = it.ids.size() * static_cast<size_t>(s.dim);
    if (f.strs[2 * i + 1].size() != m * emb::wire_size(s.wire_dtype))
      fail(HB_ERR_CORRUPT, "push to '%s': %zu gradient bytes for %zu ids",
           s.name.c_str(), f.strs[2 * i + 1].size(), it.ids.size());
    it.grads.resize(m);
    emb::wire_decode(f.strs[2 * i + 1].data(), m, s.wire_dtype,
                     it.grads.data());
  }
  int64_t dups = 0;
  for (Item &it : items) {
    if (it.t->replay(rank, it.step) || it.split_replay) {
      // A step this ps already has (a restarted worker resuming from an
      // older position), or a split batch it has from whoever pushed it
      // (a lost worker's split resumed by another): applied once, so
      // dropped.
      ++dups;
      ++stats_.duplicate_pushes;
      it.t->replayed(rank, stats_, it.step, &pos);
      continue;
    }
    it.t->push(rank, it.step, std::move(it.ids), std::move(it.grads), pos,
               stats_, it.pulled, tag);
  }
  dirty_ = true;
  return ok_reply(0, {dups});
}

Frame Server::save(const Frame &f) {
  OwnedTable &t = table(f.ints.at(0));
  const uint64_t nonce = static_cast<uint64_t>(f.ints.at(1));
  emb::ShardFile s = t.save(f.strs.at(0), nonce);
  std::vector<int64_t> r = {static_cast<int64_t>(s.bytes),
                            static_cast<int64_t>(s.rows),
                            static_cast<int64_t>(s.checksum)};
  if (f.ints.size() > 2 && f.ints[2]) {  // a job checkpoint: the positions
    emb::ShardFile p = t.save_positions(f.strs.at(0), nonce);
    r.insert(r.end(),
             {static_cast<int64_t>(p.bytes), static_cast<int64_t>(p.checksum)});
  }
  return ok_reply(0, std::move(r));
}

Frame Server::load(const Frame &f, bool commit_step) {
  OwnedTable &t = table(f.ints.at(0));
  if (!commit_step && f.ints.size() > 2)  // a job checkpoint's positions too
    t.stage(f.strs.at(0), static_cast<uint64_t>(f.ints[1]),
            static_cast<int>(f.ints[2]));
  else if (!commit_step)
    t.stage(f.strs.at(0));
  else
    t.commit_staged(f.ints.at(1) != 0);
  return ok_reply(0);
}

// The weights of every row (an export needs no optimizer slots).
Frame Server::dump(const Frame &f) {
  std::vector<int64_t> ids;
  std::string rows;
  table(f.ints.at(0)).dump(&ids, &rows);
  return ok_reply(0, {}, {pack(ids.data(), ids.size()), std::move(rows)});
}

Frame Server::position(int rank) {
  // Per table this rank pushed: {table, step, k} and the position.
  std::vector<int64_t> ints;
  std::vector<std::string> strs;
  for (size_t i = 0; i < tables_.size(); ++i) {
    const OwnedTable &t = *tables_[i];
    if (t.committed(rank).first < 0) continue;
    ints.insert(ints.end(), {static_cast<int64_t>(i), t.committed(rank).first,
                             t.committed(rank).second});
    strs.push_back(t.position(rank));
  }
  return ok_reply(0, std::move(ints), std::move(strs));
}

Frame Server::split_save(const Frame &f) {
  if (!splits_) return ok_reply(0);  // no queue: nothing to save
  const std::string bytes = splits_->save();
  AtomicFile file(f.strs.at(0) + "/" +
                  SplitQueue::file_name(static_cast<uint64_t>(f.ints.at(0))));
  file.write(bytes.data(), bytes.size());
  file.commit();
  return ok_reply(0, {static_cast<int64_t>(file.bytes()),
                      static_cast<int64_t>(file.checksum())});
}

void Server::split_load(const Frame &f) {
  SplitQueue &q = splits();
  // Every split open in the checkpoint is handed out again from its offset
  // there (the tables are the checkpoint's too); nothing held now remains.
  const std::string path =
      f.strs.at(0) + "/" +
      SplitQueue::file_name(static_cast<uint64_t>(f.ints.at(0)));
  q = SplitQueue::load(read_whole_file(path), world_);
  HB_LOG_INFO("ps task 0: split queue restored from %s (%lld splits done)",
              path.c_str(), static_cast<long long>(q.splits_done()));
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
    // Given up: not restarted within the time a worker has to connect. Its
    // split goes back to the queue at its committed offset (until then a
    // restarted worker gets its own split back, and its replayed pushes
    // are dropped: exactly once).
    if (w.state == kLost && splits_ &&
        now - w.lost_ms > cfg_.connect_timeout_ms) {
      const SplitLease l = splits_->give_back(r);
      if (l.split >= 0)
        HB_LOG_WARN(
            "ps task 0: worker rank %d did not come back within "
            "connect_timeout_ms: its split %lld (epoch %lld) goes back to the "
            "queue at sample %lld of [%lld, %lld)",
            r, static_cast<long long>(l.split), static_cast<long long>(l.epoch),
            static_cast<long long>(l.from), static_cast<long long>(l.begin),
            static_cast<long long>(l.end));
    }
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
  // No worker alive: a lost one may still be restarting (it gets the time
  // a worker has to connect).
  if (left + lost == world_ && now - last_lost_ms_ > cfg_.connect_timeout_ms) {
    // With dynamic splits a worker given up lost only its split, which the
    // others finished: the job is done when the queue is (ps task 0; the
    // other ps tasks, which have no queue, once some worker left -- a
    // worker leaves when the queue has nothing more).
    if (cfg_.split_samples > 0 && left > 0 &&
        (!splits_ || splits_->finished())) {
      HB_LOG_WARN(
          "ps task %d: %d worker(s) lost for good; the others finished their "
          "splits",
          cfg_.ps_index, lost);
      return true;
    }
    end_status_ = HB_ERR_PEER_FAILED;
    end_message_ = format(
        "ps task %d: %d worker(s) lost and none came back within "
        "connect_timeout_ms=%lld",
        cfg_.ps_index, lost, static_cast<long long>(cfg_.connect_timeout_ms));
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
    expire_parked();
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
  HB_LOG_INFO("ps task %d of %d serving on %s:%d (staleness %lld %s)",
              cfg.ps_index, cfg.num_ps, cfg.host.c_str(), cfg.port,
              static_cast<long long>(cfg.staleness),
              cfg.age_bound ? "versions" : "steps");
  s.run();
}

}  // namespace ps
}  // namespace hb
