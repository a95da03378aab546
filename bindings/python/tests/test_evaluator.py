"""hb.Evaluator following hb.Checkpoint in one process (ctest
python_binding): every checkpoint once in step order, a subset restored,
one JSON line each, the end after Checkpoint.finish(). Processes: tests/evaluator."""

import json
import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hb  # noqa: E402


def _table(ctx):
    return hb.Embedding(ctx, "t", 4, num_rows=50, optimizer=hb.OPT_ADAGRAD,
                        initializer=hb.INIT_UNIFORM, init_a=-0.1, init_b=0.1)


def test_evaluator_follows_every_checkpoint_then_ends(tmp_path):
    d, log = tmp_path / "ckpt", tmp_path / "eval.jsonl"
    with hb.Context(rank=0, world_size=1) as tctx, \
            hb.Context(rank=0, world_size=1) as ectx:
        table, w = _table(tctx), np.zeros(6, np.float32)
        ck = hb.Checkpoint(tctx, d, job_id="py", keep=10)
        ck.add_table(table)
        ck.add_buffer("w", w)
        ck.add_buffer("slots", np.zeros(6, np.float32))  # not evaluated
        ev_table, ev_w = _table(ectx), np.zeros(6, np.float32)
        mean = hb.Metric(hb.METRIC_MEAN, ectx)

        def evaluator(timeout_ms=300):
            ev = hb.Evaluator(ectx, d, job_id="py", log_path=log, poll_ms=10,
                              timeout_ms=timeout_ms)
            ev.add_table(ev_table)
            ev.add_buffer("w", ev_w)
            ev.add_metric("w0", mean)
            return ev

        ev = evaluator()
        want = {}
        for step in (2, 4, 6):
            ids = np.array([step, 7], np.int64)
            table.apply_gradients(ids, np.full((2, 4), 0.1 * step, np.float32))
            w[:] = step
            ck.save(step)
            want[step] = table.lookup(np.arange(10))
        for step in (2, 4, 6):
            assert ev.next() == step
            np.testing.assert_array_equal(ev_table.lookup(np.arange(10)), want[step])
            assert ev_w[0] == step
            mean.update(np.zeros(1, np.float32), np.array([step / 10], np.float32))
            assert ev.report() == {"w0": pytest.approx(step / 10)}
        with pytest.raises(hb.HbError) as e:  # nothing past step 6 yet
            ev.next()
        assert e.value.status == hb.ERR_TIMEOUT
        ck.finish()
        assert ev.next() == -1
        # No dynamic splits in this job: no queue in its checkpoints.
        assert ev.stats == {"evaluated": 3, "reported": 3, "skipped": 0,
                            "last_step": 6, "finished": 1, "split_epoch": -1,
                            "split_epochs": 0, "splits_done": 0, "splits_open": 0,
                            "split_samples_done": 0, "split_samples_total": 0}
        assert ev.open_splits == []
        lines = [json.loads(l) for l in log.read_text().splitlines()]
        assert [l["step"] for l in lines] == [2, 4, 6]
        assert set(lines[0]) == {"step", "time", "w0"}
        ev.close()
        # Started again on its log: nothing is evaluated twice.
        ev = evaluator()
        assert list(ev) == []
        assert len(log.read_text().splitlines()) == 3


def test_evaluator_refuses_another_job(tmp_path):
    d = tmp_path / "ckpt"
    with hb.Context(rank=0, world_size=1) as ctx:
        hb.Checkpoint(ctx, d, job_id="a")
        with pytest.raises(hb.HbError) as e:
            hb.Evaluator(ctx, d, job_id="b")
        assert "holds the checkpoints of job 'a'" in str(e.value)
