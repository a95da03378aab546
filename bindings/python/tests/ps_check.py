"""Parameter-server mode from Python, run by hbrun --ps (ctest python_ps_*).

Every task runs this program, as in TensorFlow: the ps task calls
Context.serve, the workers train.

  ps_check.py train
      Under ``hbrun -n W --ps P`` with staleness 0 (W >= 3 for the rank order
      of the sums to show in the bits): a ps table (Adagrad,
      placement=hb.PLACEMENT_PS) and a dense buffer (SGD) trained for a few
      steps with gradients that depend on the rows pulled; the chief's final
      table and every pull of the dense buffer are bit-equal to a
      single-process numpy reference of the same rounds (each id's workers'
      sums added in rank order, one optimizer step per round). Positions
      (bytes with a NUL) ride with the pushes: ps_position returns the last
      one; ps_stats counts the pushes, rounds and no staleness. With a
      directory argument, a job checkpoint (hb.Checkpoint.add_table and
      add_ps_dense) taken after step 3 and restored at the end brings the
      table, the dense buffer and the position back to that step's bits.
  ps_check.py restart
      Under ``hbrun -n 2 --ps 1 --max-restarts 1``: worker 1 dies (SIGKILL)
      between hb_ps_set_position and the push of a step on its first start;
      hbrun restarts it, ps_position returns the position of the last step
      it applied, and it resumes there: every sample's row is applied
      exactly once (checked by the chief once the other has left).
  ps_check.py splits DIR
      Under ``hbrun -n 2 --ps 1 --max-restarts 1``: dynamic splits of a
      reader's file (Reader.splits: byte ranges handed out by ps task 0, 2
      epochs, split size 97 bytes, so splits cut lines); each worker pushes
      -1 to the row of each line's serial with ctx.ps_split_commit before
      the push; worker 1 SIGKILLs itself after a push, before its next
      commit (the queue one step behind the ps), on its first start. Every
      line is applied exactly once per epoch.
"""

import os
import shutil
import signal
import struct
import sys
import time

import numpy as np

import hb

STEPS, ROWS, DIM, DENSE = 6, 40, 4, 300
LR, DENSE_LR = 0.25, 0.5


def batch(rank, step):
    """The ids of (rank, step): duplicates within a batch, overlaps between
    ranks, different counts per rank."""
    rng = np.random.default_rng(1000 * rank + step)
    return rng.integers(0, ROWS, size=5 + 2 * rank + step % 3).astype(np.int64)


def table_grad(rows, ids, rank, step):
    """Depends on the rows pulled, so a wrong round order shows."""
    c = (ids.astype(np.float32) * np.float32(0.01) + np.float32(rank - step * 0.1))[:, None]
    return rows * np.float32(0.5) + c


def dense_grad(rank, step):
    i = np.arange(DENSE, dtype=np.float32)
    return np.float32(1e-3) * np.sin(i + np.float32(7 * rank + step)).astype(np.float32)


def position(rank, step):
    return struct.pack("<qq", rank, step) + b"\0pos"


def reference(world):
    """Single-process rounds of the ps at staleness 0: rows and dense values."""
    w = np.full((ROWS, DIM), 0.5, np.float32)
    acc = np.full((ROWS, DIM), 0.1, np.float32)  # initial_accumulator
    d = np.linspace(-1, 1, DENSE).astype(np.float32)
    dense_seen = []
    for s in range(STEPS):
        dense_seen.append(d.copy())
        total = {}
        for r in range(world):  # rank order: the first copied, the later added
            ids = batch(r, s)
            g = table_grad(w[ids], ids, r, s)
            mine = {}
            for i, row in zip(ids.tolist(), g):  # batch order
                mine[i] = mine[i] + row if i in mine else row.copy()
            for i, row in mine.items():
                total[i] = total[i] + row if i in total else row
        for i, g in total.items():
            a = acc[i] + g * g
            acc[i] = a
            w[i] = w[i] - np.float32(LR) * g / (np.sqrt(a) + np.float32(1e-8))
        gsum = dense_grad(0, s)
        for r in range(1, world):
            gsum = gsum + dense_grad(r, s)
        d = d - np.float32(DENSE_LR) * gsum
    return w, dense_seen, d


CKPT_AT = 3


def train(ctx, ckpt_dir=None):
    rank, world = ctx.rank, ctx.world_size
    assert ctx.num_ps >= 1 and ctx.task_type in ("chief", "worker"), (ctx.num_ps, ctx.task_type)
    assert ctx.ps_position() is None  # nothing committed yet
    want_w, want_dense, want_last = reference(world)
    emb = hb.Embedding(ctx, "py_ps", DIM, num_rows=ROWS, placement=hb.PLACEMENT_PS,
                       initializer=hb.INIT_CONSTANT, init_a=0.5, optimizer=hb.OPT_ADAGRAD,
                       learning_rate=LR, initial_accumulator=0.1, epsilon=1e-8)
    assert emb.local_rows == 0  # the rows live on the ps tasks
    dense = hb.PsDense(ctx, "py_dense", DENSE, init=np.linspace(-1, 1, DENSE).astype(np.float32),
                       optimizer=hb.OPT_SGD, learning_rate=DENSE_LR)
    buf = np.empty(DENSE, np.float32)
    ck = None
    if ckpt_dir:
        if rank == 0:  # nobody else touches it before the collective create
            shutil.rmtree(ckpt_dir, ignore_errors=True)
        ck = hb.Checkpoint(ctx, ckpt_dir)
        ck.add_table(emb)
        ck.add_ps_dense(dense)
    for s in range(STEPS):
        if ck is not None and s == CKPT_AT:
            ck.save(s)
            saved = (dense.pull().copy(), emb.lookup(np.arange(ROWS, dtype=np.int64)))
            assert np.array_equal(saved[0].view(np.uint32), want_dense[s].view(np.uint32))
        got = dense.pull(buf)
        assert got is buf  # written in place
        assert np.array_equal(buf.view(np.uint32), want_dense[s].view(np.uint32)), \
            "rank %d step %d: dense pull differs from the reference" % (rank, s)
        ids = batch(rank, s)
        rows = emb.lookup(ids)
        ctx.ps_set_position(position(rank, s + 1))
        emb.apply_gradients(ids, table_grad(rows, ids, rank, s))
        dense.push(dense_grad(rank, s))
    pos, step = ctx.ps_position(step=True)
    assert (pos, step) == (position(rank, STEPS), STEPS), (pos, step)
    final = dense.pull()
    assert np.array_equal(final.view(np.uint32), want_last.view(np.uint32))
    rows = emb.lookup(np.arange(ROWS, dtype=np.int64))  # after every worker's last round
    assert np.array_equal(rows.view(np.uint32), want_w.view(np.uint32)), \
        "rank %d: table differs from the reference: max |diff| %g" % (rank, np.abs(rows - want_w).max())
    st = ctx.ps_stats()
    assert st["bound_violations"] == 0 and st["max_staleness"] == 0, st
    assert st["pushes"] >= world * STEPS and st["rounds"] >= STEPS, st
    assert st["rows_pulled"] > 0 and st["rows_pushed"] > 0 and st["busy_us"] >= 0, st
    with pytest_raises(hb.HbError, "not a ps task"):
        ctx.serve()
    with pytest_raises(hb.HbTypeError, "position: expected bytes"):
        ctx.ps_set_position("text")
    with pytest_raises(hb.HbValueError, "out: needs 300"):
        dense.pull(np.empty(5, np.float32))
    print("rank %d: ps table and dense buffer bit-equal to the reference after %d steps; "
          "position %r at step %d; stats %s" % (rank, STEPS, pos, step, st))
    if ck is not None:
        # Back to step CKPT_AT on the ps tasks: rows, slots, dense values and
        # every rank's position (a step boundary of the whole job).
        assert ck.restore_latest() == CKPT_AT
        assert np.array_equal(dense.pull().view(np.uint32), saved[0].view(np.uint32))
        back = emb.lookup(np.arange(ROWS, dtype=np.int64))
        assert np.array_equal(back.view(np.uint32), saved[1].view(np.uint32))
        assert ctx.ps_position(step=True) == (position(rank, CKPT_AT), CKPT_AT)
        print("rank %d: job checkpoint of step %d restored bit for bit" % (rank, CKPT_AT))
        ck.close()
    dense.close()
    emb.close()


class pytest_raises:
    """A small pytest.raises (this runs outside pytest)."""

    def __init__(self, cls, text):
        self.cls, self.text = cls, text

    def __enter__(self):
        return self

    def __exit__(self, typ, value, tb):
        assert typ is not None and issubclass(typ, self.cls), (typ, value)
        assert self.text in str(value), value
        return True


SAMPLES, BATCH, KILL_AT = 60, 4, 7  # worker 1 dies in step 7 of its first start


def restart(ctx):
    rank, world = ctx.rank, ctx.world_size
    emb = hb.Embedding(ctx, "py_count", 1, num_rows=world * SAMPLES, placement=hb.PLACEMENT_PS,
                       optimizer=hb.OPT_SGD, learning_rate=1.0)
    pos = ctx.ps_position()
    nxt = 0 if pos is None else struct.unpack("<q", pos)[0]
    first = os.environ.get("HB_RESTART_COUNT", "0") == "0"
    if rank == 1 and not first:
        # The last step applied before the kill: KILL_AT steps of BATCH.
        assert nxt == KILL_AT * BATCH, (pos, nxt)
    print("rank %d starts at sample %d (restart %s)" % (rank, nxt, not first), flush=True)
    step = 0
    while nxt < SAMPLES:
        end = min(SAMPLES, nxt + BATCH)
        ids = np.arange(rank * SAMPLES + nxt, rank * SAMPLES + end, dtype=np.int64)
        emb.lookup(ids)
        ctx.ps_set_position(struct.pack("<q", end))
        if rank == 1 and first and step == KILL_AT:
            os.kill(os.getpid(), signal.SIGKILL)  # after the mark, before the push
        emb.apply_gradients(ids, np.full((ids.size, 1), -1.0, np.float32))
        nxt, step = end, step + 1
    emb.close()  # out of data: holds nobody back
    if rank == 0:
        deadline = time.monotonic() + 60
        while ctx.ps_stats()["workers_left"] < world - 1:
            assert time.monotonic() < deadline, "the other workers did not finish"
            time.sleep(0.05)
        emb = hb.Embedding(ctx, "py_count", 1, num_rows=world * SAMPLES, placement=hb.PLACEMENT_PS,
                           optimizer=hb.OPT_SGD, learning_rate=1.0)
        rows = emb.lookup(np.arange(world * SAMPLES, dtype=np.int64)).ravel()
        bad = np.flatnonzero(rows != 1.0)
        st = ctx.ps_stats()
        assert bad.size == 0, "samples %s applied %s times" % (bad[:5], rows[bad[:5]])
        assert st["workers_lost"] >= 1, st
        print("count: %d samples applied exactly once; %d workers lost, %d rejoined"
              % (rows.size, st["workers_lost"], st["workers_rejoined"]))
        emb.close()


LINES, EPOCHS, SPLIT_BYTES, SPLIT_KILL_AT = 300, 2, 97, 9


def split_corpus():
    """Lines "label<TAB>serial in hex", of uneven lengths."""
    return "".join("%d\t%x\n" % (i % 2, i * 977) for i in range(LINES))


def splits(ctx, directory):
    rank, world = ctx.rank, ctx.world_size
    path = os.path.join(directory, "part-0.tsv")
    tmp = "%s.%d" % (path, os.getpid())
    with open(tmp, "w") as f:  # every worker writes the same bytes
        f.write(split_corpus())
    os.replace(tmp, path)
    emb = hb.Embedding(ctx, "py_splits", 1, num_rows=LINES * 977, placement=hb.PLACEMENT_PS,
                       optimizer=hb.OPT_SGD, learning_rate=1.0)
    reader = hb.Reader(path, columns="LC", batch_size=4, chunk_bytes=50)
    assert reader.total_bytes() == len(split_corpus())
    first = os.environ.get("HB_RESTART_COUNT", "0") == "0"
    steps = taken = 0
    for b, split, offset in reader.splits(ctx):
        ids = b.ids.copy()
        emb.lookup(ids)
        ctx.ps_split_commit(split, offset)
        emb.apply_gradients(ids, np.full((ids.size, 1), -1.0, np.float32))
        if rank == 1 and first and steps == SPLIT_KILL_AT:
            # After the push, before the next commit: the queue has not
            # heard of this step's offset yet, the ps has it.
            os.kill(os.getpid(), signal.SIGKILL)
        steps, taken = steps + 1, taken + ids.size
    print("rank %d: %d lines in %d steps (restart %s)" % (rank, taken, steps, not first), flush=True)
    reader.close()
    emb.close()
    if rank == 0:
        deadline = time.monotonic() + 60
        while ctx.ps_stats()["workers_left"] < world - 1:
            assert time.monotonic() < deadline, "the other workers did not finish"
            time.sleep(0.05)
        emb = hb.Embedding(ctx, "py_splits", 1, num_rows=LINES * 977, placement=hb.PLACEMENT_PS,
                           optimizer=hb.OPT_SGD, learning_rate=1.0)
        ids = np.arange(LINES, dtype=np.int64) * 977
        rows = emb.lookup(ids).ravel()
        bad = np.flatnonzero(rows != float(EPOCHS))
        assert bad.size == 0, "lines %s applied %s times in %d epochs" % (bad[:5], rows[bad[:5]], EPOCHS)
        assert ctx.ps_stats()["workers_lost"] >= 1
        assert ctx.ps_split_next() is None  # every split handed out
        print("splits: %d lines x %d epochs applied exactly once" % (LINES, EPOCHS))
        emb.close()


def main():
    mode = sys.argv[1]
    if mode == "splits":  # ps task 0 reads the queue's options at its start
        os.environ.update(HB_PS_SPLIT_SAMPLES=str(len(split_corpus())),
                          HB_PS_SPLIT_SIZE=str(SPLIT_BYTES), HB_PS_SPLIT_EPOCHS=str(EPOCHS),
                          HB_PS_SPLIT_SEED="11")
    with hb.Context() as ctx:
        if ctx.task_type == "ps":
            ctx.serve()
            return
        {"train": train, "restart": restart, "splits": splits}[mode](ctx, *sys.argv[2:])


if __name__ == "__main__":
    main()
