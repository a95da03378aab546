#include "launcher/launch_options.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "abi/error.h"

namespace hb {
namespace launcher {
namespace {

int64_t parse_int(const std::string &opt, const std::string &v, int64_t lo,
                  int64_t hi) {
  char *end = nullptr;
  errno = 0;
  long long x = std::strtoll(v.c_str(), &end, 10);
  if (v.empty() || *end != '\0' || errno != 0 || x < lo || x > hi)
    fail(HB_ERR_INVALID_ARGUMENT,
         "option %s: '%s' is not an integer in [%lld, %lld]", opt.c_str(),
         v.c_str(), static_cast<long long>(lo), static_cast<long long>(hi));
  return x;
}

int64_t parse_seconds_as_ms(const std::string &opt, const std::string &v) {
  char *end = nullptr;
  errno = 0;
  double s = std::strtod(v.c_str(), &end);
  if (v.empty() || *end != '\0' || errno != 0 || !std::isfinite(s) || s <= 0 ||
      s > 365.0 * 86400)
    fail(HB_ERR_INVALID_ARGUMENT,
         "option %s: '%s' is not a positive number of seconds", opt.c_str(),
         v.c_str());
  return static_cast<int64_t>(std::ceil(s * 1000));
}

}  // namespace

LaunchOptions parse_command_line(int argc, const char *const *argv) {
  LaunchOptions o;
  int i = 1;
  // "--opt value" and "--opt=value" are both accepted.
  auto value_of = [&](const std::string &arg, const std::string &name,
                      std::string *value) -> bool {
    if (arg == name) {
      if (i + 1 >= argc)
        fail(HB_ERR_INVALID_ARGUMENT, "option %s needs a value", name.c_str());
      *value = argv[++i];
      return true;
    }
    if (arg.compare(0, name.size() + 1, name + "=") == 0) {
      *value = arg.substr(name.size() + 1);
      return true;
    }
    return false;
  };
  for (; i < argc; ++i) {
    std::string arg = argv[i], v;
    if (arg == "--") {
      ++i;
      break;
    }
    if (arg.empty() || arg[0] != '-') break;  // the program starts here
    if (arg == "-h" || arg == "--help") {
      o.help = true;
    } else if (value_of(arg, "-n", &v) || value_of(arg, "--nproc", &v)) {
      o.nproc = static_cast<int>(parse_int("-n", v, 1, 4096));
    } else if (value_of(arg, "--host", &v)) {
      if (v.empty())
        fail(HB_ERR_INVALID_ARGUMENT, "option --host: empty address");
      o.host = v;
    } else if (value_of(arg, "--port", &v)) {
      o.port = static_cast<int>(parse_int("--port", v, 0, 65535));
    } else if (value_of(arg, "--timeout", &v)) {
      o.timeout_ms = parse_seconds_as_ms("--timeout", v);
    } else if (value_of(arg, "--grace-ms", &v)) {
      o.grace_ms = parse_int("--grace-ms", v, 0, INT64_C(3600000));
    } else if (value_of(arg, "--max-restarts", &v)) {
      o.max_restarts =
          static_cast<int>(parse_int("--max-restarts", v, 0, 1000000));
    } else if (value_of(arg, "--min-nproc", &v)) {
      o.min_nproc = static_cast<int>(parse_int("--min-nproc", v, 1, 4096));
    } else if (value_of(arg, "--bind-to", &v)) {
      if (v != "auto" && v != "core" && v != "none")
        fail(HB_ERR_INVALID_ARGUMENT,
             "option --bind-to: '%s' is not auto, core or none", v.c_str());
      o.bind_to = v;
    } else if (value_of(arg, "--ps", &v)) {
      o.num_ps = static_cast<int>(parse_int("--ps", v, 0, 1024));
    } else if (value_of(arg, "--join", &v)) {
      if (v.empty()) fail(HB_ERR_INVALID_ARGUMENT, "option --join: empty job");
      o.join = v;
    } else if (arg == "-v" || arg == "--verbose") {
      o.verbose = true;
    } else if (arg == "--evaluator") {
      o.evaluator = true;
    } else if (arg == "--no-prefix") {
      o.prefix = false;
    } else if (arg == "--no-tf-config") {
      o.use_tf_config = false;
    } else {
      fail(HB_ERR_INVALID_ARGUMENT, "unknown option '%s'", arg.c_str());
    }
  }
  for (; i < argc; ++i) o.command.emplace_back(argv[i]);
  if (o.min_nproc > 0 && o.nproc > 0 && o.min_nproc > o.nproc)
    fail(HB_ERR_INVALID_ARGUMENT,
         "option --min-nproc: %d is more than the %d workers of -n",
         o.min_nproc, o.nproc);
  if (o.min_nproc > 0 && o.max_restarts == 0)
    fail(HB_ERR_INVALID_ARGUMENT,
         "option --min-nproc needs --max-restarts: it applies when the job "
         "is started again");
  // A ps job restarts a failed worker alone, in the same world: there is
  // no smaller one to go on with.
  if (o.min_nproc > 0 && o.num_ps > 0)
    fail(HB_ERR_INVALID_ARGUMENT,
         "option --min-nproc does not apply with --ps: a failed worker is "
         "started again alone, and one that cannot be is left out anyway");
  // A joiner adds workers to a job that another hbrun runs: it starts no
  // ps task, evaluator or store of its own, and the job is not its to
  // shrink.
  if (!o.join.empty()) {
    const char *refused = o.num_ps > 0      ? "--ps"
                          : o.evaluator     ? "--evaluator"
                          : o.min_nproc > 0 ? "--min-nproc"
                          : o.port != 0     ? "--port"
                          : !o.host.empty() ? "--host"
                                            : nullptr;
    if (refused)
      fail(HB_ERR_INVALID_ARGUMENT,
           "option %s does not apply with --join: the running job's hbrun "
           "serves its ps tasks, evaluator and store",
           refused);
  }
  if (!o.help && o.command.empty())
    fail(HB_ERR_INVALID_ARGUMENT,
         "no program given (usage: hbrun [options] -- program args...)");
  return o;
}

const char *usage_text() {
  return R"(usage: hbrun [options] -- program [args...]

Starts the workers of one hb job on this machine, serves their rendezvous
store, prefixes their output with their rank and supervises them.

Workers on this machine:
  -n, --nproc N     N CPU workers.
  (no -n)           One worker per GPU listed in CUDA_VISIBLE_DEVICES (each
                    worker gets CUDA_VISIBLE_DEVICES=<its entry>) or, if that
                    is unset, in NVIDIA_VISIBLE_DEVICES (a container's list:
                    worker i gets CUDA_VISIBLE_DEVICES=i; "all" counts the
                    /dev/nvidia<N> nodes, else the GPUs CUDA sees). Neither: an error.

Each worker gets HB_RANK, HB_WORLD_SIZE, HB_LOCAL_RANK, HB_LOCAL_WORLD_SIZE,
HB_RENDEZVOUS=host:port, HB_RENDEZVOUS_SERVED=1 (so rank 0 does not serve a
store of its own) and HB_RESTART_COUNT (0 unless --max-restarts started the
job, or with --ps the worker, again); the same as torchrun's RANK,
WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR (the rendezvous host)
and MASTER_PORT (a port for the framework's own store: a free one on one
machine, the rendezvous port + 1 with TF_CONFIG), so torch.distributed's
env:// works unchanged; PYTHONUNBUFFERED=1 unless set; with more than one
worker, OMP_NUM_THREADS=max(1, CPUs / workers) unless set (CPUs: those hbrun
may run on), so that the workers' OpenMP and BLAS thread pools (OpenBLAS and
MKL follow OMP_NUM_THREADS unless their own variable is set) do not
oversubscribe the machine, as torchrun does; and stdin from /dev/null (local
rank 0 keeps hbrun's stdin when that is not a terminal). Each worker runs in
its own process group; hbrun kills the workers if hbrun itself dies
(PR_SET_PDEATHSIG).

CPU binding:
  --bind-to auto    (default) Each CPU worker (-n) is bound to its own slice
                    of CPUs/N consecutive CPUs of those hbrun may run on, as
                    mpirun's --bind-to core does, when there are at least as
                    many CPUs as workers; with more workers than CPUs,
                    worker i gets CPU i mod CPUs. Ranks that share memory
                    then never share a CPU (or share it with the fewest),
                    and do not migrate away from their caches. GPU workers
                    are not bound.
  --bind-to core    As auto, GPU workers too.
  --bind-to none    Bind nothing: the workers inherit hbrun's affinity.

Rendezvous (single machine):
  --host ADDR       Address the store listens on (default 127.0.0.1; with
                    0.0.0.0 workers connect to 127.0.0.1).
  --port P          Its port (default 0: a free port).
  The store's token is HB_RENDEZVOUS_TOKEN when set; its heartbeat, peer
  timeout and frame cap follow HB_HEARTBEAT_INTERVAL_MS,
  HB_PEER_TIMEOUT_MS and HB_MAX_FRAME_BYTES, as the workers' do.

Several machines (TF_CONFIG set and non-empty, unless --no-tf-config):
  Run one hbrun per TF_CONFIG task, each with the same -n (or the same
  number of GPUs). The tasks of the collective world are the chief
  (position 0) followed by the workers in order (worker i at position i+1,
  or i without a chief). With L local workers per task, the task at
  position p runs global ranks p*L .. p*L+L-1 (local rank l is rank p*L+l)
  and HB_WORLD_SIZE = (number of chief + worker tasks) * L; the chief's
  local rank 0 is rank 0. The rendezvous address is the chief's (else
  worker 0's) host:port from TF_CONFIG (--port replaces the port). The
  hbrun at position 0 serves the store there, bound to --host (default
  0.0.0.0); the others serve nothing and point their workers at it.
  Open that port and the next (MASTER_PORT) on the chief's host, and let
  the hosts reach each other on any port (the ranks' direct connections).
  Each rank gives its peers the address of its interface that routes to
  the rendezvous host (HB_SOCKET_IFNAME or HB_CPU_HOST to choose).
  A ps or evaluator task is not part of the world: hbrun runs the program
  once, without HB_* variables, prefixed "[ps:<index>]" (or evaluator),
  so it reads its role from TF_CONFIG. TF_CONFIG is passed on unchanged.

Restarts (one machine):
  --max-restarts N  When a worker fails, stop the others (as below) and start
                    the whole job again, up to N times (default 0: never).
                    Each start gets a fresh rendezvous store (on a new port
                    unless --port fixes it), so nothing of the failed start's
                    keys or broken state reaches the new one; every worker
                    gets HB_RESTART_COUNT (0 on the first start, then 1, 2..;
                    also as torchrun's TORCHELASTIC_RESTART_COUNT, with
                    TORCHELASTIC_MAX_RESTARTS=N). The program resumes from
                    its last checkpoint: hb_checkpoint_restore_latest (see
                    docs/fault-tolerance.md). No restart after a signal to
                    hbrun or --timeout; after the last one hbrun exits with
                    the root cause's status (below). With --ps a failed
                    worker starts again alone (below).
  --min-nproc M     With --max-restarts: a worker that cannot be started
                    again is left out and the job goes on with the others,
                    renumbered 0..n-1 in a smaller world, down to M workers
                    (tables and readers re-shard at the restore). A worker
                    cannot be started when, on a restart, its program cannot
                    be run or it fails before it joins the rendezvous store
                    (a broken device, a crash at start). Tests:
                    HB_TEST_FAIL_START=R makes the first start's rank R fail
                    to start on every restart. Not with --ps.
  With TF_CONFIG (several machines) these options are refused: restart
  every task's hbrun from the scheduler (docs/fault-tolerance.md).

Evaluator (one machine):
  --evaluator       Also start the program once as the job's evaluator,
                    outside the world, prefixed "[evaluator]": it gets what
                    a TF_CONFIG evaluator task sees (TF_CONFIG with the
                    workers as the cluster and task {"type": "evaluator",
                    "index": 0}; no HB_RANK, RANK or other launcher's rank
                    variables; HB_RESTART_COUNT), so hb_context_task_type
                    says "evaluator". It follows the job's checkpoints
                    (hb_evaluator_*, docs/evaluator.md) and ends when
                    training has called hb_checkpoint_finish; hbrun waits
                    for it. It is supervised as a worker: when it fails the
                    job stops (and restarts with --max-restarts, the
                    evaluator too); when a worker fails it is stopped. With
                    --ps it also gets HB_PS_HOSTS (the job's ps tasks; it
                    reads their tables from the checkpoints).

Parameter servers (one machine; docs/parameter-servers.md):
  --ps N            Also start N ps tasks running the same program: each
                    gets HB_TASK_TYPE=ps, HB_TASK_ID=<i> and no HB_RANK
                    (its hb_context_serve serves until the workers are
                    done), prefixed "[ps:<i>]"; every process gets
                    HB_PS_HOSTS (127.0.0.1 and a free port per ps task).
                    In this mode a failed worker stops nobody: the ps tasks
                    and the other workers go on. With --max-restarts it
                    starts again alone and rejoins the ps tasks (with
                    HB_RESTART_COUNT one more than its last start's); the
                    N restarts are for the workers and the job together.
                    Without restarts left the others go on without it, and
                    hbrun exits with its status at the end. A failed ps
                    task stops the job, and hbrun exits with that task's
                    status; with restarts left, the whole job starts again
                    (ps tasks included, on new ports) and resumes from its
                    last checkpoint, as above. So does a failed worker that
                    had joined the rendezvous store hbrun serves (the
                    workers formed a collective world, e.g. for job
                    checkpoints): its loss broke that world, which a worker
                    restarted alone could not join. Once no worker is
                    left (none to restart), the ps tasks get 2 s to end
                    by themselves, then SIGTERM (not a failure); workers
                    added with --join are waited for first.
                    The job is known by its id, hbrun's pid (-v prints
                    it): hbrun writes the job file
                    $HB_JOB_DIR/hbrun-<pid>.job (else $TMPDIR, else /tmp)
                    while it runs, with the ps tasks' addresses and the
                    next free worker rank.
  --join JOB        Add -n workers (default 1) to the running --ps job JOB
                    (its id, or the path of its job file) instead of
                    starting a job: they get the next free ranks (HB_RANK
                    = the ranks taken so far, HB_WORLD_SIZE = that rank +
                    1, the world the ps tasks grow to), the job's
                    HB_PS_HOSTS and no rendezvous (no collective world:
                    a joiner takes its work from the job's dynamic splits,
                    docs/parameter-servers.md). Run it with the program,
                    arguments and HB_* settings the job's workers have.
                    This hbrun supervises them (prefixes, signals,
                    --timeout, --max-restarts: a failed one starts again
                    alone, with the same rank, and rejoins); exits with
                    their status. An error (exit 2) when the job is not
                    running. Not with --ps, --evaluator, --min-nproc,
                    --host or --port.

Output and supervision:
  --no-prefix       Workers write straight to hbrun's stdout and stderr.
                    Otherwise each line is printed as "[<rank>] line" (stdout
                    to stdout, stderr to stderr; whole lines, never
                    interleaved; a last partial line is flushed at exit).
  --timeout S       After S seconds (decimals allowed) stop every worker and
                    exit 124.
  --grace-ms MS     How long stopped workers get between SIGTERM and
                    SIGKILL (default 3000).
  --no-tf-config    Ignore TF_CONFIG (single-machine launch).
  -v, --verbose     Describe the launch (ranks, rendezvous) on stderr.
  -h, --help        This text.

SIGINT, SIGTERM and SIGHUP are forwarded to every worker's process group;
workers still running --grace-ms later (or at a second signal) get SIGKILL.
When a worker (with --ps: a ps task) exits non-zero or is killed by a
signal, the others get SIGTERM (then SIGKILL after --grace-ms) and hbrun
exits with the status of the worker that failed first (the root cause):
its exit code, or 128+signal. When a rank dies, the ranks talking to it
fail with HB_ERR_PEER_FAILED and may exit before hbrun has reaped it; the
rank the rendezvous store saw leave first is the root cause whatever order
hbrun reaped them in ("hbrun: rank R ... first: the root cause"), and
workers that hbrun itself stopped never are. All workers exiting 0: exit
0. A rank the store declares lost (its connection dropped, or its
heartbeats stopped for HB_PEER_TIMEOUT_MS) is reported as "hbrun: rank R
lost (rendezvous): why" by the hbrun that serves the store; the other ranks'
calls then fail with HB_ERR_PEER_FAILED, and their exit stops the job as
above. A stopped worker gets SIGCONT with the SIGTERM. hbrun's own errors:
2 (usage, configuration), 126/127 (the program cannot be run / is not
found).
)";
}

}  // namespace launcher
}  // namespace hb
