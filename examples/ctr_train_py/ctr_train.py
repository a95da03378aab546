"""End-to-end CTR training with hb from Python: examples/ctr_train/ctr_train.cc
in numpy over the `hb` binding.

    hbrun -n 4 -- python3 ctr_train.py [--train-samples N] [--batch B] [--out DIR] ...

The same model and data as the C++ demo: criteo-synth samples (synth_data.py,
the same samples as synth_data.h) with a planted logistic model, 26 sharded
embedding tables plus a wide table, and an MLP whose backward pass is
written by hand. Per step: hb data_sync where ranks may run out of data
apart (--files N: uneven shards; --data); on even shards every rank knows
every rank's shard, so the shard plan decides alike without that round
(as the C++ demo; --data-sync: the round anyway), one
collection lookup for all 27 features (hb.Collection: the 26 one-hot
categorical features and the wide feature's 26 ids per sample, sum-pooled),
dense gradients through allreduce_many, sparse gradients through one
collection apply_gradients (it reuses the lookup's plan). The dense
sum rides in the sparse update's own exchange (apply_gradients(dense=...);
--dense-allreduce separate: Context.allreduce_start before the update, the
wait after it; --no-overlap: allreduce_many first), the same bits. Every --eval-every steps the held-out split is
scored with the exact AUC (merged across ranks). At the end: a checkpoint,
a serving export, and the final AUC next to the planted model's AUC.

The next train batch is generated on a thread while the current step runs
(--no-prefetch: in the step; the same samples either way), in chunks of
--prefetch-chunk samples that the thread and the step claim from one
counter: the step makes what the thread has not started and waits at most
for the one chunk it holds (as the C++ demo's Prefetcher); the step's
global sample count comes from the shard plan, as in the C++ demo, and the
loss is summed over the ranks once per log line. --profile prints the time
of each step phase per rank, in the C++ demo's --profile format, and a
second line of CPU time per step: the main thread's per phase, the prefetch
thread's (with its share of the prefetched samples and the step's wait
for its chunk) and the whole process's (the rest is hb's progress threads).

The generator's integer work (its splitmix hashes, Zipf ranks, ids, the
planted weights' gather and the uniforms) runs in one GIL-free call of the
demo's native helper (synth_native.cc, libctr_synth_native.so, built next
to the hb package and loaded with ctypes; not hb API) when it is on the
Python path; numpy's log, cos and exp make the rest, so the samples are
the numpy generator's bit for bit. --generator numpy: all in numpy;
native: the helper or an error; auto (default): the helper when found. The
banner says which.

The step is pipelined as the C++ demo's (--no-pipeline: one lookup per
step): the next batch's lookup is started (Collection.lookup_start: its ids
go to their owners) before this batch's MLP runs and finished
(Collection.lookup_wait: the rows, read after this batch's update) at the
top of the next step, so the exchange absorbs the skew between the ranks;
the results are bit-identical. The pipeline is drained before an
evaluation, a checkpoint and the end of the data; with --data (a reader)
the step is not pipelined.

With --checkpoint-dir D --checkpoint-every N, a checkpoint of the whole job
every N steps (hb.Checkpoint: the tables, the MLP and its Adagrad slots,
the data position, the running metric); started again (by hand, or by
`hbrun --max-restarts`), the job resumes from the newest one there.
--digest prints the final dense state's digest and the AUC in full, to
compare runs bit for bit.

    hbrun -n 2 --ps 1 -- python3 ctr_train.py --splits [--data GLOB] ...

Parameter-server mode with dynamic splits (docs/parameter-servers.md): the
tables and the MLP live on the ps tasks (the MLP as one hb.PsDense, Adagrad
applied there); ps task 0 hands out the train samples (or, with --data, the
files' bytes: Reader.splits) in splits, a fast worker takes more, and each
worker commits its position with its pushes (every sample exactly once,
whatever worker is killed when). The chief scores and saves at the end.

The MLP's matrix products go to numpy's BLAS: with Debian's reference BLAS
(libblas3) they are most of a step; an OpenBLAS (libopenblas0-serial or
-pthread, which scripts/install-deps.sh installs) makes them ~30x faster.
The banner names the BLAS numpy loaded.
"""

import argparse
import itertools
import os
import sys
import threading
import time

import numpy as np

import hb
import synth_data as synth

T, DENSE = synth.TABLES, synth.DENSE


def parse_flags(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--train-samples", type=int, default=480000)
    p.add_argument("--eval-samples", type=int, default=40000)
    p.add_argument("--files", type=int, default=0,
                   help="> 0: the train split comes as this many files of uneven size; "
                        "0: the samples are split evenly over the ranks")
    p.add_argument("--batch", type=int, default=512, help="samples per rank and step")
    p.add_argument("--vocab", type=int, default=2048, help="ids per table; a power of two")
    p.add_argument("--dim", type=int, default=8)
    p.add_argument("--hidden", type=int, default=64)
    p.add_argument("--eval-every", type=int, default=100)
    p.add_argument("--log-every", type=int, default=25)
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--max-gap", type=float, default=0.10,
                   help="fail if the final AUC trails the planted one by more")
    p.add_argument("--seed", type=int, default=2026)
    p.add_argument("--out", default="ctr_out")
    p.add_argument("--data", default=None,
                   help="train from Criteo-format files matching this glob (hb.Reader), "
                        "e.g. as written by criteo_synth_tsv")
    p.add_argument("--checkpoint-dir", default=None,
                   help="whole-job checkpoints here; on start, resume from the newest")
    p.add_argument("--checkpoint-every", type=int, default=0,
                   help="steps between checkpoints (0: only at the end of training)")
    p.add_argument("--checkpoint-keep", type=int, default=3)
    p.add_argument("--checkpoint-async", action="store_true",
                   help="a background thread writes each checkpoint")
    p.add_argument("--digest", action="store_true",
                   help="print the final dense state's digest and the AUC in full")
    p.add_argument("--no-overlap", dest="overlap", action="store_false",
                   help="the dense allreduce before the sparse update, not beside it")
    p.add_argument("--dense-allreduce", choices=("fused", "separate"), default="fused",
                   help="fused: the dense sum rides in the sparse update's exchange; separate: "
                        "Context.allreduce_start beside it (the same bits)")
    p.add_argument("--data-sync", action="store_true",
                   help="hb data_sync every step even on even shards (where the shard plan "
                        "decides alike without a round)")
    p.add_argument("--splits", action="store_true",
                   help="parameter-server mode (run under hbrun --ps): dynamic splits of the train "
                        "samples, or of --data's bytes")
    p.add_argument("--profile", action="store_true",
                   help="time per step phase, per rank (the C++ demo's phases), and CPU time per "
                        "phase and thread, printed at the end")
    p.add_argument("--no-pipeline", dest="pipeline", action="store_false",
                   help="one lookup per step, not the next batch's started before this one's MLP")
    p.add_argument("--no-prefetch", dest="prefetch", action="store_false",
                   help="generate each train batch in the step that uses it, not on a thread "
                        "during the step before")
    # 512: a numpy call costs ~1 us whatever its size, so a chunk of the
    # generator's costs ~55 us plus ~0.4 us per sample; 2 x 256 samples
    # take 1.28x the instructions of one 512 (docs/performance.md).
    p.add_argument("--prefetch-chunk", type=int, default=512,
                   help="samples per chunk of a prefetched batch: the thread and the step claim "
                        "chunks, so the step waits at most for one")
    p.add_argument("--generator", choices=("auto", "numpy", "native"), default="auto",
                   help="the synthetic data's hashes, ranks and ids: in numpy, or in one GIL-free "
                        "call of the demo's native helper (%s, built next to the hb package; "
                        "the same samples); auto: native when found" % synth.NATIVE_LIB)
    f = p.parse_args(argv)
    if (f.batch <= 0 or f.vocab <= 0 or f.vocab & (f.vocab - 1) or f.dim <= 0 or f.hidden <= 0
            or f.files < 0 or f.eval_every <= 0 or f.log_every <= 0
            or f.checkpoint_every < 0 or f.checkpoint_keep < 1 or f.prefetch_chunk <= 0):
        p.error("batch, dim, hidden, eval-every, log-every, prefetch-chunk > 0, files >= 0, vocab "
                "a power of two, checkpoint-every >= 0 and checkpoint-keep >= 1")
    if f.generator == "native" and synth.load_native() is None:
        p.error("--generator native: %s is on no entry of the Python path (the examples build "
                "it into <build>/bindings/python)" % synth.NATIVE_LIB)
    return f


def plan_train_shard(f, world, rank):
    """As the C++ demo: by default an even, contiguous share of the samples;
    with --files N, N files of uneven size (file i weighs 1 + i % 5) and
    shard_range hands each rank a contiguous run of files, so ranks hold
    different amounts of data and data_sync keeps them in step. Returns
    this rank's samples [begin, end)."""
    if f.files == 0:
        return hb.shard_range(f.train_samples, world, rank)
    cum = np.concatenate([[0.0], np.cumsum(1.0 + np.arange(f.files) % 5)])
    # llround of the C++ demo: half away from zero (values are >= 0).
    file_begin = np.floor(f.train_samples * cum / cum[-1] + 0.5).astype(np.int64)
    fb, fe = hb.shard_range(f.files, world, rank)
    return int(file_begin[fb]), int(file_begin[fe])


class StepProfile:
    """--profile: wall time of each phase of the training steps (evaluation
    excluded), summed over the steps; the C++ demo's StepProfile, with its
    phase names, so the two demos' lines compare phase by phase."""

    PHASES = ("data", "lookup", "lookup_start", "mlp_fwd", "global_batch", "mlp_bwd",
              "dense_allreduce", "dense_optim", "sparse_update", "data_sync", "metric")

    def __init__(self, on):
        self.on, self.paused = on, False
        self.total = dict.fromkeys(self.PHASES, 0.0)
        # CPU time: the main thread's per phase, and the whole process's
        # (every thread: hb's progress threads, the prefetch) over the
        # phases; on a shared machine wall time mostly measures the others.
        self.cpu = dict.fromkeys(self.PHASES, 0.0)
        self.proc_cpu = 0.0
        self.running, self.since, self.cpu_since, self.proc_since = None, 0.0, 0.0, 0.0

    def mark(self, phase):
        """Starts phase (None: none), ending the running one."""
        if not self.on or self.paused:
            return
        t, c, pc = time.perf_counter(), time.thread_time(), time.process_time()
        if self.running is not None:
            self.total[self.running] += t - self.since
            self.cpu[self.running] += c - self.cpu_since
            self.proc_cpu += pc - self.proc_since
        self.running, self.since, self.cpu_since, self.proc_since = phase, t, c, pc

    def stop(self):
        self.mark(None)

    def line(self, rank, steps, prefetch=None):
        """The wall line (the C++ demo's) and the CPU line: the main
        thread's per phase, the prefetch thread's (prefetch: the run's
        Prefetcher, None without one: its CPU, its share of the prefetched
        samples and the steps' wait for its chunk) and the whole process's
        (the rest: hb's progress threads) per step."""
        cpu_s, share, wait_s = 0.0, 0.0, 0.0
        if prefetch is not None:
            cpu_s, wait_s = prefetch.cpu, prefetch.wait_s
            share = prefetch.thread_samples / max(1, prefetch.posted_samples)
        parts = " ".join("%s %.3f" % (k, 1e3 * v / steps) for k, v in self.total.items())
        cpu = " ".join("%s %.3f" % (k, 1e3 * v / steps) for k, v in self.cpu.items())
        return ("profile rank %d: ms/step %s | total %.3f\n"
                "profile rank %d: cpu ms/step (main thread) %s | total %.3f | prefetch %.3f "
                "(%.0f%% of the prefetched samples, the step waited %.3f) | process %.3f"
                % (rank, parts, 1e3 * sum(self.total.values()) / steps, rank, cpu,
                   1e3 * sum(self.cpu.values()) / steps, 1e3 * cpu_s / steps, 100 * share,
                   1e3 * wait_s / steps, 1e3 * self.proc_cpu / steps))


class Prefetcher:
    """The train batch after the one handed out, generated on a thread while
    the step that uses the current one runs: numpy's array operations and
    hb's calls (the binding is built with SWIG's -threads) release the GIL,
    so the generator runs beside the lookup, the GEMMs and the exchanges.
    Sample i depends only on (seed, split, i): a prefetched batch is the one
    generated in place, bit for bit. A range it did not guess (a resume, an
    empty batch) is generated in place.

    As the C++ demo's Prefetcher: the range goes in chunks of `chunk`
    samples that the thread and take() claim from one counter, each written
    into its rows of the batch's preallocated arrays (no concatenation). A
    batch the thread has not finished when the step wants it (its core
    busy with the other ranks' steps) is finished by the step, which then
    waits at most for the one chunk the thread holds, not for a whole
    batch from a thread that has no core.

    make(n) allocates a batch's Samples and fill(begin, end, out, at)
    generates rows of one (default: synth_data's arrays, Generator.sample_into):
    the Trainer's make the batch in the step's own layout (Trainer.new_batch)."""

    RING = 3  # batch buffers: the step's, the next one (pipelined), the one being made
    TIMEOUT_S = 60.0  # a chunk takes ~0.1 ms; a minute means the thread is gone

    def __init__(self, gen, batch, shard_end, chunk, make=None, fill=None):
        self.gen, self.batch, self.shard_end, self.chunk = gen, batch, shard_end, chunk
        self.make = make or synth.new_samples
        self.fill = fill or (lambda begin, end, out, at: gen.sample_into(0, begin, end, out, at))
        self.cv = threading.Condition()
        self.ring = [self.make(batch) for _ in range(self.RING)]
        self.next_slot = 0
        # The posted range: (begin, end, out, claims, chunks); claims hands
        # out chunk numbers (itertools.count's next is atomic under the GIL).
        self.posted = None
        self.seq, self.busy, self.stopping, self.error = 0, False, False, None
        self.cpu = 0.0  # the thread's CPU seconds generating (--profile)
        self.thread_samples = self.posted_samples = 0  # the thread's share (--profile)
        self.wait_s = 0.0  # the steps' wall time waiting for the thread's chunk (--profile)
        self.thread = threading.Thread(target=self._run, name="ctr-prefetch", daemon=True)
        self.thread.start()

    def take(self, begin, end):
        """Train samples [begin, end); posts [end, end + batch)."""
        s, p = None, self.posted
        if p is not None:
            self._claim(p)  # the chunks the thread has not started
            t = time.perf_counter()
            with self.cv:
                if not self.cv.wait_for(lambda: not self.busy, self.TIMEOUT_S):
                    raise hb.HbError(hb.ERR_TIMEOUT, "HB_ERR_TIMEOUT",
                                     "the prefetch thread kept a chunk of train samples [%d, %d) "
                                     "for %g s" % (p[0], p[1], self.TIMEOUT_S))
                self.posted, err, self.error = None, self.error, None
            self.wait_s += time.perf_counter() - t
            if err is not None:
                raise err  # the thread's error, not lost (also on a miss)
            if (p[0], p[1]) == (begin, end):
                s = p[2]
        if s is None:
            s = self.gen.sample(0, begin, end)
        nb, ne = end, min(self.shard_end, end + self.batch)
        if ne > nb:
            if ne - nb == self.batch:
                out, self.next_slot = self.ring[self.next_slot], (self.next_slot + 1) % self.RING
            else:  # the shard's last, short batch
                out = self.make(ne - nb)
            with self.cv:
                self.posted = (nb, ne, out, itertools.count(), -(-(ne - nb) // self.chunk))
                self.seq += 1
                self.posted_samples += ne - nb
                self.cv.notify_all()
        return s

    def _claim(self, p):
        """Generates p's unclaimed chunks into its arrays; how many samples.
        Chunks are disjoint rows, so the two threads write apart; the
        condition (taken after) orders the writes before take() returns."""
        begin, end, out, claims, chunks = p
        made = 0
        for k in claims:
            if k >= chunks:
                return made
            lo = begin + k * self.chunk
            hi = min(end, lo + self.chunk)
            self.fill(lo, hi, out, lo - begin)
            made += hi - lo
        return made

    def _run(self):
        """The thread: each posted range's chunks, until close()."""
        seen = 0
        with self.cv:
            while True:
                # Idle until a range or close(): no peer involved, so no
                # bound here (take() bounds its wait for this thread).
                self.cv.wait_for(lambda: self.stopping or (self.posted is not None
                                                           and self.seq != seen))
                if self.stopping:
                    return
                seen, p, self.busy = self.seq, self.posted, True
                self.cv.release()
                t, made, err = time.thread_time(), 0, None
                try:
                    made = self._claim(p)
                except BaseException as e:  # take() raises it
                    err = e
                finally:
                    self.cv.acquire()
                self.cpu += time.thread_time() - t
                self.thread_samples += made
                if err is not None and self.error is None:
                    self.error = err
                self.busy = False
                self.cv.notify_all()

    def close(self):
        with self.cv:
            self.stopping, self.posted = True, None
            self.cv.notify_all()
        self.thread.join(self.TIMEOUT_S)
        if self.thread.is_alive():
            raise hb.HbError(hb.ERR_TIMEOUT, "HB_ERR_TIMEOUT",
                             "the prefetch thread did not stop within %g s" % self.TIMEOUT_S)


class Dense:
    """The MLP's parameters, replicated on every rank, with Adagrad
    accumulators; initialised as in the C++ demo. Parameters, gradients and
    accumulators are each one flat float32 buffer (params, grads and accs
    are views of them), so the optimizer is a few whole-buffer operations."""

    def __init__(self, n_in, hidden, seed):
        self.n_in, self.hidden = n_in, hidden
        u64 = np.uint64
        with np.errstate(over="ignore"):
            i = np.arange(n_in * hidden, dtype=u64)
            w1 = np.sqrt(2.0 / n_in) * synth.gauss(synth.mix(u64(seed) + i))
            h = np.arange(hidden, dtype=u64)
            w2 = 0.1 * synth.gauss(synth.mix(~u64(seed) + h))
        shapes = [(hidden, n_in), (hidden,), (hidden,), (1,)]
        size = sum(int(np.prod(sh)) for sh in shapes)
        self.flat_params = np.zeros(size, np.float32)
        self.flat_grads = np.zeros(size, np.float32)
        self.flat_accs = np.full(size, 0.1, np.float32)
        self._scratch = np.empty((2, size), np.float32)
        self.params = self._views(self.flat_params, shapes)
        self.grads = self._views(self.flat_grads, shapes)
        self.accs = self._views(self.flat_accs, shapes)
        self.params[0][...] = w1.reshape(hidden, n_in)  # float64 -> float32 as C++ does
        self.params[2][...] = w2

    @staticmethod
    def _views(flat, shapes):
        views, at = [], 0
        for sh in shapes:
            n = int(np.prod(sh))
            views.append(flat[at:at + n].reshape(sh))
            at += n
        return views

    w1 = property(lambda self: self.params[0])
    b1 = property(lambda self: self.params[1])
    w2 = property(lambda self: self.params[2])
    b2 = property(lambda self: self.params[3])

    def step(self, lr):
        """Adagrad, as C++: acc += g * g; p -= lr * g / sqrt(acc)."""
        g, a, t, u = self.flat_grads, self.flat_accs, self._scratch[0], self._scratch[1]
        np.multiply(g, g, out=t)
        a += t
        np.multiply(g, np.float32(lr), out=t)
        np.sqrt(a, out=u)
        t /= u
        self.flat_params -= t


def blas_library():
    """The BLAS library numpy loaded, as the directory and file the dynamic
    linker mapped (Linux; Debian's libblas.so.3 is an alternatives link)."""
    try:
        with open("/proc/self/maps") as maps:
            libs = {line.split()[-1] for line in maps if "blas" in line.rsplit("/", 1)[-1]}
    except OSError:
        return "unknown"
    name = ", ".join(sorted("/".join(p.split("/")[-2:]) for p in libs)) or "unknown"
    core = openblas_core()
    return name + (", OpenBLAS " + core if core else "")


def openblas_core():
    """The kernels ("SkylakeX", "Prescott", ...) of the OpenBLAS numpy
    loaded, or None when its BLAS is not OpenBLAS."""
    try:
        import ctypes
        with open("/proc/self/maps") as maps:
            libs = {line.split()[-1] for line in maps if "openblas" in line.rsplit("/", 1)[-1]}
        for lib in sorted(libs):
            fn = getattr(ctypes.CDLL(lib), "openblas_get_corename", None)
            if fn is not None:
                fn.restype = ctypes.c_char_p
                return fn().decode()
    except (OSError, AttributeError, ValueError):
        pass
    return None


# OpenBLAS's names of the x86 cores whose kernels predate AVX (as
# examples/ctr_train/blas_core.h).
_PRE_AVX = {"Unknown", "Katmai", "Coppermine", "Northwood", "Prescott", "Banias", "Core2",
            "Penryn", "Dunnington", "Nehalem", "Atom", "Opteron", "Opteron(SSE3)", "Barcelona",
            "Nano"}


def rerun_if_misdetected():
    """As the C++ demo (examples/ctr_train/blas_core.h): Debian 12's OpenBLAS
    picks its kernels by CPU model number when it loads and falls back to
    its SSE3 ("Prescott") kernels on CPUs it does not know, which makes
    numpy's GEMMs, most of the MLP, about 2.5x slower. When the OpenBLAS
    numpy loaded reports a pre-AVX core, the CPU has AVX2 and FMA and the
    user has not set OPENBLAS_CORETYPE, run this program again with the core
    the CPU's features support (the choice cannot change once loaded).
    Returns only when no correction is needed."""
    if "OPENBLAS_CORETYPE" in os.environ or openblas_core() not in _PRE_AVX:
        return
    try:
        with open("/proc/cpuinfo") as info:
            flags = next((line.split(":", 1)[1].split() for line in info
                          if line.startswith("flags")), [])
    except (OSError, AttributeError, ValueError):
        return
    if all(x in flags for x in ("avx512f", "avx512bw", "avx512vl", "avx512dq", "avx512cd")):
        want = "SkylakeX"
    elif "avx2" in flags and "fma" in flags:
        want = "Haswell"
    else:
        return
    os.environ["OPENBLAS_CORETYPE"] = want
    sys.stdout.flush()
    os.execv(sys.executable, [sys.executable] + sys.argv)


def make_generator(f):
    """The synthetic data's Generator, with --generator's native helper."""
    return synth.Generator(f.seed, f.vocab,
                           native=None if f.generator == "numpy" else synth.load_native())


class Trainer:
    reader = None  # hb.Reader with --data (subclasses may not set it)
    input_wait = 0.0
    prefetcher = None  # Prefetcher of the train batches, while run() trains
    step_no = 0  # the training step running (from 0)
    _shard_sizes = None  # every rank's train samples (synthetic data): shard_sizes()
    prof = StepProfile(False)  # --profile (run() sets it)
    # The pipelined step (Trainer.train_step): may this step start the next
    # one's lookup; the next step's (lo, hi), its samples and buffers when
    # started; every rank out of data (seen by the started step's data_sync);
    # which of two buffer sets the started batch uses.
    pipeline_ok = False
    started = None
    out_of_data = False
    slot = 0

    def __init__(self, ctx, f):
        self.ctx, self.f = ctx, f
        self.rank, self.world = ctx.rank, ctx.world_size
        self.gen = make_generator(f)
        self.dense = Dense(T * f.dim + DENSE, f.hidden, f.seed)
        self.ps = ctx.num_ps > 0  # parameter-server mode (--splits)
        common = dict(partition=hb.PARTITION_MOD, seed=f.seed, optimizer=hb.OPT_ADAGRAD,
                      learning_rate=f.lr, initial_accumulator=0.1,
                      placement=hb.PLACEMENT_PS if self.ps else hb.PLACEMENT_WORKERS)
        self.tables = [hb.Embedding(ctx, "cat_%02d" % t, f.dim, num_rows=f.vocab,
                                    initializer=hb.INIT_NORMAL, init_a=0.0, init_b=0.05, **common)
                       for t in range(T)]
        self.wide = hb.Embedding(ctx, "wide", 1, num_rows=f.vocab * T, initializer=hb.INIT_ZEROS,
                                 **common)
        # One collection: feature t < T reads table t (one id per sample),
        # feature T the wide table (T ids per sample); all sum-pooled.
        self.coll = hb.Collection(ctx, self.tables + [self.wide])
        self.ps_dense = None
        if self.ps:  # the MLP on the ps tasks, Adagrad applied there
            self.ps_dense = hb.PsDense(ctx, "mlp", self.dense.flat_params.size,
                                       init=self.dense.flat_params, optimizer=hb.OPT_ADAGRAD,
                                       learning_rate=f.lr, initial_accumulator=0.1)
        self.reader, self.input_wait = None, 0.0
        if f.data:
            self.reader = hb.Reader([f.data], ctx, batch_size=f.batch, num_threads=2)
            self.batch = None
            self.shard_begin = self.shard_end = 0
        else:
            self.shard_begin, self.shard_end = self.plan_train_shard()
        self.table_offsets = np.arange(T, dtype=np.int64) * f.vocab
        self._buffers = {}  # per batch size: the step's arrays, reused

    def buffers(self, n, slot=0):
        """The arrays of a batch of n samples (float32 but for the ids),
        made once per batch size and slot and reused by every step (two
        slots: the pipelined step's batch and the next one, started)."""
        b = self._buffers.get((n, slot))
        if b is None:
            if len(self._buffers) >= 6:  # the full batches stay; odd sizes come and go
                self._buffers.pop(next(k for k in self._buffers if k[0] != self.f.batch))
            h, p = self.f.hidden, T * self.f.dim + 1
            b = dict(values=np.empty(2 * T * n, np.int64),
                     # Feature t < T: one id per sample; feature T: T ids per sample.
                     offsets=np.concatenate([np.arange(T * n, dtype=np.int64),
                                             T * n + np.arange(n + 1, dtype=np.int64) * T]),
                     pooled=np.empty((n, p), np.float32), x=np.empty((n, self.dense.n_in), np.float32),
                     z1=np.empty((n, h), np.float32), a1=np.empty((n, h), np.float32),
                     dz1=np.empty((n, h), np.float32), dl=np.empty(n, np.float32),
                     grad=np.empty((n, p), np.float32),
                     # The logit's and the loss's element-wise passes run
                     # in place here (out=), not through numpy temporaries.
                     on=np.empty((n, h), np.bool_), mlp_out=np.empty(n, np.float32),
                     logit=np.empty(n), f64=np.empty((2, n)), not_clicked=np.empty(n, np.bool_),
                     prob=np.empty(n, np.float32))
            self._buffers[(n, slot)] = b
        return b

    def plan_train_shard(self):
        return plan_train_shard(self.f, self.world, self.rank)

    def new_batch(self, n):
        """A prefetched batch's Samples (Prefetcher's make), laid out as the
        step reads them: the ids are the first T * n entries of .values (the
        collection's flat batch, feature by feature; fill_batch writes the wide
        feature's ids after them) and the dense features the last DENSE
        columns of .x (the MLP's input). So the step copies neither (~40 us
        of its thread per 512 samples at 1 rank, where the prefetch thread
        has a core of its own)."""
        td = T * self.f.dim
        values, x = np.empty(2 * T * n, np.int64), np.empty((n, td + DENSE), np.float32)
        s = synth.Samples(values[:T * n].reshape(T, n).T, x[:, td:], np.empty(n, np.float32),
                          np.empty(n, np.float32))
        s.values, s.x = values, x
        return s

    def prefetch_layout(self):
        """Prefetcher's make and fill: new_batch's layout, which this
        class's step reads; (None, None): synth_data's arrays (a subclass
        whose step reads only Samples' ids and dense)."""
        return self.new_batch, self.fill_batch

    def fill_batch(self, begin, end, out, at):
        """Train samples [begin, end) into rows [at, ...) of new_batch's out,
        with their wide ids (Prefetcher's fill)."""
        self.gen.sample_into(0, begin, end, out, at)
        n, rows = out.ids.shape[0], slice(at, at + end - begin)
        np.add(out.ids[rows].T, self.table_offsets[:, None],
               out=out.values[T * n:].reshape(n, T)[rows].T)

    def batch_ids(self, split, begin, end, slot=0):
        """(samples [begin, end) of split, their buffers with the ids filled
        in as a flat KeyedJaggedTensor: the T categorical features' ids
        feature by feature, then the wide feature's T ids per sample)."""
        s = self.samples(split, begin, end)
        n = s.ids.shape[0]
        b = self.buffers(n, slot)
        if getattr(s, "values", None) is not None:  # new_batch's: the flat batch and x made
            return s, dict(b, values=s.values, x=s.x)
        values = b["values"]
        values[:T * n].reshape(T, n)[...] = s.ids.T
        # The wide ids, (n, T) in values: read in the generator's (T, n)
        # order and written transposed (18 us per 512 samples against 29
        # for the strided read).
        np.add(s.ids.T, self.table_offsets[:, None], out=values[T * n:].reshape(n, T).T)
        return s, b

    def forward(self, split, begin, end):
        """Samples [begin, end) of split through the model. Lookups are
        collective: ranks without data call this with an empty range."""
        self.prof.mark("data")
        s, b = self.batch_ids(split, begin, end, self.slot)
        self.prof.mark("lookup")
        pooled = self.coll.lookup(b["values"], b["offsets"], out=b["pooled"])  # n x (T * dim + 1)
        return self.mlp_forward(s, b, pooled)

    def mlp_forward(self, s, b, pooled):
        """The MLP and the wide part on a looked-up batch."""
        f, d = self.f, self.dense
        td = T * f.dim
        self.prof.mark("mlp_fwd")
        x = b["x"]
        x[:, :td] = pooled[:, :td]
        if getattr(s, "x", None) is not x:  # new_batch's x holds its dense features
            x[:, td:] = s.dense
        z1 = np.matmul(x, d.w1.T, out=b["z1"])
        z1 += d.b1
        a1 = np.maximum(z1, np.float32(0), out=b["a1"])
        # The logit in double, as C++ has it (n values): the MLP's output,
        # b2 and the wide part (its pooled sum, the last column). In place
        # in the batch's buffers: the same operations as
        # 1 / (1 + exp(-logit)) through temporaries, so the same bits.
        logit = b["logit"]
        logit[...] = np.matmul(a1, d.w2, out=b["mlp_out"])
        logit += d.b2[0]
        logit += pooled[:, td]
        e = np.negative(logit, out=b["f64"][0])
        np.exp(e, out=e)
        e += 1.0
        np.divide(1.0, e, out=e)
        prob = b["prob"]
        prob[...] = e
        return dict(s=s, buf=b, prob=prob, label=s.label)

    def fetch(self):
        """--data: the next batch of this rank's files (False: out of data);
        the time spent waiting for it goes to self.input_wait."""
        t = time.monotonic()
        self.batch = self.reader.next()
        self.input_wait += time.monotonic() - t
        return self.batch is not None

    def samples(self, split, begin, end):
        """Samples [begin, end) of split: the generator's, or with --data the
        fetched batch (one id per table; an empty field reads as id 0)."""
        if split == 0 and self.prefetcher is not None:
            return self.prefetcher.take(begin, end)
        if split != 0 or self.reader is None:
            return self.gen.sample(split, begin, end)
        b = self.batch
        if b is None or end == begin:
            return synth.Samples(np.zeros((0, T), np.int64), np.zeros((0, DENSE), np.float32),
                                 np.zeros(0, np.float32), np.zeros(0, np.float32))
        n = b.size
        ids = np.zeros((T, n), np.int64)
        lengths = b.lengths()
        starts = b.offsets[:-1].reshape(T, n)
        ids[lengths > 0] = b.ids[starts[lengths > 0]]
        return synth.Samples(ids.T, b.dense, b.labels, np.zeros(n, np.float32))

    def backward(self, b, global_n):
        """Gradients of the mean logistic loss over the global batch."""
        f, d, buf = self.f, self.dense, b["buf"]
        td = T * f.dim
        self.prof.mark("mlp_bwd")
        # dloss/dlogit = (p - y) / N, as C++: times the float32 inverse.
        dl = np.subtract(b["prob"], b["label"], out=buf["dl"])
        dl *= np.float32(1.0) / np.float32(global_n)
        # Through the ReLU: dz1 = dl * w2 where z1 > 0.
        dz1 = np.multiply(dl[:, None], d.w2, out=buf["dz1"])
        dz1 *= np.greater(buf["z1"], np.float32(0), out=buf["on"])
        gw1, gb1, gw2, gb2 = d.grads
        np.matmul(dz1.T, buf["x"], out=gw1)
        np.sum(dz1, axis=0, out=gb1)
        np.matmul(dl, buf["a1"], out=gw2)
        gb2[0] = dl.sum()
        # The pooled output's gradient, with w1 before this step's update:
        # dx for the T * dim embedding columns; each wide id gets dl. Made
        # last, as the C++ demo does: the update reads it at once, from cache.
        grad = buf["grad"]
        np.matmul(dz1, d.w1[:, :td], out=grad[:, :td])
        grad[:, td] = dl
        self.prof.mark("dense_allreduce")
        if self.ps_dense is None and f.overlap and f.dense_allreduce == "fused":
            # The dense gradients (one flat buffer) ride in the sparse
            # update's exchange (hb_collection_apply_gradients_dense): no
            # round or thread hand-off of their own; per element the same
            # rank-order sum as allreduce_many's.
            self.prof.mark("sparse_update")
            self.coll.apply_gradients(buf["values"], buf["offsets"], grad, dense=d.flat_grads)
            self.prof.mark("dense_optim")
            d.step(f.lr)
            return
        if self.ps_dense is None and f.overlap:
            # The dense gradients (one flat buffer) are summed on the
            # context's progress thread while the sparse update runs here:
            # per element the same rank-order sum as allreduce_many's.
            req = self.ctx.allreduce_start(d.flat_grads, recv=d.flat_grads)
            self.prof.mark("sparse_update")
            self.coll.apply_gradients(buf["values"], buf["offsets"], grad)
            self.prof.mark("dense_allreduce")  # what the overlap left to wait
            req.wait()
            self.prof.mark("dense_optim")
            d.step(f.lr)
            return
        if self.ps_dense is not None:  # applied on the ps tasks
            self.ps_dense.push(d.flat_grads)
        else:  # dense gradients: one fused allreduce over the four tensors
            self.ctx.allreduce_many(d.grads)
            self.prof.mark("dense_optim")
            d.step(f.lr)
        self.prof.mark("sparse_update")
        # Sparse gradients go to the ranks that own the rows: one call, which
        # reuses the plan of this batch's lookup.
        self.coll.apply_gradients(buf["values"], buf["offsets"], grad)

    @staticmethod
    def loss_sum(b):
        """This rank's logistic loss summed over the batch b, in double,
        with p clipped to [1e-7, 1 - 1e-7]: -sum log(p) over the clicks,
        log(1 - p) over the others."""
        buf = b["buf"]
        # np.minimum / np.maximum: what np.clip computes, without its
        # per-call argument checks (~0.5 ms a call on numpy 1.24). In place
        # in the batch's buffers (where=: np.where's choice without its
        # temporaries): the same values as through temporaries.
        p, q = buf["f64"]
        p[...] = b["prob"]
        np.maximum(p, 1e-7, out=p)
        np.minimum(p, 1 - 1e-7, out=p)
        q[...] = p
        m = np.greater(b["label"], 0.5, out=buf["not_clicked"])
        np.subtract(1.0, p, out=q, where=np.logical_not(m, out=m))
        np.log(q, out=q)
        return float(-q.sum())

    def evaluate(self):
        """Exact AUC of the model and of the planted model on the held-out
        split, merged over the ranks."""
        f = self.f
        self.prof.paused = True  # evaluation is not a training step
        try:
            return self.score_held_out(f)
        finally:
            self.prof.paused = False

    def score_held_out(self, f):
        with hb.Metric(hb.METRIC_AUC_EXACT, self.ctx) as model, \
                hb.Metric(hb.METRIC_AUC_EXACT, self.ctx) as planted:
            begin, end = hb.shard_range(f.eval_samples, self.world, self.rank)
            # Every rank runs the same number of (collective) lookups.
            batches = self.ctx.allreduce(np.array([-(-(end - begin) // f.batch)], np.int64), op=hb.MAX)
            for k in range(int(batches[0])):
                lo = min(end, begin + k * f.batch)
                hi = min(end, lo + f.batch)
                b = self.forward(1, lo, hi)
                model.update(b["label"], b["prob"])
                planted.update(b["label"], b["s"].planted_prob)
            return model.result(), planted.result()

    def train_step(self, lo, hi):
        """One step on train samples [lo, hi) (maybe empty): returns the
        global sample count, this rank's loss sum (run() sums the ranks' at
        each log line), labels and predictions (float32 arrays).
        Pipelined (self.pipeline_ok, set by run()): this batch's lookup was
        started by the step before (or is made now), and the next batch's
        is started before this one's MLP, as in the C++ demo; its rows are
        read in the next step's wait, after this step's update."""
        b = None
        if self.started is not None:
            (slo, shi), s, buf = self.started
            self.started = None
            assert (slo, shi) == (lo, hi), ((slo, shi), (lo, hi))
            self.prof.mark("lookup")
            pooled = self.coll.lookup_wait()  # buf["pooled"]
        elif self.pipeline_ok:  # forward's lookup; the MLP after the start below
            self.prof.mark("data")
            s, buf = self.batch_ids(0, lo, hi, self.slot)
            self.prof.mark("lookup")
            pooled = self.coll.lookup(buf["values"], buf["offsets"], out=buf["pooled"])
        else:
            b = self.forward(0, lo, hi)
        if self.pipeline_ok:
            # The next batch's ids go to their owners now, before this
            # batch's MLP (the collection's progress thread runs the rounds
            # meanwhile); its rows come in the next step's wait, after this
            # batch's update.
            nxt = self.next_range(self.step_no + 1)  # collective (data_sync): every rank asks here
            if nxt is None:
                self.out_of_data = True
            else:
                self.slot ^= 1
                self.prof.mark("data")
                ns, nbuf = self.batch_ids(0, nxt[0], nxt[1], self.slot)
                self.prof.mark("lookup_start")
                self.coll.lookup_start(nbuf["values"], nbuf["offsets"], out=nbuf["pooled"])
                self.started = (nxt, ns, nbuf)
        if b is None:
            b = self.mlp_forward(s, buf, pooled)
        loss = self.loss_sum(b)
        self.prof.mark("global_batch")
        global_n = self.global_batch(hi - lo)
        self.backward(b, global_n)
        return global_n, loss, b["label"], b["prob"]

    def next_range(self, step):
        """Collective (data_sync): this rank's train range [lo, hi) for step
        `step` (from 0; empty when its data ran out and others' did not),
        taken from its position; None when every rank is out of data."""
        pos = int(self.pos[0])
        has_data = self.fetch() if self.reader is not None else pos < self.shard_end
        self.prof.mark("data_sync")
        if self.reader is None and self.f.files == 0 and not self.f.data_sync:
            # Even shards: whether any rank still has data at this step is
            # known here, as global_batch knows the step's size: data_sync's
            # decision without its round (one rendezvous per step fewer, as
            # the C++ demo). Uneven files and --data keep data_sync: only
            # there may ranks run out apart.
            cont = any(size > step * self.f.batch for size in self.shard_sizes())
            empty = not has_data
        else:
            cont, empty = self.ctx.data_sync(has_data)
        if not cont:
            return None
        if self.reader is not None:
            hi = pos if empty else pos + self.batch.size
        else:
            hi = pos if empty else min(self.shard_end, pos + self.f.batch)
        self.pos[0] = hi
        return pos, hi

    def global_batch(self, local_n):
        """The step's sample count over all ranks (self.step_no, from 0):
        from the shard plan, as the C++ demo (each rank's batch is
        min(batch, what its shard has left); no collective per step), or
        with --data, where only each rank knows its batch, by an allreduce."""
        if self.reader is not None:
            return int(self.ctx.allreduce(np.array([local_n], np.int64))[0])
        done = self.step_no * self.f.batch
        return sum(min(self.f.batch, max(0, size - done)) for size in self.shard_sizes())

    def shard_sizes(self):
        """Every rank's train samples (synthetic data: the shard plan)."""
        if self._shard_sizes is None:
            self._shard_sizes = [e - b for b, e in (plan_train_shard(self.f, self.world, r)
                                                    for r in range(self.world))]
        return self._shard_sizes

    def job_id(self):
        """The model and data a checkpoint directory belongs to: another
        configuration's checkpoints are refused, not restored."""
        f = self.f
        return "%s seed=%d vocab=%d dim=%d hidden=%d batch=%d %s" % (
            type(self).__module__, f.seed, f.vocab, f.dim, f.hidden, f.batch,
            "data=" + f.data if self.reader is not None else
            "samples=%d/%d" % (f.train_samples, f.files))

    def open_checkpoint(self, running_auc):
        """Whole-job checkpoints: every table of the collection, the MLP and
        its Adagrad slots (replicated), then register_position's part."""
        f = self.f
        ck = hb.Checkpoint(self.ctx, dir=f.checkpoint_dir, keep=f.checkpoint_keep,
                           async_write=f.checkpoint_async, job_id=self.job_id())
        ck.add_collection(self.coll)
        ck.add_buffer("dense.params", self.dense.flat_params)
        ck.add_buffer("dense.adagrad", self.dense.flat_accs)
        self.register_position(ck, running_auc)
        return ck

    def register_position(self, ck, running_auc):
        """What says where training is (an hb.Checkpoint): the running
        metric, and the reader's position or this rank's offset in its
        synthetic shard (planned per world size: same world only)."""
        ck.add_metric("running_auc", running_auc)
        if self.reader is not None:
            ck.add_reader(self.reader)
        else:
            ck.add_buffer("data.pos", self.pos, per_rank=True)

    def resume(self, ckpt):
        """The step to start from: 0, or the newest checkpoint's."""
        if ckpt is None:
            return 0
        t = time.monotonic()
        step = ckpt.restore_latest()
        if step < 0:
            return 0
        st = getattr(ckpt, "hb", ckpt).stats
        if self.reader is None and st["restored_world"] != self.world:
            raise hb.HbError(hb.ERR_INVALID_ARGUMENT, "HB_ERR_INVALID_ARGUMENT",
                             "the checkpoint at step %d was written by %d ranks; the synthetic data "
                             "is sharded per world size, so only --data resumes at another world "
                             "size (this one: %d)" % (step, st["restored_world"], self.world))
        if self.ctx.is_chief:
            print("resumed from the checkpoint of step %d (written by %d ranks) in %.3f s: %s"
                  % (step, st["restored_world"], time.monotonic() - t, st["restored_path"]),
                  flush=True)
        return step

    def dense_digest(self):
        """FNV-1a of the MLP's parameters and optimizer state, in order."""
        h = 0xcbf29ce484222325
        for b in self.dense.flat_params.tobytes() + self.dense.flat_accs.tobytes():
            h = ((h ^ b) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
        return h

    def save(self, ckpt, exp):
        """Checkpoint and serving export: one directory / file per table."""
        if self.ctx.is_chief:
            os.makedirs(ckpt, exist_ok=True)
            os.makedirs(exp, exist_ok=True)
        self.ctx.barrier()
        for name, tab in self.named_tables():
            tab.save(os.path.join(ckpt, name))
            tab.export(os.path.join(exp, name + ".hbe"))

    def banner(self):
        f = self.f
        if getattr(self, "reader", None) is not None:
            return ("%s: world %d, train samples from files '%s', batch %d/rank, "
                    "%d tables x dim %d + wide, MLP %d-%d-1 (BLAS: %s)"
                    % (os.path.basename(sys.argv[0]), self.world, f.data, f.batch, T, f.dim,
                       T * f.dim + DENSE, f.hidden, blas_library()))
        return ("%s: world %d, %d train samples %s (this rank: %d), batch %d/rank, "
                "%d tables x dim %d + wide, MLP %d-%d-1 (BLAS: %s; generator: %s)"
                % (os.path.basename(sys.argv[0]), self.world, f.train_samples,
                   "in %d files" % f.files if f.files else "split evenly",
                   self.shard_end - self.shard_begin, f.batch, T, f.dim, T * f.dim + DENSE, f.hidden,
                   blas_library(), "numpy" if self.gen.native is None else "numpy + native hashes"))

    def ps_batches(self):
        """--splits: (split, offset, lo, hi) per step, from the splits ps
        task 0 hands this worker -- sample ranges, or with --data the
        reader's batches of byte-range splits (self.batch set)."""
        if self.reader is not None:
            lo = 0
            for b, split, offset in self.reader.splits(self.ctx):
                self.batch = b
                yield split, offset, lo, lo + b.size
                lo += b.size
            return
        while True:
            sp = self.ctx.ps_split_next()
            if sp is None:
                return
            lo = sp.start
            while lo < sp.end:
                # A lost holder's last batch goes again whole (replay_end).
                hi = sp.replay_end if lo < sp.replay_end else min(sp.end, lo + self.f.batch)
                yield sp.split, hi, lo, hi
                lo = hi

    def ps_step(self, split, offset, lo, hi):
        """--splits: one step on train samples [lo, hi) with the ps tasks'
        model, this worker's position in split committed with its pushes
        (overridden by examples/ctr_train_torch, as ps_pull, named_tables
        and close_model are)."""
        self.ps_pull()
        b = self.forward(0, lo, hi)
        self.ctx.ps_split_commit(split, offset)  # rides with this step's pushes
        self.backward(b, self.f.batch * self.world)

    def ps_pull(self):
        """The MLP as the ps tasks hold it."""
        self.ps_dense.pull(self.dense.flat_params)

    def named_tables(self):
        """(name, hb.Embedding) of every table, in order."""
        return list(zip(["cat_%02d" % t for t in range(T)] + ["wide"], self.tables + [self.wide]))

    def close_model(self):
        for o in [self.coll, self.ps_dense] + self.tables + [self.wide]:
            o.close()

    def sample_counter(self):
        """The job's applied samples, on the ps tasks (row 0; SGD, lr 1):
        each step pushes -n after its position is committed, so the ps
        tasks add each sample once whatever is killed and restarted."""
        return hb.Embedding(self.ctx, "samples", 1, num_rows=1, learning_rate=1.0,
                            initializer=hb.INIT_ZEROS, placement=hb.PLACEMENT_PS)

    def run_ps(self):
        """Parameter-server mode with dynamic splits: each worker at its own
        pace until every split is handed out; then the chief waits for the
        others to leave, scores the held-out split alone and saves."""
        f, ctx = self.f, self.ctx
        chief = ctx.is_chief
        if chief:
            print("%s: parameter-server mode, %d ps task(s), %d workers, dynamic splits of %s, "
                  "batch %d/worker" % (os.path.basename(sys.argv[0]), ctx.num_ps, self.world,
                                       "'%s'" % f.data if f.data else "%d samples" % f.train_samples,
                                       f.batch), flush=True)
        steps = mine = 0
        counter, zero = self.sample_counter(), np.zeros(1, np.int64)
        t0 = time.monotonic()
        for split, offset, lo, hi in self.ps_batches():
            self.ps_step(split, offset, lo, hi)
            counter.apply_gradients(zero, np.array([[lo - hi]], np.float32))
            steps, mine = steps + 1, mine + (hi - lo)
        counter.close()
        train_s = time.monotonic() - t0
        print("worker %d: %d steps, %d samples in %.3f s (%.0f samples/s)"
              % (self.rank, steps, mine, train_s, mine / max(train_s, 1e-9)), flush=True)
        if self.reader is not None:
            self.reader.close()
        self.close_model()  # leave: nobody's rounds wait for this worker
        if not chief:
            return 0
        while ctx.ps_stats()["workers_gone"] < self.world - 1:
            time.sleep(0.1)
        job_s = time.monotonic() - t0
        # The final model, as the ps tasks hold it.
        self.__init__(ctx, f)
        if self.reader is not None:
            self.reader.close()  # scoring reads the generator's held-out split
        self.ps_pull()
        with hb.Metric(hb.METRIC_AUC_EXACT) as model, hb.Metric(hb.METRIC_AUC_EXACT) as planted:
            for lo in range(0, f.eval_samples, f.batch):
                b = self.forward(1, lo, min(f.eval_samples, lo + f.batch))
                model.update(b["label"], b["prob"])
                planted.update(b["label"], b["s"].planted_prob)
            auc, planted_auc = model.result(), planted.result()
        ckpt, exp = os.path.join(f.out, "checkpoint"), os.path.join(f.out, "export")
        os.makedirs(ckpt, exist_ok=True)
        os.makedirs(exp, exist_ok=True)
        for name, tab in self.named_tables():
            tab.save(os.path.join(ckpt, name))  # the chief saves a ps table whole
            tab.export(os.path.join(exp, name + ".hbe"))
        self.close_model()
        ok = auc >= planted_auc - f.max_gap
        if not f.data:  # with files the sample count is the reader's
            with self.sample_counter() as counter:
                total = int(counter.lookup(np.zeros(1, np.int64))[0, 0])
            once = total == f.train_samples
            print("exactly once: the ps applied %d samples of %d expected: %s"
                  % (total, f.train_samples, "OK" if once else "WRONG"), flush=True)
            ok = ok and once
        print("final: %.2f s (all workers); held-out exact AUC %.4f vs planted model %.4f "
              "(gap %.4f, allowed %.2f): %s" % (job_s, auc, planted_auc, planted_auc - auc, f.max_gap,
                                                "OK" if ok else "TOO LOW"), flush=True)
        return 0 if ok else 1

    def run(self):
        """The training loop (shared with examples/ctr_train_torch, which
        overrides train_step, forward, save and banner)."""
        f, ctx = self.f, self.ctx
        if self.ps:
            return self.run_ps()
        chief = ctx.is_chief
        if chief:
            print(self.banner(), flush=True)
        running_auc = hb.Metric(hb.METRIC_AUC, ctx)  # TF-compatible thresholded AUC
        self.pos = np.array([self.shard_begin], np.int64)  # next sample of this rank's shard
        ckpt = self.open_checkpoint(running_auc) if f.checkpoint_dir else None
        step = self.resume(ckpt)
        # This rank's loss sum of each step since the last log line; summed
        # over the ranks when printed (one allreduce per log line).
        saved, interval_samples, interval_losses = step, 0, []
        self.prof = StepProfile(f.profile)
        if f.prefetch and self.reader is None:
            self.prefetcher = Prefetcher(self.gen, f.batch, self.shard_end, f.prefetch_chunk,
                                         *self.prefetch_layout())
        t0 = t_interval = time.monotonic()
        step_s = 0.0
        # Only the synthetic data pipelines: a reader's next batch would
        # replace the one the step trains on.
        pipeline = f.pipeline and self.reader is None
        while True:
            t_step = time.monotonic()
            if self.started is not None:  # this step's range came with its started lookup
                lo, hi = self.started[0]
            else:
                self.prof.mark("data")
                nxt = self.next_range(step)
                if nxt is None:
                    self.prof.stop()
                    break
                lo, hi = nxt
            self.step_no = step
            # No lookup may be pending at an evaluation (it looks up on its
            # own) or a checkpoint (it saves the position after this batch:
            # the next one must not be taken yet).
            self.pipeline_ok = pipeline and (step + 1) % f.eval_every != 0 and not (
                ckpt is not None and f.checkpoint_every and (step + 1) % f.checkpoint_every == 0)
            n, loss, label, prob = self.train_step(lo, hi)
            self.prof.mark("metric")
            running_auc.update(label, prob)
            interval_samples += n
            interval_losses.append(loss)
            step += 1
            if step % f.log_every == 0:
                interval_loss = float(ctx.allreduce(np.array(interval_losses, np.float64)).sum())
                interval_losses = []
                r = running_auc.result()
                running_auc.reset()
                now = time.monotonic()
                if chief:
                    print("step %5d  samples/s %9.0f  loss %.4f  running AUC %.4f"
                          % (step, interval_samples / (now - t_interval), interval_loss / interval_samples, r),
                          flush=True)
                t_interval, interval_samples = now, 0
            self.prof.stop()
            step_s += time.monotonic() - t_step
            if step % f.eval_every == 0:
                auc, planted = self.evaluate()
                if chief:
                    print("step %5d  held-out exact AUC %.4f (planted model %.4f)" % (step, auc, planted),
                          flush=True)
            if ckpt is not None and f.checkpoint_every and step % f.checkpoint_every == 0:
                ckpt.save(step)
                saved = step
            if self.out_of_data:
                break
        if ckpt is not None:
            # The end of training is a checkpoint too: a job started again
            # after it only evaluates and exports.
            if saved != step:
                ckpt.save(step)
            ckpt.wait()
            ckpt.close()  # before what it registered
        running_auc_state = running_auc.result() if f.digest else 0.0
        running_auc.close()
        train_s = time.monotonic() - t0
        prefetch, self.prefetcher = self.prefetcher, None
        if prefetch is not None:
            prefetch.close()
        if f.profile and step > 0:
            print(self.prof.line(self.rank, step, prefetch), flush=True)
        if self.reader is not None:
            # Time in Reader.next against the training steps' (evaluation
            # excluded); the maximum of each over the ranks.
            w = ctx.allreduce(np.array([self.input_wait, step_s]), op=hb.MAX)
            if chief:
                print("input: %d lines on rank 0; steps waited %.3f s for input out of %.3f s "
                      "(%.2f%%, worst rank)" % (self.reader.lines, w[0], w[1], 100.0 * w[0] / w[1]),
                      flush=True)
            self.reader.close()
        auc, planted = self.evaluate()

        ckpt, exp = os.path.join(f.out, "checkpoint"), os.path.join(f.out, "export")
        self.save(ckpt, exp)
        ok = auc >= planted - f.max_gap
        if chief and f.digest:
            print("digest: dense %016x metrics running_auc %.17g held_out_auc %.17g"
                  % (self.dense_digest(), running_auc_state, auc), flush=True)
        if chief:
            print("final: %d steps in %.2f s; held-out exact AUC %.4f vs planted model %.4f "
                  "(gap %.4f, allowed %.2f): %s"
                  % (step, train_s, auc, planted, planted - auc, f.max_gap, "OK" if ok else "TOO LOW"))
            print("final: checkpoint in %s, serving export in %s" % (ckpt, exp), flush=True)
        return 0 if ok else 1


def main(argv, trainer=None):
    """Train with trainer (a Trainer subclass; default Trainer): exit status."""
    f = parse_flags(argv)
    if f.splits and f.checkpoint_dir:
        # The ps loop has no job checkpoints here (the C++ demo's --splits
        # does); refused rather than silently training without them.
        print("%s: --checkpoint-dir is not supported with --splits in this demo "
              "(examples/ctr_train has both)" % os.path.basename(sys.argv[0]), file=sys.stderr)
        return 2
    if f.splits:  # before the context: ps task 0 reads them at its start
        total = f.train_samples
        if f.data:
            with hb.Reader([f.data]) as r:
                total = r.total_bytes()
        os.environ["HB_PS_SPLIT_SAMPLES"] = str(total)
        os.environ.setdefault("HB_PS_SPLIT_SIZE", str(1 << 20 if f.data else 8 * f.batch))
    try:
        with hb.Context() as ctx:
            if ctx.task_type == "ps":
                ctx.serve()
                return 0
            if (ctx.num_ps > 0) != f.splits:
                print("%s: --splits is parameter-server mode (hbrun --ps N) and needs it"
                      % os.path.basename(sys.argv[0]), file=sys.stderr)
                return 2
            return (trainer or Trainer)(ctx, f).run()
    except hb.HbError as e:
        print("%s: %s" % (os.path.basename(sys.argv[0]), e), file=sys.stderr)
        return 1


if __name__ == "__main__":
    rerun_if_misdetected()
    sys.exit(main(sys.argv[1:]))
