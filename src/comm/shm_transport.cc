#include "comm/shm_transport.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstring>
#include <new>
#include <random>

#include "abi/error.h"
#include "comm/kv_gather.h"
#include "rendezvous/kv.h"

namespace hb {
namespace comm {

namespace {

constexpr uint64_t kMagic = 0x68622d73686d3032ull;  // "hb-shm02"
constexpr size_t kHeaderBytes = 4096;
constexpr size_t kRingHeader = 128;  // head and tail, a cache line each
// Rings: world^2 x kChannels of them on a host, reserved up front, kept
// within ~48 MiB up to 16 ranks (a container's default /dev/shm is 64 MiB):
// 1 MiB up to 4 ranks, 256 KiB at 8, 64 KiB at 16 and 32; then within
// ~192 MiB down to 4 KiB (16 KiB at 64, 4 KiB from 128), where 64 KiB
// would reserve and zero 3 GiB at 128 ranks (docs/scaling.md). A message
// streams through a ring of any size.
size_t ring_bytes_for(int world) {
  const size_t pairs = size_t(world) * size_t(world);
  size_t r = size_t(1) << 20;
  while (r > (size_t(64) << 10) && pairs * r > (size_t(16) << 20)) r /= 2;
  while (r > (size_t(4) << 10) && pairs * r > (size_t(64) << 20)) r /= 2;
  return r;
}
// A waiter spins, then sleeps on its doorbell futex; it never yields. A
// sched_yield while another task is runnable on the core (a co-tenant's
// process, a build, a busy loop at nice 19) hands the core away for up to
// a scheduler tick, and in a lock-step training step every rank then waits
// for the slowest: with a nice-19 busy loop beside it, a 2-rank CTR job
// that yielded ran at half its quiet speed (docs/performance.md). A futex
// sleeper instead preempts such a task as soon as it is woken. Spinning
// keeps the core, so it is bounded by the spin budget (ShmTransport::spin_,
// comm/spin_policy.h: option cpu_wait_spin_us, else 2 ms while every rank
// of this host has a CPU that no other runnable task wants, to cover the
// drift between ranks of a step, 5 us where the ranks outnumber the CPUs
// or the host is loaded: a spinning rank would then hold the CPU share a
// peer needs to reach the call, and none where the rank's own CPU is
// shared with another rank of the job, which may be the one waited for).
constexpr int64_t kSliceMs = 50;  // longest single sleep

uint64_t random64() {
  std::random_device rd;
  return (uint64_t(rd()) << 32) ^ rd();
}

long futex(std::atomic<uint32_t> *addr, int op, uint32_t val,
           const timespec *ts) {
  // Shared (not FUTEX_PRIVATE): waiters and wakers are other processes.
  return syscall(SYS_futex, reinterpret_cast<uint32_t *>(addr), op, val, ts,
                 nullptr, 0);
}

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

size_t pad8(size_t n) { return (n + 7) & ~size_t(7); }
size_t pad64(size_t n) { return (n + 63) & ~size_t(63); }

// Spins for the budget; pause() returns false once the waiter should
// block. The clock is read every 64 spins.
class Backoff {
 public:
  explicit Backoff(std::chrono::nanoseconds spin) : spin_(spin) {}
  bool pause() {
    // until reset(): block at once; a budget of 0 never spins (not even the
    // 64 pauses before the first clock read)
    if (spent_ || spin_.count() <= 0) return false;
    if ((++n_ & 63) == 0) {
      const auto now = std::chrono::steady_clock::now();
      if (n_ == 64) start_ = now;
      if (now - start_ >= spin_) {
        spent_ = true;
        return false;
      }
    }
    cpu_relax();
    return true;
  }
  void reset() {
    n_ = 0;
    spent_ = false;
  }

 private:
  std::chrono::nanoseconds spin_;
  uint64_t n_ = 0;
  bool spent_ = false;
  std::chrono::steady_clock::time_point start_;
};

// Call board slot: a line of metadata, the header, the payload: the inline
// part, then a staging area for the pieces of large reductions. The host's
// staging areas total about 4 MiB per slot parity (a container's /dev/shm
// is small), within 64 KiB..2 MiB per rank.
struct SlotMeta {
  std::atomic<uint64_t> call;  // published call number (0: none yet)
  uint64_t head_bytes, payload_bytes, head_hash;
};
constexpr size_t kSlotMeta = 64;
size_t board_header_cap(int world) { return pad64(64 + 16 * size_t(world)); }
size_t board_payload_cap(int world) {
  const size_t staging = std::min<size_t>(
      size_t(2) << 20,
      std::max<size_t>(size_t(64) << 10, (size_t(4) << 20) / size_t(world)));
  return ShmTransport::kInlineBytes + pad64(staging);
}
size_t slot_bytes(int world) {
  return kSlotMeta + board_header_cap(world) + board_payload_cap(world);
}
size_t board_bytes(int world) { return 2 * slot_bytes(world); }
// Rings start after the segment header and the board.
size_t rings_offset(int world) { return kHeaderBytes + board_bytes(world); }

}  // namespace

struct SegHeader {
  uint64_t magic;
  uint64_t nonce;
  uint32_t world, rank;
  alignas(64) std::atomic<uint32_t> bell;  // futex word of this rank
  std::atomic<uint32_t> sleepers;
  std::atomic<uint32_t> state;  // 0 ok, 1 failed, 2 gone
  // The CPUs this rank may run on (all set if unknown): with the peers'
  // masks, whether the host's ranks outnumber their CPUs (SpinPolicy).
  cpu_set_t cpus;
};
static_assert(sizeof(SegHeader) <= kHeaderBytes, "segment header");

struct ShmTransport::Ring {
  alignas(64) std::atomic<uint64_t> head;  // bytes written, by the sender
  alignas(64) std::atomic<uint64_t> tail;  // bytes read, by the receiver
  char *data() { return reinterpret_cast<char *>(this) + kRingHeader; }
};

struct ShmSegment {
  std::string name;
  char *base = nullptr;
  size_t bytes = 0;
  bool linked = false;  // we created it and have not unlinked it yet
  SegHeader *hdr() const { return reinterpret_cast<SegHeader *>(base); }
  void unlink() {
    if (linked) shm_unlink(name.c_str());
    linked = false;
  }
  ~ShmSegment() {
    unlink();
    if (base) munmap(base, bytes);
  }
};

namespace {

size_t segment_bytes(int world) {
  return rings_offset(world) + size_t(world) * ShmTransport::kChannels *
                                   (kRingHeader + ring_bytes_for(world));
}

// Segments are unlinked once every rank attached; one is only left behind
// when its rank died during the bootstrap. Such names, of processes gone
// for a while, are removed at the next start (the age keeps us off the
// bootstrap of a job in another PID namespace that shares /dev/shm).
void remove_stale_segments() {
  DIR *d = opendir("/dev/shm");
  if (!d) return;
  const time_t now = time(nullptr);
  while (dirent *e = readdir(d)) {
    int pid = 0;
    if (sscanf(e->d_name, "hb-%d-", &pid) != 1 || pid <= 0) continue;
    if (kill(pid, 0) == 0 || errno != ESRCH) continue;
    struct stat st;
    const std::string path = std::string("/dev/shm/") + e->d_name;
    if (stat(path.c_str(), &st) == 0 && now - st.st_mtime > 600)
      shm_unlink((std::string("/") + e->d_name).c_str());
  }
  closedir(d);
}

// Our segment, memory reserved up front (a tmpfs page first touched past
// the size limit would be a SIGBUS); null when it cannot be made.
std::unique_ptr<ShmSegment> create_segment(int rank, int world,
                                           std::string *why) {
  auto s = std::make_unique<ShmSegment>();
  s->bytes = segment_bytes(world);
  char name[96];
  snprintf(name, sizeof name, "/hb-%d-%016llx-r%d", int(getpid()),
           static_cast<unsigned long long>(random64()), rank);
  s->name = name;
  int fd = shm_open(name, O_CREAT | O_EXCL | O_RDWR, 0600);
  if (fd < 0) {
    *why = format("shm_open(%s): %s", name, strerror(errno));
    return nullptr;
  }
  s->linked = true;
  int err = posix_fallocate(fd, 0, off_t(s->bytes));
  if (err == 0) {
    void *p =
        mmap(nullptr, s->bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p != MAP_FAILED)
      s->base = static_cast<char *>(p);
    else
      err = errno;
  }
  close(fd);
  if (!s->base) {
    *why = format("%zu bytes of shared memory (%s): %s", s->bytes, name,
                  strerror(err));
    return nullptr;  // the destructor unlinks it
  }
  SegHeader *h = new (s->base) SegHeader();
  h->magic = kMagic;
  h->nonce = random64();
  h->world = uint32_t(world);
  h->rank = uint32_t(rank);
  if (sched_getaffinity(0, sizeof h->cpus, &h->cpus) != 0)
    std::memset(&h->cpus, 0xff, sizeof h->cpus);
  for (int parity = 0; parity < 2; ++parity)
    new (s->base + kHeaderBytes + size_t(parity) * slot_bytes(world))
        SlotMeta{{0}, 0, 0, 0};
  for (size_t i = 0; i < size_t(world) * ShmTransport::kChannels; ++i) {
    char *r = s->base + rings_offset(world) +
              i * (kRingHeader + ring_bytes_for(world));
    reinterpret_cast<std::atomic<uint64_t> *>(r)->store(0);
    reinterpret_cast<std::atomic<uint64_t> *>(r + 64)->store(0);
  }
  return s;
}

// A peer's segment, if this process can open it and it holds the nonce
// the peer published (else it is some other host's, or a stale name).
std::unique_ptr<ShmSegment> open_segment(const std::string &name,
                                         uint64_t nonce, int rank, int world) {
  int fd = shm_open(name.c_str(), O_RDWR, 0);
  if (fd < 0) return nullptr;
  auto s = std::make_unique<ShmSegment>();
  s->name = name;
  s->bytes = segment_bytes(world);
  struct stat st;
  if (fstat(fd, &st) == 0 && size_t(st.st_size) == s->bytes) {
    void *p =
        mmap(nullptr, s->bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p != MAP_FAILED) s->base = static_cast<char *>(p);
  }
  close(fd);
  if (!s->base) return nullptr;
  const SegHeader *h = s->hdr();
  if (h->magic != kMagic || h->nonce != nonce || h->rank != uint32_t(rank) ||
      h->world != uint32_t(world))
    return nullptr;
  return s;
}

}  // namespace

ShmTransport::ShmTransport(int rank, int world, rdv::KV &kv,
                           const std::string &prefix, const std::string &mode,
                           int64_t timeout_ms, const std::string &host,
                           int64_t spin_us, int64_t slice_us)
    : rank_(rank),
      world_(world),
      timeout_ms_(timeout_ms),
      slice_us_(slice_us),
      ring_bytes_(ring_bytes_for(world)),
      peer_(size_t(world)) {
  if (mode != "auto" && mode != "shm" && mode != "tcp")
    fail(HB_ERR_CONFIG, "option cpu_transport: unknown transport '%s'",
         mode.c_str());
  // Every rank publishes (even with tcp) so that ranks with different
  // settings still agree on every pair.
  std::string why = "cpu_transport=tcp";
  if (mode != "tcp") {
    remove_stale_segments();
    mine_ = create_segment(rank, world, &why);
  }
  char entry[256] = "-";
  if (mine_)
    snprintf(entry, sizeof entry, "%s %016llx %.63s", mine_->name.c_str(),
             static_cast<unsigned long long>(mine_->hdr()->nonce),
             host.c_str());
  // Two gathers of O(world) requests each: every rank's segment, then every
  // rank's verdict on every segment (comm/kv_gather.h).
  const std::vector<std::string> segs =
      kv_allgather(kv, prefix + "shm/seg/", rank, world, entry, timeout_ms);
  std::string ok(size_t(world), '0');
  for (int q = 0; q < world && mine_; ++q) {
    if (q == rank) continue;
    const std::string &v = segs[size_t(q)];
    char name[128], peer_host[64];
    unsigned long long nonce = 0;
    if (sscanf(v.c_str(), "%127s %llx %63s", name, &nonce, peer_host) != 3 ||
        host.substr(0, 63) != peer_host)
      continue;
    peer_[size_t(q)] = open_segment(name, nonce, q, world);
    if (peer_[size_t(q)]) ok[size_t(q)] = '1';
  }
  // A pair shares memory when both sides opened each other's segment. The
  // whole matrix is read, so every rank reaches the same verdict for shm.
  const std::vector<std::string> oks =
      kv_allgather(kv, prefix + "shm/ok/", rank, world, ok, timeout_ms);
  auto opened = [&](int p, int q) {
    return oks[size_t(p)].size() == size_t(world) &&
           oks[size_t(p)][size_t(q)] == '1';
  };
  std::string missing;
  for (int p = 0; p < world; ++p)
    for (int q = p + 1; q < world; ++q) {
      const bool pair = opened(p, q) && opened(q, p);
      if (!pair && missing.size() < 200)
        missing += format("%s%d-%d", missing.empty() ? "" : ", ", p, q);
      world_shm_ |= pair;
      if (!pair && p == rank) peer_[size_t(q)].reset();
      if (!pair && q == rank) peer_[size_t(p)].reset();
    }
  world_all_shm_ = world > 1 && missing.empty();
  // Hosts: from the whole matrix, so every rank derives the same ones.
  leaders_.assign(size_t(world), -1);
  for (int p = 0; p < world; ++p)
    for (int q = 0; q <= p && leaders_[size_t(p)] < 0; ++q)
      if (q == p || (opened(p, q) && opened(q, p))) leaders_[size_t(p)] = q;
  for (int p = 0; p < world && !leaders_.empty(); ++p)
    for (int q = p + 1; q < world; ++q)
      if ((opened(p, q) && opened(q, p)) !=
          (leaders_[size_t(p)] == leaders_[size_t(q)])) {
        leaders_.clear();
        break;
      }
  // Every rank has attached (or given up): nothing needs the names now.
  if (mine_) mine_->unlink();
  for (int q = 0; q < world; ++q)
    if (peer_[size_t(q)]) {
      ++reached_;
      all_peers_.push_back(q);
    }
  if (mode == "shm" && !missing.empty())
    fail(HB_ERR_CONFIG,
         "option cpu_transport=shm: ranks %s cannot share memory (rank %d: "
         "%s)",
         missing.c_str(), rank, mine_ ? "segment made" : why.c_str());
  // The spin budget (see SpinPolicy), from the CPUs that this rank and
  // its shared-memory peers may run on together (a launcher that pins
  // each rank to its own core leaves every rank one CPU of its own).
  cpu_set_t host_cpus;
  CPU_ZERO(&host_cpus);
  if (mine_) host_cpus = mine_->hdr()->cpus;
  std::vector<cpu_set_t> peer_cpus;
  for (int q : all_peers_) {
    peer_cpus.push_back(peer_[size_t(q)]->hdr()->cpus);
    CPU_OR(&host_cpus, &host_cpus, &peer_cpus.back());
  }
  const bool shared =
      mine_ &&
      own_cpus_shared(mine_->hdr()->cpus, peer_cpus.data(), peer_cpus.size());
  spin_ = std::make_unique<SpinPolicy>(reached_ + 1, CPU_COUNT(&host_cpus),
                                       spin_us, read_host_runnable, shared);
  if (!reached_) mine_.reset();
}

ShmTransport::~ShmTransport() {
  if (!mine_) return;
  mine_->hdr()->state.store(2);
  for (int q = 0; q < world_; ++q)
    if (peer_[size_t(q)]) ring(q);
}

std::string ShmTransport::describe() const {
  std::string s;
  for (int q = 0; q < world_; ++q) {
    if (q == rank_) continue;
    s += format("%s%d:%s", s.empty() ? "" : " ", q, reaches(q) ? "shm" : "tcp");
  }
  return s;
}

void ShmTransport::trip() {
  tripped_.store(true);
  if (!mine_) return;
  mine_->hdr()->state.store(1);
  wake_self();
  for (int q = 0; q < world_; ++q)
    if (peer_[size_t(q)]) ring(q);
}

void ShmTransport::wake_self() {
  if (!mine_) return;
  SegHeader *h = mine_->hdr();
  h->bell.fetch_add(1);
  futex(&h->bell, FUTEX_WAKE, INT_MAX, nullptr);
}

ShmTransport::Ring *ShmTransport::ring_from(int peer, int channel) const {
  return reinterpret_cast<Ring *>(mine_->base + rings_offset(world_) +
                                  size_t(peer * kChannels + channel) *
                                      (kRingHeader + ring_bytes_));
}

ShmTransport::Ring *ShmTransport::ring_to(int peer, int channel) const {
  return reinterpret_cast<Ring *>(
      peer_[size_t(peer)]->base + rings_offset(world_) +
      size_t(rank_ * kChannels + channel) * (kRingHeader + ring_bytes_));
}

void ShmTransport::ring(int peer) {
  SegHeader *h = peer_[size_t(peer)]->hdr();
  h->bell.fetch_add(1);
  if (h->sleepers.load()) futex(&h->bell, FUTEX_WAKE, INT_MAX, nullptr);
}

uint32_t ShmTransport::doorbell() const { return mine_->hdr()->bell.load(); }

void ShmTransport::check_waitable(const std::vector<int> &watch) const {
  if (tripped_.load()) throw std::runtime_error("shared-memory wait broken");
  for (int q : watch) {
    const uint32_t st = peer_[size_t(q)]->hdr()->state.load();
    if (st)
      throw ShmPeerLost(
          q, format("rank %d: rank %d %s its shared-memory channel", rank_, q,
                    st == 2 ? "closed" : "failed and left"));
  }
}

void ShmTransport::doze(uint32_t seen, const std::vector<int> &watch,
                        std::chrono::steady_clock::time_point deadline,
                        const std::function<bool()> &ready) {
  check_waitable(watch);
  const auto now = std::chrono::steady_clock::now();
  if (now >= deadline)
    throw std::runtime_error(
        format("Timed out after %lld ms waiting for a shared-memory peer",
               static_cast<long long>(timeout_ms_)));
  const int64_t left_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now)
          .count();
  const int64_t ms = std::max<int64_t>(1, std::min(left_ms, kSliceMs));
  timespec ts{time_t(ms / 1000), long(ms % 1000) * 1000000L};
  SegHeader *h = mine_->hdr();
  h->sleepers.fetch_add(1);
  if (h->bell.load() == seen && !(ready && ready())) {
    SleepSlice slice(slice_us_);  // wakes as the shorter slice, if asked
    futex(&h->bell, FUTEX_WAIT, seen, &ts);
  }
  h->sleepers.fetch_sub(1);
}

// ------------------------------------------------------------ call board

size_t ShmTransport::board_header_bytes() const {
  return board_header_cap(world_);
}

size_t ShmTransport::board_payload_bytes() const {
  return board_payload_cap(world_);
}

char *ShmTransport::board_payload(uint64_t call) const {
  return slot_of(rank_, call) + kSlotMeta + board_header_bytes();
}

char *ShmTransport::slot_of(int rank, uint64_t call) const {
  const ShmSegment &s = rank == rank_ ? *mine_ : *peer_[size_t(rank)];
  return s.base + kHeaderBytes + size_t(call & 1) * slot_bytes(world_);
}

void ShmTransport::board_post(uint64_t call, const void *head,
                              size_t head_bytes, uint64_t head_hash,
                              const void *payload, size_t payload_bytes) {
  if (!world_all_shm_ || head_bytes > board_header_bytes() ||
      payload_bytes > board_payload_bytes())
    fail(HB_ERR_INTERNAL, "shm board: bad post (%zu + %zu bytes)", head_bytes,
         payload_bytes);
  char *slot = slot_of(rank_, call);
  auto *meta = reinterpret_cast<SlotMeta *>(slot);
  if (head_bytes) std::memcpy(slot + kSlotMeta, head, head_bytes);
  char *dst = slot + kSlotMeta + board_header_bytes();
  if (payload_bytes && payload != dst)  // written in place: no copy
    std::memcpy(dst, payload, payload_bytes);
  meta->head_bytes = head_bytes;
  meta->head_hash = head_hash;
  meta->payload_bytes = payload_bytes;
  // seq_cst, as the sleepers load after it: a peer that is not counted as
  // a sleeper yet sees the flag when it re-checks after counting itself.
  meta->call.store(call);
  for (int q : all_peers_) {
    SegHeader *h = peer_[size_t(q)]->hdr();
    if (h->sleepers.load()) {
      h->bell.fetch_add(1);
      futex(&h->bell, FUTEX_WAKE, INT_MAX, nullptr);
    }
  }
}

void ShmTransport::board_wait(uint64_t call) {
  std::vector<int> missing;  // peers whose post of `call` is not here yet
  auto ready = [&] {
    missing.clear();
    for (int q : all_peers_)
      if (reinterpret_cast<const SlotMeta *>(slot_of(q, call))->call.load() <
          call)
        missing.push_back(q);
    return missing.empty();
  };
  // Only a peer whose post is missing can fail the wait, and only if its
  // post is still missing once its closed channel was seen: a peer closes
  // after its last post (it finished the call and left), so a post made
  // before the goodbye is visible then.
  auto check = [&](const std::function<void(const std::vector<int> &)> &fn) {
    const std::vector<int> watch = missing;
    try {
      fn(watch);
    } catch (const ShmPeerLost &e) {
      if (ready()) return true;
      if (std::find(missing.begin(), missing.end(), e.peer()) != missing.end())
        throw;
    }
    return false;
  };
  if (ready()) return;
  Backoff backoff(spin_->budget());
  uint32_t spins = 0;
  while (backoff.pause()) {
    if (ready()) return;
    if ((++spins & 1023) == 0 &&
        check([&](const std::vector<int> &w) { check_waitable(w); }))
      return;
  }
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms_);
  // Posters ring only counted sleepers: doze re-checks after counting us.
  const std::function<bool()> ready_fn = ready;
  for (;;) {
    if (check([&](const std::vector<int> &w) {
          doze(doorbell(), w, deadline, ready_fn);
        }))
      return;
    if (ready()) return;
  }
}

ShmTransport::BoardSlot ShmTransport::board_slot(int rank,
                                                 uint64_t call) const {
  const char *slot = slot_of(rank, call);
  const auto *meta = reinterpret_cast<const SlotMeta *>(slot);
  // Sizes come from another process: clamp them to the slot.
  return BoardSlot{
      slot + kSlotMeta,
      std::min<size_t>(meta->head_bytes, board_header_bytes()), meta->head_hash,
      slot + kSlotMeta + board_header_bytes(),
      std::min<size_t>(meta->payload_bytes, board_payload_bytes())};
}

// ---------------------------------------------------------------- ShmP2P

ShmP2P::ShmP2P(ShmTransport &t)
    : t_(t),
      queue_(size_t(t.world_) * ShmTransport::kChannels * 2),
      head_(queue_.size(), 0) {}

ShmP2P::~ShmP2P() = default;

int ShmP2P::post(int peer, int channel, char *data, size_t bytes,
                 bool is_send) {
  if (bytes == 0 || peer == t_.rank_ || peer < 0 || peer >= t_.world_ ||
      !t_.reaches(peer) || channel < 0 || channel >= ShmTransport::kChannels)
    fail(HB_ERR_INTERNAL,
         "shm p2p: bad operation (peer %d, channel %d, %zu bytes)", peer,
         channel, bytes);
  Op op;
  op.peer = peer;
  op.channel = channel;
  op.data = data;
  op.bytes = bytes;
  op.is_send = is_send;
  const int id = int(ops_.size());
  ops_.push_back(op);
  const size_t q =
      (size_t(peer) * ShmTransport::kChannels + size_t(channel)) * 2 +
      (is_send ? 1 : 0);
  if (head_[q] == queue_[q].size()) active_.push_back(int(q));
  queue_[q].push_back(id);
  return id;
}

int ShmP2P::send(int peer, int channel, const void *data, size_t bytes) {
  const int id =
      post(peer, channel, const_cast<char *>(static_cast<const char *>(data)),
           bytes, true);
  advance(ops_[size_t(id)]);  // start at once: the peer may be waiting
  return id;
}

int ShmP2P::recv(int peer, int channel, void *data, size_t bytes) {
  return post(peer, channel, static_cast<char *>(data), bytes, false);
}

bool ShmP2P::advance(Op &op) {
  if (op.complete) return false;
  // Only the oldest op of a stream may move.
  const size_t qi =
      (size_t(op.peer) * ShmTransport::kChannels + size_t(op.channel)) * 2 +
      (op.is_send ? 1 : 0);
  if (&ops_[size_t(queue_[qi][head_[qi]])] != &op) return false;
  const size_t cap = t_.ring_bytes_, total = pad8(op.bytes);
  bool moved = false;
  if (op.is_send) {
    ShmTransport::Ring *r = t_.ring_to(op.peer, op.channel);
    uint64_t h = r->head.load(std::memory_order_relaxed);
    for (;;) {
      const uint64_t free = cap - (h - r->tail.load(std::memory_order_acquire));
      if (!op.header) {
        if (free < 8) break;
        const uint64_t len = op.bytes;
        std::memcpy(r->data() + h % cap, &len, 8);
        h += 8;
        op.header = true;
      } else {
        if (op.done == total || free == 0) break;
        size_t n = std::min(
            {size_t(free), total - op.done, cap - size_t(h % cap), cap / 4});
        if (op.done < op.bytes)
          std::memcpy(r->data() + h % cap, op.data + op.done,
                      std::min(n, op.bytes - op.done));
        h += n;
        op.done += n;
      }
      r->head.store(h, std::memory_order_release);
      moved = true;
      t_.ring(op.peer);
    }
  } else {
    ShmTransport::Ring *r = t_.ring_from(op.peer, op.channel);
    uint64_t tl = r->tail.load(std::memory_order_relaxed);
    for (;;) {
      const uint64_t avail = r->head.load(std::memory_order_acquire) - tl;
      if (!op.header) {
        if (avail < 8) break;
        uint64_t len;
        std::memcpy(&len, r->data() + tl % cap, 8);
        if (len != op.bytes)
          fail(HB_ERR_INTERNAL,
               "shm p2p: rank %d sent %llu bytes on channel %d where rank %d "
               "expected %zu",
               op.peer, static_cast<unsigned long long>(len), op.channel,
               t_.rank_, op.bytes);
        tl += 8;
        op.header = true;
      } else {
        if (op.done == total || avail == 0) break;
        size_t n = std::min(
            {size_t(avail), total - op.done, cap - size_t(tl % cap), cap / 4});
        if (op.done < op.bytes)
          std::memcpy(op.data + op.done, r->data() + tl % cap,
                      std::min(n, op.bytes - op.done));
        tl += n;
        op.done += n;
      }
      r->tail.store(tl, std::memory_order_release);
      moved = true;
      t_.ring(op.peer);
    }
  }
  if (op.header && op.done == total) {
    op.complete = true;
    ++head_[qi];
  }
  return moved;
}

bool ShmP2P::progress() {
  bool moved = false;
  for (size_t i = 0; i < active_.size();) {
    const size_t q = size_t(active_[i]);
    while (head_[q] < queue_[q].size()) {
      Op &op = ops_[size_t(queue_[q][head_[q]])];
      moved |= advance(op);
      if (!op.complete) break;
    }
    if (head_[q] == queue_[q].size()) {
      active_[i] = active_.back();
      active_.pop_back();
    } else {
      ++i;
    }
  }
  return moved;
}

void ShmP2P::wait_until(const std::function<bool()> &done) {
  Backoff backoff(t_.spin_->budget());
  bool have_deadline = false;
  while (!done()) {
    const uint32_t seen = t_.doorbell();
    if (progress()) {
      backoff.reset();
      have_deadline = false;
      continue;
    }
    if (done()) break;
    if (backoff.pause()) continue;
    if (!have_deadline) {
      deadline_ = std::chrono::steady_clock::now() +
                  std::chrono::milliseconds(t_.timeout_ms_);
      have_deadline = true;
    }
    watch_.clear();
    for (int q : active_) {
      const int peer = q / 2 / ShmTransport::kChannels;
      if (std::find(watch_.begin(), watch_.end(), peer) == watch_.end())
        watch_.push_back(peer);
    }
    try {
      t_.doze(seen, watch_, deadline_);
    } catch (const ShmPeerLost &) {
      // A peer closes its channel after its last send (it finished the call
      // and left): take what its ring holds before calling it lost.
      if (progress() || done()) continue;
      throw;
    }
  }
}

void ShmP2P::wait(int id) {
  if (t_.tripped_.load()) throw std::runtime_error("shared-memory wait broken");
  wait_until([&] { return ops_.at(size_t(id)).complete; });
}

void ShmP2P::pump(const std::atomic<bool> &stop) {
  wait_until([&] { return stop.load() || active_.empty(); });
}

void ShmP2P::finish() {
  wait_until([&] { return active_.empty(); });
}

}  // namespace comm
}  // namespace hb
