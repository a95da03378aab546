"""The Python reader (hb.Reader, bindings/python/hb/reader.py): values
against a reference parser, zero-copy lifetime, errors, torch tensors, and
a batch feeding embedding lookups.

Run: PYTHONPATH=<build>/bindings/python python3 -m pytest tests/reader
"""

import gc
import gzip
import random

import numpy as np
import pytest

import hb

DENSE, SPARSE = 13, 26


def make_lines(n, seed):
    rng = random.Random(seed)
    lines = []
    for i in range(n):
        f = [str(rng.randint(0, 1))]
        f += ["" if rng.random() < 0.1 else str(rng.randint(-5, 10 ** 5)) for _ in range(DENSE)]
        f.append("%x" % i)  # serial number
        f += ["" if rng.random() < 0.2 else "%08x" % rng.getrandbits(32) for _ in range(SPARSE - 1)]
        lines.append("\t".join(f))
    return lines


def ref_parse(line):
    f = line.split("\t")
    dense = [float(x) if x else 0.0 for x in f[1:1 + DENSE]]
    ids = [int(x, 16) if x else None for x in f[1 + DENSE:]]
    return float(f[0]), dense, ids


def write(path, lines, compress=False):
    data = ("\n".join(lines) + "\n").encode()
    if compress:
        with gzip.open(path, "wb") as g:
            g.write(data)
    else:
        path.write_bytes(data)


@pytest.fixture
def files(tmp_path):
    lines = make_lines(700, 1)
    parts = [lines[:100], lines[100:101], [], lines[101:450], lines[450:]]
    paths = []
    for k, p in enumerate(parts):
        path = tmp_path / ("part-%d.tsv" % k)
        write(path, p)
        paths.append(path)
    return paths, lines


def rows(batch):
    """Per sample: (label, dense, ids with None for an empty bag)."""
    out = []
    n = batch.size
    for i in range(n):
        ids = []
        for f in range(batch.num_sparse):
            lo, hi = batch.offsets[f * n + i], batch.offsets[f * n + i + 1]
            assert hi - lo in (0, 1)
            ids.append(int(batch.ids[lo]) if hi > lo else None)
        out.append((float(batch.labels[i]), batch.dense[i].tolist(), ids))
    return out


def test_values_equal_a_reference_parser(files):
    paths, lines = files
    with hb.Reader([str(paths[0].parent / "part-*.tsv")], batch_size=64, num_threads=3,
                   chunk_bytes=2000) as r:
        assert r.num_files == 5
        got = [row for b in r for row in rows(b)]
        assert r.lines == 700
    assert got == [ref_parse(l) for l in lines]


def test_gzip_and_plain_agree_and_shards_cover_everything(tmp_path, files):
    paths, lines = files
    gz = []
    for k, p in enumerate(paths):
        q = tmp_path / ("part-%d.gz" % k)
        write(q, p.read_text().splitlines(), compress=True)
        gz.append(q)
    plain = [row for b in hb.Reader(paths, batch_size=50) for row in rows(b)]
    zipped = [row for b in hb.Reader(gz, batch_size=50) for row in rows(b)]
    assert plain == zipped
    for world in (2, 3, 4):
        for source in (paths, gz):
            serials = []
            for rank in range(world):
                r = hb.Reader(source, batch_size=32, shard_index=rank, num_shards=world)
                serials += [row[2][0] for b in r for row in rows(b)]
            assert sorted(serials) == list(range(700))


def test_splits_read_every_line_once_resumed_at_committed_offsets(files):
    """Dynamic splits without a ps (Reader.seek_split / split_offset): byte
    ranges of 3000 bytes cut lines; every third batch a new reader resumes
    at the committed offset. Every line exactly once, in file order."""
    paths, lines = files
    r = hb.Reader(paths, batch_size=16)
    total = r.total_bytes()
    assert total == sum(p.stat().st_size for p in paths)
    with pytest.raises(hb.HbError, match="not reading a split"):
        r.split_offset()
    got, batches = [], 0
    for begin in range(0, total, 3000):
        end = min(total, begin + 3000)
        r.seek_split(begin, end)
        while True:
            b = r.next()
            offset = r.split_offset()
            assert begin <= offset <= end
            if b is None:
                assert offset == end
                break
            got += rows(b)
            batches += 1
            if batches % 3 == 0:  # a worker killed here: a new one resumes
                r.close()
                r = hb.Reader(paths, batch_size=16)
                r.seek_split(offset, end)
    r.close()
    assert got == [ref_parse(l) for l in lines]
    with pytest.raises(hb.HbError, match="not a range"):
        hb.Reader(paths).seek_split(10, 5)


def test_arrays_outlive_the_reader_and_the_batch(files):
    paths, lines = files
    r = hb.Reader(paths, batch_size=100)
    b = r.next()
    labels, ids, offsets = b.labels, b.ids, b.offsets
    want = rows(b)
    del b
    r.close()
    gc.collect()
    assert labels.tolist() == [w[0] for w in want]
    assert offsets[-1] == ids.size


def test_torch_tensors_share_memory(files):
    torch = pytest.importorskip("torch")
    paths, _ = files
    b = hb.Reader(paths, batch_size=10).next()
    t = b.to_torch()
    assert t["ids"].dtype == torch.int64 and t["offsets"].shape[0] == 26 * 10 + 1
    t["labels"][0] = 42.0  # same memory as the numpy view
    assert b.labels[0] == 42.0


def test_errors_name_file_line_and_column(tmp_path):
    lines = make_lines(5, 2)
    bad = lines[:3] + [lines[3].replace("\t", "\tzz", 1)] + lines[4:]
    path = tmp_path / "bad.tsv"
    write(path, bad)
    r = hb.Reader([path], batch_size=2)
    with pytest.raises(hb.HbError) as e:
        list(r)
    assert e.value.status == hb.ERR_CORRUPT
    assert "%s: line 4, column 2" % path in str(e.value)
    r = hb.Reader([path], batch_size=2, skip_bad_lines=1)
    assert sum(len(b) for b in r) == 4 and r.skipped_lines == 1
    with pytest.raises(hb.HbError) as e:
        hb.Reader([tmp_path / "missing.tsv"])
    assert e.value.status == hb.ERR_IO and "missing.tsv" in str(e.value)
    with pytest.raises(TypeError):
        hb.Reader([path], no_such_field=1)


def lookup_batch(tables, batch):
    """Sum-pooled embeddings per feature, (num_sparse, n, dim): one lookup
    per table on the feature's ids, pooled over its offsets: the reference
    for the collection's one call on (batch.ids, batch.offsets)."""
    n = batch.size
    out = np.zeros((batch.num_sparse, n, tables[0].dim), np.float32)
    for f, table in enumerate(tables):
        ids, offsets = batch.feature(f)
        rows_ = table.lookup(np.ascontiguousarray(ids))
        lengths = np.diff(offsets)
        nonempty = lengths > 0
        if rows_.shape[0]:
            out[f, nonempty] = np.add.reduceat(rows_, offsets[:-1][nonempty], axis=0)
    return out


def test_a_batch_feeds_embedding_lookups(files):
    paths, lines = files
    dim = 4
    with hb.Context() as ctx:
        tables = [hb.Embedding(ctx, "t%02d" % f, dim, num_rows=1 << 12,
                               initializer=hb.INIT_UNIFORM, init_a=-1.0, init_b=1.0, seed=7)
                  for f in range(SPARSE)]
        # The batch's flat (ids, offsets) is the collection's input as is.
        coll = hb.Collection(ctx, tables)
        with hb.Reader(paths, ctx, batch_size=128, num_rows=1 << 12) as r:
            seen = 0
            for b in r:
                pooled = lookup_batch(tables, b)
                got = coll.lookup(b.ids, b.offsets)
                assert got.shape == (b.size, SPARSE * dim)
                for f in range(SPARSE):
                    np.testing.assert_array_equal(got[:, f * dim:(f + 1) * dim], pooled[f])
                want = [ref_parse(l)[2] for l in lines[seen:seen + b.size]]
                for f in range(SPARSE):
                    present = np.array([ids[f] is not None for ids in want])
                    ref_ids = np.array([ids[f] % (1 << 12) for ids in want if ids[f] is not None],
                                       np.int64)
                    np.testing.assert_array_equal(pooled[f, present], tables[f].lookup(ref_ids))
                    assert not pooled[f, ~present].any()
                seen += b.size
            assert seen == 700
