// Every option hb knows, in documentation order. The environment override
// of option `foo_bar` is HB_FOO_BAR. docs/ lists them from this table
// (hb_option_describe), so the doc strings are user-facing.
#include <cstdint>

#include "context/options.h"

namespace hb {

const std::vector<OptionSpec> &option_table() {
  static const std::vector<OptionSpec> table = {
      {"timeout_ms", OptionType::kInt, "300000", nullptr, 1, INT64_C(86400000),
       "Timeout of every blocking call (collectives, barriers, rendezvous "
       "gets), in milliseconds."},
      {"connect_timeout_ms", OptionType::kInt, "60000", nullptr, 1,
       INT64_C(86400000),
       "How long hb_context_create waits for the rendezvous server and for "
       "every rank to arrive, in milliseconds."},
      {"heartbeat_interval_ms", OptionType::kInt, "500", nullptr, 10, 600000,
       "Interval between liveness heartbeats to the rendezvous server."},
      {"peer_timeout_ms", OptionType::kInt, "5000", nullptr, 100,
       INT64_C(86400000),
       "A rank silent for this long is declared lost: every other rank's "
       "calls fail with HB_ERR_PEER_FAILED. A closed connection is detected "
       "at once."},
      {"rendezvous", OptionType::kString, "", nullptr, 0, 0,
       "host:port of the rendezvous store (set by hbrun; otherwise rank 0 "
       "listens there)."},
      {"rendezvous_token", OptionType::kString, "", nullptr, 0, 0,
       "Shared secret: when set, clients that do not present it are refused "
       "with HB_ERR_PERMISSION."},
      {"max_frame_bytes", OptionType::kInt, "67108864", nullptr, 1024,
       INT64_C(1073741824),
       "Largest rendezvous frame accepted; a larger or malformed frame closes "
       "that connection."},
      {"log_level", OptionType::kEnum, "warn", "error|warn|info|debug", 0, 0,
       "Verbosity of hb's messages on stderr."},
      {"grad_nbuckets", OptionType::kInt, "0", nullptr, 0, 1 << 20,
       "hb_allreduce_many: split the tensors into this many buckets (as "
       "HybridBackend's HB_GRAD_NBUCKETS); 0 uses grad_bucket_bytes."},
      {"grad_bucket_bytes", OptionType::kInt, "16777216", nullptr, 1024,
       INT64_C(1) << 40,
       "hb_allreduce_many: target bucket size in bytes when grad_nbuckets is "
       "0."},
      {"cpu_allreduce", OptionType::kEnum, "auto",
       "auto|rank_order|ring|ring_chunked|halving_doubling|bcube", 0, 0,
       "Algorithm for CPU allreduce, reduce_scatter and allreduce_many. "
       "auto = rank_order: hb's own, over Gloo's TCP pairs with no copy of "
       "the caller's buffers; every element is reduced in rank order, so "
       "every rank gets the same bits and allreduce_many and reduce_scatter "
       "match per-tensor allreduce calls bit for bit. The others run Gloo's "
       "algorithm of that name on a scratch copy (halving_doubling keeps "
       "the same-bits promises; ring and ring_chunked with more than two "
       "ranks do not; bcube needs a power-of-two world)."},
      {"cpu_piece_bytes", OptionType::kInt, "4194304", nullptr, 4096,
       INT64_C(1) << 30,
       "rank_order: blocks travel in pieces of this many bytes, so a rank "
       "reduces one piece while the next arrives."},
      {"cpu_staged_bytes", OptionType::kInt, "2097152", nullptr, 0,
       INT64_C(1) << 30,
       "rank_order: buffers up to this many bytes go through pair buffers "
       "registered once (one hop per message, plus a copy in and out; "
       "memory 4-6x this per rank, allocated on first use); larger ones "
       "through per-call buffers with no copy."},
      {"cpu_one_round_bytes", OptionType::kInt, "65536", nullptr, 0,
       INT64_C(1) << 30,
       "rank_order: when bytes x (world - 1) is at most this, every rank "
       "sends its whole buffer to every peer and reduces all of it (one "
       "round, same bits) instead of reduce-scatter + allgather."},
      {"cpu_transport", OptionType::kEnum, "auto", "auto|shm|tcp", 0, 0,
       "CPU collectives between ranks of one host: auto = shared memory for "
       "every pair of ranks that advertise the same address and can open "
       "each other's segment (checked with a nonce, so separate containers "
       "or network namespaces fall back), TCP for the others; shm = the "
       "same, but a pair that cannot "
       "share memory is an error; tcp = TCP (Gloo) only. Results are the "
       "same bits on every transport."},
      {"cpu_shm_reduce", OptionType::kEnum, "auto", "auto|board|rings", 0, 0,
       "Where every pair of ranks shares memory: how reductions run that "
       "are larger than 16 KiB (board) or than the call board's 64 KiB "
       "inline payload (rings). board = piece by piece through each rank's "
       "staging area on the board: every rank folds its share of a piece "
       "straight from the peers' slots, then copies the others' results "
       "out; rings = the rank-order reduce-scatter and gather over the "
       "shared-memory rings; auto = board from 3 ranks, rings at 2 (where "
       "they measured faster). Same bits either way."},
      {"cpu_alltoallv", OptionType::kEnum, "auto", "auto|direct|hier", 0, 0,
       "How alltoallv (and so every embedding collection's exchange) routes "
       "in a world of several hosts: hier = through one leader per host "
       "(each rank sends its leader its blocks for the other hosts over "
       "shared memory, leaders exchange one message per pair of hosts over "
       "TCP, and hand each rank its blocks): a rank sends hosts - 1 network "
       "messages per call (leaders) or none instead of world - 1; direct = "
       "every pair; auto = hier from 64 ranks when the world spans several "
       "hosts and some host has several (below that its two extra hops "
       "and the leader's copies cost about what it saves). Needs ranks that "
       "share memory (not "
       "cpu_transport=tcp). Same bits either way."},
      {"cpu_allreduce_route", OptionType::kEnum, "auto", "auto|direct|hier", 0,
       0,
       "How the rank-order reductions (allreduce, fused buckets, "
       "reduce_scatter; cpu_allreduce=auto|rank_order) route in a world of "
       "several hosts: hier = each of their two alltoall-shaped rounds "
       "through one leader per host, as cpu_alltoallv=hier (a rank sends "
       "2 x (hosts - 1) network messages per allreduce, or per "
       "cpu_piece_bytes of it, (leaders) or none instead of up to "
       "2 x (world - 1)); the leaders carry every rank's "
       "contribution and each block is still folded rank 0, 1, 2, ..., so "
       "the result is the same bits as direct; the leaders' messages go on "
       "registered pair buffers when the call fits them. direct = every "
       "pair; auto = hier from 8 ranks when the world spans several hosts "
       "and some host has several (measured no slower than direct from 2 "
       "hosts x 2 ranks). Needs ranks that share memory (not "
       "cpu_transport=tcp)."},
      {"cpu_wait_spin_us", OptionType::kInt, "-1", nullptr, -1, 1000000,
       "How long a CPU collective's wait for a same-host peer spins before "
       "it sleeps on its futex (it never yields: a yield while another "
       "task is runnable can lose the core for a scheduler tick). -1 = "
       "auto: 0 (sleep at once) where the rank's own CPUs are shared "
       "with other ranks of the job (the ranks whose affinity masks meet "
       "its own outnumber its CPUs: hbrun's round-robin binding of more "
       "ranks than CPUs); 5 where the ranks of this host outnumber the "
       "CPUs they may run on otherwise; else 2000 while the host's "
       "runnable tasks (/proc/loadavg, sampled every 20 ms at most) fit "
       "those CPUs, 5 while they do not (a long spin would take the "
       "waited-for peer's CPU share). >= 0: that spin, fixed (0: no spin "
       "at all)."},
      {"cpu_wait_slice_us", OptionType::kInt, "0", nullptr, 0, 100000,
       "> 0: while a CPU collective's wait sleeps (and while an "
       "asynchronous exchange's progress thread lives), the thread asks the "
       "kernel for a scheduler slice of that many us (Linux >= 6.12, "
       "SCHED_OTHER / SCHED_BATCH: sched_attr.sched_runtime, clamped to "
       "100..100000), and gets its own back when it wakes: a woken thread "
       "with a shorter slice than the task running on its CPU preempts it "
       "at once, where it could otherwise wait for that task's slice (a "
       "nice-19 busy loop's too). 0 = the kernel's slices, unchanged; "
       "ignored where the kernel has no custom slices."},
      {"cpu_async_exchange", OptionType::kInt, "1", nullptr, -1, 1,
       "1: a host embedding collection exchanges over a CPU communicator "
       "and progress thread of its own, so the rounds that "
       "hb_collection_lookup_start posts run while the caller computes "
       "(and beside the context's own collectives); the thread sleeps "
       "while nothing is posted; hb_allreduce_start runs its allreduces "
       "likewise, on a communicator and thread of their own. 0: every "
       "round runs in the calling thread, on the context's communicator "
       "(hb_allreduce_start then reduces before it returns). -1 = auto: "
       "as 1 where the rank has 2 CPUs (the fewer of those it may run on "
       "and the host's online CPUs / its ranks there); elsewhere each "
       "posted job runs in the calling thread, over the same "
       "communicators, unless other tasks keep that thread off its CPU "
       "(its run delay, less the progress threads' CPU time, over 5 % of "
       "50 ms windows; back after 1 s below), when it goes to the thread. "
       "Each rank decides "
       "alone; hb_allreduce_wait reports a failure in every mode. Same "
       "bits either way. Read when a collection is created, and by every "
       "hb_allreduce_start."},
      {"cpu_check_calls", OptionType::kEnum, "auto", "auto|1|0", 0, 0,
       "1: every CPU collective checks that all ranks made the same call "
       "(operation, dtype, op, root, counts, call number) and fails with "
       "HB_ERR_MISMATCH on every rank otherwise; 0 skips the check "
       "(mismatched calls then fail in the transport, or hang until "
       "timeout_ms); auto: 1 in debug builds, and in release (NDEBUG) "
       "builds 1 where every pair of ranks shares memory (the check rides "
       "along with the call's data, nearly free) and 0 over TCP (there it "
       "is a round of its own, about one small-message latency per call)."},
      {"cpu_host", OptionType::kString, "", nullptr, 0, 0,
       "Address this rank's CPU (Gloo TCP) transport listens on and gives "
       "its peers. Empty: the first address of an interface matching "
       "socket_ifname; else 127.0.0.1 when the rendezvous is on loopback "
       "and every rank is on this host; else the address of the interface "
       "that routes to the rendezvous host, or the first interface other "
       "than loopback when that route is loopback (docs/multi-host.md)."},
      {"socket_ifname", OptionType::kString, "", nullptr, 0, 0,
       "Interfaces whose address this rank gives its peers, as "
       "NCCL_SOCKET_IFNAME: name prefixes separated by commas (eth,ens), "
       "=names for exact names, ^names to exclude; IPv4 first. Empty: "
       "the interface that routes to the rendezvous host."},
      {"checkpoint_dir", OptionType::kString, "", nullptr, 0, 0,
       "Job checkpoint directory used by hb_checkpoint_create when its "
       "config names none (docs/fault-tolerance.md)."},
      {"checkpoint_job_id", OptionType::kString, "", nullptr, 0, 0,
       "Identity of the job written to (and checked against) the checkpoint "
       "directory's JOB file when hb_checkpoint_config.job_id is NULL: a "
       "directory of another job is refused."},
      {"ps_hosts", OptionType::kString, "", nullptr, 0, 0,
       "Parameter-server mode: host:port of every ps task, comma-separated "
       "(ps task i listens on entry i; an empty entry is HB_ERR_CONFIG). Set "
       "by hbrun --ps; TF_CONFIG's \"ps\" list gives it otherwise. Empty: no "
       "ps tasks (collective mode). "
       "See docs/parameter-servers.md."},
      {"staleness", OptionType::kInt, "0", nullptr, 0, 1000000,
       "Parameter-server mode: no worker runs more than this many steps "
       "(pushes of a table) ahead of the slowest live worker (stale-"
       "synchronous parallel). 0: synchronous, the ps sums a step's "
       "gradients of all live workers in rank order before one optimizer "
       "step (the same bits as collective mode). Read by the ps tasks. "
       "staleness_bound=age makes it a bound on versions instead."},
      {"staleness_bound", OptionType::kEnum, "steps", "steps|age", 0, 0,
       "Parameter-server mode, what staleness bounds. steps: no worker more "
       "than staleness pushes ahead of the slowest live one (workers wait). "
       "age: nobody waits; each ps table counts its updates (its version), "
       "a push carries the version its pull saw, and a push older than "
       "staleness versions is applied with its gradient (SGD: learning "
       "rate) scaled by 1/(1+age). staleness 0 is synchronous either way. "
       "Read by the ps tasks."},
      {"ps_split_samples", OptionType::kInt, "0", nullptr, 0,
       INT64_C(4611686018427387904),
       "Parameter-server mode, dynamic splits: the input's samples [0, N) "
       "are cut into splits of ps_split_size that ps task 0 hands out on "
       "demand, a fast worker taking more (docs/parameter-servers.md, "
       "\"Dynamic splits\"). 0: off. Read by ps task 0."},
      {"ps_split_size", OptionType::kInt, "1024", nullptr, 1,
       INT64_C(4611686018427387904),
       "Parameter-server mode, dynamic splits: samples per split."},
      {"ps_split_epochs", OptionType::kInt, "1", nullptr, 1, 1000000,
       "Parameter-server mode, dynamic splits: epochs over the samples; each "
       "epoch hands its splits out in an order drawn from (ps_split_seed, "
       "epoch)."},
      {"ps_split_seed", OptionType::kInt, "0", nullptr, 0,
       INT64_C(9223372036854775807),
       "Parameter-server mode, dynamic splits: the seed of every epoch's "
       "split order (the same seed, the same order when nothing fails)."},
      {"ps_collective", OptionType::kBool, "false", nullptr, 0, 0,
       "Parameter-server mode: the workers form their collective world at "
       "hb_context_create. Off by default: they form it on first use (a "
       "collective, a barrier, a worker-sharded table, a merged metric), "
       "and a job that never uses one survives a lost worker (a world "
       "cannot lose a member)."},
      {"timeline", OptionType::kString, "", nullptr, 0, 0,
       "Record a Chrome-trace timeline (Perfetto, chrome://tracing) of every "
       "collective, metric merge, data sync and embedding phase: each rank "
       "writes path with its rank inserted before .json (trace.json -> "
       "trace.0.json; else path.RANK.json), appended as it fills and "
       "completed when the context is destroyed; read when the context is "
       "created. Empty: off (no cost). See the guide's Timeline section."},
      {"delta_keep_versions", OptionType::kInt, "16", nullptr, 1, 1 << 20,
       "hb_embedding_export_version: how many of a table's latest versioned "
       "exports a delta may start from. The table keeps the ids it evicted "
       "since the oldest of them (8 bytes each); a delta from an older "
       "version is refused (export a full version)."},
  };
  return table;
}

const OptionSpec *find_option(const std::string &name) {
  for (const auto &spec : option_table())
    if (name == spec.name) return &spec;
  return nullptr;
}

}  // namespace hb
