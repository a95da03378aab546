"""Versioned exports and a serving table that follows them from Python:
lookup_version reports the version read, reader threads never see two
versions in one call while deltas and full exports are applied, and
out-of-order or damaged files are refused with the served version intact."""
import os
import sys
import threading
import time

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(__file__))
import hb  # noqa: E402

N, DIM, VERSIONS = 100, 4, 12


def test_serving_follows_versions_under_load(tmp_path):
    ids = np.arange(N, dtype=np.int64) * 7 - 50
    files = {}
    with hb.Context(rank=0, world_size=1) as ctx:
        # SGD, rate 1, gradient -1 on every id per version: version v's rows are all v.
        with hb.Embedding(ctx, "ps", DIM, optimizer=hb.OPT_SGD, learning_rate=1.0) as emb:
            grads = np.full((N, DIM), -1.0, np.float32)
            for v in range(1, VERSIONS + 1):
                emb.apply_gradients(ids, grads)
                files[v] = tmp_path / ("v%d.hbe" % v)
                emb.export_version(files[v], v, 0 if v == 1 or v % 5 == 0 else v - 1)
            assert emb.lookup_version(ids)[1] == 0  # a sharded table has no version
    with hb.Embedding.open(files[1]) as s:
        rows, version = s.lookup_version(ids)
        assert version == 1 and s.version == 1 and (rows == 1).all()
        with pytest.raises(hb.HbError) as info:
            s.update(files[3])
        assert info.value.name == "HB_ERR_INVALID_ARGUMENT"
        assert "delta from version 2" in info.value.message
        assert s.version == 1

        stop, bad, calls = threading.Event(), [], [0]

        def reader():
            out = np.empty((N, DIM), np.float32)
            while not stop.is_set():
                _, v = s.lookup_version(ids, out)
                if not (out == v).all():
                    bad.append(v)
                calls[0] += 1

        threads = [threading.Thread(target=reader) for _ in range(2)]
        for t in threads:
            t.start()
        for v in range(2, VERSIONS + 1):
            s.update(files[v])
            time.sleep(0.002)
        stop.set()
        for t in threads:
            t.join()
        assert bad == [] and calls[0] > 0 and s.version == VERSIONS

        data = bytearray(files[VERSIONS].read_bytes())
        data[len(data) // 2] ^= 1
        damaged = tmp_path / "bad.hbe"
        damaged.write_bytes(bytes(data))
        with pytest.raises(hb.HbError) as info:
            s.update(damaged)
        assert info.value.name == "HB_ERR_CORRUPT"
        assert s.version == VERSIONS
        assert (s.lookup(ids) == VERSIONS).all()
