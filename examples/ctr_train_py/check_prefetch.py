"""ctr_train.py's Prefetcher against Generator.sample, without a context:

- every batch it hands out is byte-identical to the samples generated in
  place, whoever made which chunk (a thread that makes all, a thread that
  makes none, chunk sizes that do not divide the batch, the shard's short
  last batch, a range it did not guess);
- so are the Trainer's batches (Trainer.new_batch / fill_batch: the ids in
  the collection's flat batch with the wide feature's ids after them, the
  dense features in the MLP input's columns), and those arrays hold what
  the step's own copies made;
- a step never waits for a batch its thread has not started: with the
  thread stalled inside its first chunk, take() makes the other chunks
  itself and waits only for that one (released by a timer);
- an error on the thread reaches the step, and a thread that keeps its
  chunk ends the wait with HB_ERR_TIMEOUT naming the range.

    PYTHONPATH=<build>/bindings/python:examples/ctr_train_py python3 check_prefetch.py
"""

import threading
import time
import types

import numpy as np

import hb
import synth_data as synth
from ctr_train import T, Prefetcher, Trainer

FIELDS = ("ids", "dense", "label", "planted_prob")


def same(a, b):
    return all(getattr(a, f).dtype == getattr(b, f).dtype
               and getattr(a, f).tobytes() == getattr(b, f).tobytes() for f in FIELDS)


class Gated(synth.Generator):
    """A Generator whose prefetch thread stops at the start of each call
    until `gate` is set and then takes `delay` seconds per sample (a thread
    without a core of its own); `fail` makes the thread's calls raise. The
    step's own calls run freely."""

    def __init__(self, *a):
        super().__init__(*a)
        self.gate, self.entered = threading.Event(), threading.Event()
        self.fail, self.delay = None, 0.0
        self.gate.set()

    def _on_thread(self, n):
        if threading.current_thread().name.startswith("ctr-prefetch"):
            self.entered.set()
            if self.fail is not None:
                raise self.fail
            self.gate.wait()
            time.sleep(self.delay * n)

    def sample(self, split, begin, end):
        self._on_thread(end - begin)
        return super().sample(split, begin, end)

    def sample_into(self, split, begin, end, out, at=0):
        self._on_thread(end - begin)
        super().sample_into(split, begin, end, out, at)


def trainer_layout(gen, vocab, dim=8):
    """Prefetcher's make and fill as the Trainer passes them, on a
    stand-in with the attributes they read (no context)."""
    t = types.SimpleNamespace(f=types.SimpleNamespace(dim=dim), gen=gen,
                              table_offsets=np.arange(T, dtype=np.int64) * vocab)
    return (lambda n: Trainer.new_batch(t, n),
            lambda begin, end, out, at: Trainer.fill_batch(t, begin, end, out, at))


def check_layout(got, want, vocab, dim, what):
    """new_batch's flat batch and MLP input hold what batch_ids and
    mlp_forward copy from Generator.sample's arrays."""
    n = want.ids.shape[0]
    values = np.concatenate([want.ids.T.reshape(-1),
                             (want.ids + np.arange(T, dtype=np.int64) * vocab).reshape(-1)])
    if got.values.tobytes() != values.tobytes():
        raise SystemExit("%s: the flat batch of %d samples is not batch_ids'" % (what, n))
    if got.x[:, T * dim:].tobytes() != np.ascontiguousarray(want.dense).tobytes():
        raise SystemExit("%s: the MLP input's dense columns are not the samples' dense" % what)


def check_bytes(gen, ref, batch, shard_end, chunk, ranges, what, layout=None):
    p = Prefetcher(gen, batch, shard_end, chunk, *(layout or ()))
    try:
        for lo, hi in ranges:
            got, want = p.take(lo, hi), ref.sample(0, lo, hi)
            if not same(got, want):
                raise SystemExit("%s: chunk %d, samples [%d, %d) differ from Generator.sample's"
                                 % (what, chunk, lo, hi))
            if layout is not None and getattr(got, "values", None) is not None:
                check_layout(got, want, ref.vocab, 8, "%s, chunk %d, [%d, %d)" % (what, chunk, lo, hi))
    finally:
        p.close()
    return p


def main():
    ref = synth.Generator(2026, 1024)
    batch, shard_end = 256, 256 * 9 + 77  # a short last batch
    seq = [(lo, min(shard_end, lo + batch)) for lo in range(0, shard_end, batch)]
    # A miss in the middle (a resume), then the sequence again from there.
    ranges = seq[:3] + [(1000, 1256)] + [(lo, min(shard_end, lo + batch))
                                         for lo in range(1256, shard_end, batch)]
    for chunk in (1, 100, 256, 1000):
        gen = synth.Generator(2026, 1024)
        p = check_bytes(gen, ref, batch, shard_end, chunk, ranges, "thread free")
        # The thread idle (gate closed before the first post): the step
        # makes every chunk; a single blocked chunk is released by a timer.
        g = Gated(2026, 1024)
        g.gate.clear()
        timer = threading.Timer(0.05, g.gate.set)
        timer.start()
        check_bytes(g, ref, batch, shard_end, chunk, seq, "thread stalled")
        timer.cancel()
        # The Trainer's layout, the thread free and stalled (a miss in
        # ranges is synth_data's plain Samples: checked as before).
        gen = synth.Generator(2026, 1024)
        p = check_bytes(gen, ref, batch, shard_end, chunk, ranges, "trainer layout",
                        trainer_layout(gen, 1024))
        if not isinstance(p.ring[0].values, np.ndarray):
            raise SystemExit("trainer layout: the ring holds no flat batches")
        g = Gated(2026, 1024)
        g.gate.clear()
        timer = threading.Timer(0.05, g.gate.set)
        timer.start()
        check_bytes(g, ref, batch, shard_end, chunk, seq, "trainer layout, thread stalled",
                    trainer_layout(g, 1024))
        timer.cancel()
    print("ok: prefetched batches byte-identical (thread share %.0f%% at chunk 1000)"
          % (100.0 * p.thread_samples / max(1, p.posted_samples)))

    # The step does not wait for a batch the thread has not made: a thread
    # that takes 1 ms per sample (1 s for a batch of 1024) makes the chunk
    # it started (256 samples); take() makes the other 3 chunks and returns
    # when that one is done, ~0.26 s, not after the whole batch.
    g = Gated(2026, 1024)
    g.delay = 1e-3
    p = Prefetcher(g, 1024, 1 << 20, 256)
    p.take(0, 1024)  # a miss; posts [1024, 2048)
    if not g.entered.wait(10):
        raise SystemExit("the prefetch thread did not start in 10 s")
    t = time.monotonic()
    got = p.take(1024, 2048)
    waited = time.monotonic() - t
    p.close()
    if not same(got, ref.sample(0, 1024, 2048)):
        raise SystemExit("slow thread: samples [1024, 2048) differ from Generator.sample's")
    if waited > 0.6 or p.thread_samples > 256:
        raise SystemExit("slow thread: take() waited %.3f s and the thread made %d samples: the "
                         "step must wait only for the chunk (256) the thread held"
                         % (waited, p.thread_samples))
    print("ok: a slow thread made %d of 1024 samples; the step made the rest and waited %.2f s"
          % (p.thread_samples, waited))

    # An error on the thread is raised by the step's take().
    g = Gated(2026, 1024)
    g.fail = ValueError("planted failure on the prefetch thread")
    p = Prefetcher(g, 256, 1 << 20, 64)
    p.take(0, 256)
    g.entered.wait(10)
    try:
        p.take(256, 512)
        raise SystemExit("the thread's error was lost")
    except ValueError as e:
        if "planted failure" not in str(e):
            raise
    p.close()
    print("ok: the thread's error reached the step")

    # A thread that keeps its chunk: the wait is bounded and names the range.
    g = Gated(2026, 1024)
    g.gate.clear()
    p = Prefetcher(g, 256, 1 << 20, 64)
    p.TIMEOUT_S = 0.5
    p.take(0, 256)
    g.entered.wait(10)
    try:
        p.take(256, 512)
        raise SystemExit("take() returned while the thread held a chunk")
    except hb.HbError as e:
        if "[256, 512)" not in str(e) or e.status != hb.ERR_TIMEOUT:
            raise SystemExit("the timeout's error does not name the range: %s" % e)
        print("ok: bounded wait: %s" % e)
    g.gate.set()
    p.close()


if __name__ == "__main__":
    main()
