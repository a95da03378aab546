"""Checks synth_data.py against the C++ generator (synth_dump), and its
native helper's batches against its numpy ones.

    check_synth.py SYNTH_DUMP NATIVE_LIB

Ids and labels must be equal; dense features and planted probabilities are
float32 and may differ by one unit in the last place where numpy's vector
log / cos / exp round differently from libm's.
"""

import subprocess
import sys
import threading

import numpy as np

import synth_data


def check(dump, seed, vocab, split, begin, end):
    out = subprocess.run([dump, str(seed), str(vocab), str(split), str(begin), str(end)],
                         check=True, capture_output=True, text=True).stdout.split("\n")
    rows = [line.split() for line in out if line]
    if len(rows) != end - begin:
        raise SystemExit("synth_dump printed %d samples, expected %d" % (len(rows), end - begin))
    t, d = synth_data.TABLES, synth_data.DENSE
    index = np.array([int(r[0]) for r in rows])
    ids = np.array([[int(x) for x in r[1:1 + t]] for r in rows], dtype=np.int64)
    dense = np.array([[float.fromhex(x) for x in r[1 + t:1 + t + d]] for r in rows], dtype=np.float32)
    prob = np.array([float.fromhex(r[1 + t + d]) for r in rows], dtype=np.float32)
    label = np.array([float(r[2 + t + d]) for r in rows], dtype=np.float32)

    s = synth_data.Generator(seed, vocab).sample(split, begin, end)
    where = "seed %d vocab %d split %d samples [%d, %d)" % (seed, vocab, split, begin, end)
    assert np.array_equal(index, np.arange(begin, end)), where
    bad = np.argwhere(s.ids != ids)
    if bad.size:
        i, j = bad[0]
        raise SystemExit("%s: sample %d table %d: id %d, C++ %d" % (where, begin + i, j, s.ids[i, j], ids[i, j]))
    for name, py, cc in (("dense", s.dense, dense), ("planted_prob", s.planted_prob, prob)):
        ulps = np.abs(py.view(np.int32).astype(np.int64) - cc.view(np.int32).astype(np.int64))
        if ulps.max(initial=0) > 1:
            i = np.unravel_index(np.argmax(ulps), ulps.shape)
            raise SystemExit("%s: %s%s: %r, C++ %r" % (where, name, i, py[i], cc[i]))
    if not np.array_equal(s.label, label):
        i = int(np.argmax(s.label != label))
        raise SystemExit("%s: sample %d: label %g, C++ %g" % (where, begin + i, s.label[i], label[i]))
    print("ok: %s (%d clicks)" % (where, int(label.sum())))


def same_samples(a, b):
    return all(np.array_equal(np.ascontiguousarray(getattr(a, f)).view(np.uint8),
                              np.ascontiguousarray(getattr(b, f)).view(np.uint8))
               for f in ("ids", "dense", "label", "planted_prob"))


def check_native(native, seed, vocab):
    """The native helper (synth_native.cc) makes the numpy generator's
    samples bit for bit: both splits, indices past 2^40 and 2^56, a
    1-sample batch, and chunks into rows of a batch as the prefetch writes
    them."""
    g, gn = synth_data.Generator(seed, vocab), synth_data.Generator(seed, vocab, native=native)
    for split in (0, 1):
        for begin, end in ((0, 512), (1000, 1777), ((1 << 40) - 300, (1 << 40) + 300),
                           ((1 << 56) - 300, (1 << 56) + 300), (5, 6)):
            if not same_samples(g.sample(split, begin, end), gn.sample(split, begin, end)):
                raise SystemExit("seed %d vocab %d split %d samples [%d, %d): native and numpy "
                                 "differ" % (seed, vocab, split, begin, end))
        want, got = synth_data.new_samples(700), synth_data.new_samples(700)
        for out, gen in ((want, g), (got, gn)):
            gen.sample_into(split, 100, 400, out, 0)
            gen.sample_into(split, 400, 800, out, 300)
        if not same_samples(want, got):
            raise SystemExit("seed %d vocab %d split %d: native chunks differ"
                             % (seed, vocab, split))
    try:
        gn.sample_into(0, 0, 10, synth_data.new_samples(12), 3)
    except ValueError as e:
        assert "out has 12 int64 rows from 3, 10 wanted" in str(e), e
    else:
        raise SystemExit("native sample_into wrote past its batch's rows")
    print("ok: seed %d vocab %d: native batches equal numpy's" % (seed, vocab))


def check_reuse(seed, vocab, native=None):
    """Generator.sample reuses per-thread work arrays: batches of changing
    sizes, and two threads sampling one generator at once, must give the
    bits of one fresh (numpy) generator's single batch."""
    g = synth_data.Generator(seed, vocab, native=native)
    want = synth_data.Generator(seed, vocab).sample(0, 0, 4096)
    cuts = [0, 512, 1024, 1025, 1536, 2048, 2048, 2560, 4096]
    parts = [g.sample(0, a, b) for a, b in zip(cuts, cuts[1:])]
    for f in ("ids", "dense", "label", "planted_prob"):
        got = np.concatenate([getattr(p, f) for p in parts])
        if not np.array_equal(got.view(np.uint8), np.ascontiguousarray(getattr(want, f)).view(np.uint8)):
            raise SystemExit("seed %d vocab %d: %s of batches of changing sizes differ" % (seed, vocab, f))
    got, errors = {}, []

    def run(split, n):
        try:
            got[split] = [g.sample(split, i * n, (i + 1) * n) for i in range(40)]
        except Exception as e:  # reported below, not lost with the thread
            errors.append(e)

    # One batch size (one shape of work arrays) and a thread switch every
    # few numpy calls, so shared arrays would be overwritten mid-batch.
    jobs = ((0, 512), (1, 512))
    threads = [threading.Thread(target=run, args=job) for job in jobs]
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        sys.setswitchinterval(interval)
    if errors:
        raise errors[0]
    ref = synth_data.Generator(seed, vocab)
    for split, n in jobs:
        for i in range(40):
            if not same_samples(got[split][i], ref.sample(split, i * n, (i + 1) * n)):
                raise SystemExit("seed %d vocab %d: split %d batch %d differs when two threads "
                                 "sample at once" % (seed, vocab, split, i))
    print("ok: seed %d vocab %d%s: batches of changing sizes and two threads at once"
          % (seed, vocab, " (native)" if native else ""))


def main():
    dump = sys.argv[1]
    check(dump, 2026, 8192, 0, 0, 2000)
    check(dump, 2026, 8192, 1, 123456, 124456)
    check(dump, 7, 1024, 0, (1 << 40) - 500, (1 << 40) + 500)
    # Indices past 2^56, where the split's bit 56 is an xor, not an add.
    check(dump, 7, 1024, 1, (1 << 56) - 500, (1 << 56) + 500)
    # A large vocabulary: buckets of the inverse CDF that hold several CDF
    # entries (synth_data searches those), ~3 % of the uniforms.
    check(dump, 2026, 131072, 0, 0, 3000)
    check_reuse(2026, 2048)
    native = synth_data.load_native(sys.argv[2])
    for seed, vocab in ((2026, 1), (2026, 2), (7, 1024), (2026, 2048), (2026, 8192),
                        (2026, 16384), (2026, 131072)):
        check_native(native, seed, vocab)
    # The helper's other layout at each side of NATIVE_BY_RANK: weights by
    # rank read sample by sample at small tables, by table at large ones.
    by_rank = synth_data.NATIVE_BY_RANK
    try:
        for threshold, vocab in ((1, 2048), (1, 8192), (1 << 30, 131072)):
            synth_data.NATIVE_BY_RANK = threshold
            check_native(native, 2026, vocab)
    finally:
        synth_data.NATIVE_BY_RANK = by_rank
    check_reuse(2026, 2048, native)


if __name__ == "__main__":
    main()
