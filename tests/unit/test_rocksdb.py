"""logdevice.storage.rocksdb: the low-level RocksDB layer, against real RocksDB in tmp dirs."""

import gc
import struct

import numpy as np
import pytest

from logdevice.errors import E, LogDeviceError
from logdevice.storage._rdb import status_for as _status_for
from logdevice.storage.rocksdb import DB, Options, WriteBatch, list_column_families


@pytest.fixture
def db(tmp_path):
    with DB.open(tmp_path / "db", ["a", "b"]) as d:
        yield d


def _random_kv(rng, n, max_key=24, max_val=300):
    keys = {bytes(rng.integers(0, 256, rng.integers(1, max_key), dtype=np.uint8)) for _ in range(n)}
    return {k: bytes(rng.integers(0, 256, rng.integers(0, max_val), dtype=np.uint8)) for k in keys}


def _pack(items):
    buf = b"".join(items)
    offs = np.zeros(len(items) + 1, np.uint64)
    np.cumsum([len(x) for x in items], out=offs[1:])
    return buf, offs


def test_open_creates_and_reopens_column_families(tmp_path):
    path = tmp_path / "db"
    with DB.open(path, ["x"]) as d:
        assert set(d.column_families()) == {"default", "x"}
        d.create_cf("y")
        d.put(b"k", b"v", d["y"])
    assert set(list_column_families(path)) == {"default", "x", "y"}
    with DB.open(path) as d:  # every existing family is opened
        assert d.get(b"k", d["y"]) == b"v"
        d.drop_cf("y")
        assert "y" not in d
        with pytest.raises(LogDeviceError) as ei:
            d["y"]
        assert ei.value.status == E.NOTFOUND
        with pytest.raises(LogDeviceError) as ei:
            d.drop_cf("default")
        assert ei.value.status == E.INVALID_PARAM
    assert set(list_column_families(path)) == {"default", "x"}


def test_batch_put_delete_range_and_get(db):
    b = WriteBatch()
    for i in range(10):
        b.put(b"k%02d" % i, b"v%d" % i, db["a"])
    b.put(b"plain", bytearray(b"default cf"))
    b.delete(b"k03", db["a"])
    b.delete_range(b"k05", b"k08", db["a"])
    assert b.count() == 13 and b.data_size() > 0
    db.write(b, sync=True)
    got = dict(db.iterate(db["a"]))
    assert sorted(got) == [b"k%02d" % i for i in (0, 1, 2, 4, 8, 9)]
    assert db.get(b"k04", db["a"]) == b"v4"
    assert db.get(b"k05", db["a"]) is None
    assert db.get(b"k04", db["b"]) is None
    assert db.get(b"plain") == b"default cf"
    b.clear()
    b.put(b"nowal", b"x", db["b"])
    db.write(b, wal=False)
    assert db.get(b"nowal", db["b"]) == b"x"


def test_put_many_matches_per_record_puts(db):
    rng = np.random.default_rng(1)
    kv = _random_kv(rng, 500)
    keys = list(kv)
    kbuf, koff = _pack(keys)
    vbuf, voff = _pack([kv[k] for k in keys])
    b = WriteBatch()
    b.put_many(np.frombuffer(kbuf, np.uint8), koff, vbuf, voff, db["a"])
    heads = [b"H%d|" % i for i in range(len(keys))]
    hbuf, hoff = _pack(heads)
    b.put_many(kbuf, koff, memoryview(vbuf), voff, db["b"], heads=hbuf, head_offsets=hoff)
    db.write(b)
    assert dict(db.iterate(db["a"])) == kv
    assert dict(db.iterate(db["b"])) == {k: heads[i] + kv[k] for i, k in enumerate(keys)}
    b = WriteBatch()
    b.delete_many(kbuf, koff, db["a"])
    db.write(b)
    assert list(db.iterate(db["a"])) == []


def test_put_many_rejects_bad_offsets(db):
    b = WriteBatch()
    with pytest.raises(LogDeviceError) as ei:
        b.put_many(b"abc", [0, 2, 1], b"xy", [0, 1, 2])
    assert ei.value.status == E.INVALID_PARAM
    with pytest.raises(LogDeviceError):
        b.put_many(b"abc", [0, 3], b"xy", [0, 3])  # past the end of the values
    with pytest.raises(LogDeviceError):
        b.put_many(b"abc", [0, 3], b"xy", [0, 1, 2])  # n differs


def test_iterator_bounds_and_per_entry_api(db):
    b = WriteBatch()
    for i in range(100):
        b.put(b"%03d" % i, b"v%d" % i, db["a"])
    db.write(b)
    with db.iterator(db["a"], b"010", b"020") as it:
        it.seek_to_first()
        assert it.key() == b"010"
        it.seek(b"000")  # below the lower bound
        assert it.valid() and it.key() == b"010"
        it.seek_to_last()
        assert it.key() == b"019"
        it.prev()
        assert it.value() == b"v18"
        it.seek_for_prev(b"0155")
        assert it.key() == b"015"
        it.next()
        assert [k for k, _ in it] == [b"%03d" % i for i in range(16, 20)]
        assert not it.valid()
        it.check()


@pytest.mark.parametrize("split", [False, True])
def test_read_many_equals_iteration(db, split):
    rng = np.random.default_rng(2)
    kv = _random_kv(rng, 9000, max_val=200)
    if split:  # values as u16-length-prefixed heads + bodies
        kv = {k: (2 + len(v[:5])).to_bytes(2, "little") + v[:5] + v for k, v in kv.items()}
    b = WriteBatch()
    for k, v in kv.items():
        b.put(k, v, db["a"])
    db.write(b)
    want = sorted(kv.items())
    with db.iterator(db["a"]) as it:
        it.seek_to_first()
        got, stops = [], []
        while True:
            # more entries and bytes than a thread's reader starts with: it grows
            ch = it.read_many(5000, split_head=split)
            stops.append(ch.stop)
            for i in range(len(ch)):
                k = ch.keys[ch.key_offsets[i] : ch.key_offsets[i + 1]].tobytes()
                h = ch.heads[ch.head_offsets[i] : ch.head_offsets[i + 1]].tobytes()
                v = ch.bodies[ch.body_offsets[i] : ch.body_offsets[i + 1]].tobytes()
                got.append((k, h + v))
                if split:
                    assert len(h) == int.from_bytes(h[:2], "little")
            if ch.stop == "end":
                break
    assert got == want
    assert stops[0] == "count" and stops[-1] == "end"


def test_read_many_byte_limit_and_skip_body(db):
    b = WriteBatch()
    for i in range(50):
        b.put(b"%03d" % i, b"\x04\x00hh" + b"x" * 100, db["a"])
    db.write(b)
    with db.iterator(db["a"]) as it:
        it.seek_to_first()
        ch = it.read_many(1000, max_bytes=250, split_head=True)
        assert len(ch) == 3 and ch.stop == "bytes"  # stops once >= 250 bytes are taken
        ch = it.read_many(1000, split_head=True, skip_body=True)
        assert len(ch) == 47 and len(ch.bodies) == 0
        assert list(np.diff(ch.body_offsets)) == [100] * 47
        assert ch.heads.tobytes() == b"\x04\x00hh" * 47


def _entries(ch):
    """(key, head, body) of every entry of a chunk."""
    return [(ch.keys[ch.key_offsets[i]:ch.key_offsets[i + 1]].tobytes(),
             ch.heads[ch.head_offsets[i]:ch.head_offsets[i + 1]].tobytes(),
             ch.bodies[ch.body_offsets[i]:ch.body_offsets[i + 1]].tobytes())
            for i in range(len(ch))]


def _iterator_read(db, cf, lower, upper, max_n, max_bytes, **kw):
    with db.iterator(cf, lower, upper) as it:
        it.seek(lower)
        return it.read_many(max_n, max_bytes, **kw)


@pytest.mark.parametrize("skip_body", [False, True])
def test_read_range_reads_what_an_iterator_reads(db, skip_body):
    """One call per range, into buffers kept from read to read: every range, limit and
    size (values past the first buffers, more entries than the first offset arrays)
    gives what a fresh iterator's read_many gives, and a chunk handed out stays as it
    was while later reads reuse the buffers."""
    rng = np.random.default_rng(7)
    b = WriteBatch()
    kv = {}
    for i in range(3000):
        size = int(rng.choice([0, 10, 300, 70_000], p=[.1, .6, .29, .01]))
        body = bytes(rng.integers(0, 256, size, dtype=np.uint8))
        head = b"h" * int(rng.integers(0, 6))
        kv[b"k%05d" % i] = (2 + len(head)).to_bytes(2, "little") + head + body
        b.put(b"k%05d" % i, kv[b"k%05d" % i], db["a"])
    db.write(b)
    kept = []
    for _ in range(200):
        lo, hi = sorted(int(x) for x in rng.integers(0, 3100, 2))
        lower, upper = b"k%05d" % lo, b"k%05d" % hi
        max_n = int(rng.choice([1, 3, 300, 5000]))
        max_bytes = int(rng.choice([0, 1, 5000, 1 << 20]))
        got = db.read_range(db["a"], lower, upper, max_n, max_bytes, split_head=True,
                            skip_body=skip_body)
        want = _iterator_read(db, db["a"], lower, upper, max_n, max_bytes, split_head=True,
                              skip_body=skip_body)
        assert _entries(got) == _entries(want)
        assert got.stop == want.stop
        assert list(got.body_offsets) == list(want.body_offsets)
        kept.append((got, _entries(want)))
    for got, want in kept:
        assert _entries(got) == want
    assert db.read_range(db["a"], b"z", b"zz", 10).stop == "end"
    assert len(db.read_range(db["a"], b"z", b"zz", 10)) == 0


def test_read_range_in_threads_and_after_close(tmp_path):
    """Each thread reads into buffers of its own; a closed database refuses."""
    import threading

    d = DB.open(tmp_path / "db", ["a"])
    b = WriteBatch()
    for i in range(200):
        b.put(b"%03d" % i, (b"%03d" % i) * (i + 1), d["a"])
    d.write(b)
    wrong = []

    def reader(start):
        for rep in range(300):
            lo = (start + rep) % 200
            ch = d.read_range(d["a"], b"%03d" % lo, b"%03d" % (lo + 3), 10)
            for key, _, body in _entries(ch):
                if body != key * (int(key) + 1):
                    wrong.append(key)

    threads = [threading.Thread(target=reader, args=(k * 50,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert not wrong
    cf = d["a"]
    d.close()
    with pytest.raises(LogDeviceError) as ei:
        d.read_range(cf, b"0", b"1", 10)
    assert ei.value.status == E.SHUTDOWN


def test_read_keys_merge_join(db):
    rng = np.random.default_rng(3)
    keys = [b"k%06d" % i for i in range(0, 20000, 2)]
    b = WriteBatch()
    for k in keys:
        b.put(k, k[::-1], db["a"])
    db.write(b)
    wanted = sorted({b"k%06d" % i for i in rng.integers(0, 20000, 3000)} | {b"a", b"z"})
    kbuf, koff = _pack(wanted)
    with db.iterator(db["a"]) as it:
        ch = it.read_keys(kbuf, koff)
    present = set(keys)
    assert ch.found.tolist() == [w in present for w in wanted]
    got = [ch.bodies[ch.body_offsets[i] : ch.body_offsets[i + 1]].tobytes() for i in range(len(ch))]
    assert got == [w[::-1] for w in wanted if w in present]


def test_properties_statistics_flush_compact(tmp_path):
    with DB.open(tmp_path / "s", ["a"], statistics=True, compression="zstd",
                 block_cache_bytes=1 << 20, write_buffer_size=1 << 20,
                 max_background_jobs=2) as d:
        b = WriteBatch()
        for i in range(1000):
            b.put(b"%05d" % i, b"x" * 100, d["a"])
        d.write(b)
        assert d.property_int("rocksdb.estimate-num-keys", d["a"]) == 1000
        assert d.property("rocksdb.no-such-property") is None
        d.flush()
        d.compact_range(d["a"])
        assert d.approximate_size(d["a"], b"00000", b"99999") > 0
        assert d.get(b"00500", d["a"]) == b"x" * 100
        assert "rocksdb.block.cache" in d.statistics()
    with DB.open(tmp_path / "n", compression="none", block_cache_bytes=0) as d:
        assert d.statistics() is None


def test_bad_options_and_paths(tmp_path):
    with pytest.raises(LogDeviceError) as ei:
        DB.open(tmp_path / "x", compression="bogus")
    assert ei.value.status == E.INVALID_PARAM
    afile = tmp_path / "afile"
    afile.write_bytes(b"not a database")
    with pytest.raises(LogDeviceError) as ei:
        DB.open(afile)
    assert ei.value.status == E.FAILED and "rocksdb" in str(ei.value)
    with pytest.raises(LogDeviceError) as ei:
        DB.open(tmp_path / "missing", create_if_missing=False)
    assert ei.value.status == E.INVALID_PARAM
    with DB.open(tmp_path / "locked"), pytest.raises(LogDeviceError):
        DB.open(tmp_path / "locked")  # the LOCK file is held


def test_use_after_close_raises(tmp_path):
    d = DB.open(tmp_path / "db", ["a"])
    cf = d["a"]
    it = d.iterator(cf)
    it2 = d.iterator(cf)
    it2.close()
    d.put(b"k", b"v", cf)
    b = WriteBatch()
    b.put(b"k2", b"v", cf)
    d.close()
    d.close()  # idempotent
    assert d.closed
    for call in (
        lambda: d.get(b"k", cf), lambda: d.put(b"k", b"v"), lambda: d.write(b),
        lambda: d.iterator(cf), lambda: d["a"], lambda: it.seek_to_first(), lambda: it.valid(),
        lambda: it.read_many(), lambda: cf.handle(), lambda: b.put(b"x", b"y", cf),
        lambda: d.flush(), lambda: d.property("rocksdb.stats"), lambda: d.create_cf("z"),
    ):
        with pytest.raises(LogDeviceError) as ei:
            call()
        assert ei.value.status == E.SHUTDOWN
    it.close()
    b.close()
    with pytest.raises(LogDeviceError):
        b.count()


def test_garbage_collection_frees_in_order(tmp_path):
    d = DB.open(tmp_path / "db", ["a"])
    it = d.iterator(d["a"])
    holder = {"it": it, "db": d}
    holder["self"] = holder  # a cycle holding both
    del d, it, holder
    gc.collect()
    with DB.open(tmp_path / "db") as d:  # the LOCK was released: the first DB really closed
        assert "a" in d


def test_options_object_and_status_mapping(tmp_path):
    with DB.open(tmp_path / "db", options=Options(compression="lz4", block_size=4096)) as d:
        d.put(b"a", b"b")
        assert d.get(b"a") == b"b"
    assert _status_for("IO error: No space left on device") == E.NOSPC
    assert _status_for("Corruption: block checksum mismatch") == E.CHECKSUM_MISMATCH
    assert _status_for("Invalid argument: x") == E.INVALID_PARAM
    assert _status_for("IO error: While lock file") == E.FAILED


def _plan(entries) -> bytes:
    """A put plan of (key, inline value, body offset, body length) entries."""
    return b"".join(struct.pack("=IIQQ", len(k), len(v), off, n) + k + v
                    for k, v, off, n in entries)


def test_put_plan_joins_inline_values_and_body_slices(db):
    bodies = b"0123456789"
    plan = _plan([(b"k1", b"head|", 2, 3), (b"k2", b"", 0, 10), (b"k3", b"only", 0, 0),
                  (b"k4", b"", 10, 0)])
    b = WriteBatch()
    assert b.put_plan(plan, memoryview(bodies), db["a"]) == 4
    assert b.put_plan(_plan([(b"d", b"x", 9, 1)]), np.frombuffer(bodies, np.uint8)) == 1
    db.write(b)
    assert dict(db.iterate(db["a"])) == {b"k1": b"head|234", b"k2": bodies, b"k3": b"only",
                                         b"k4": b""}
    assert db.get(b"d") == b"x9"


@pytest.mark.parametrize("plan", [
    _plan([(b"k", b"v", 0, 11)]),  # body past the end of the bodies
    _plan([(b"k", b"v", 11, 0)]),
    _plan([(b"k", b"v", 0, 1)])[:-1],  # entry cut short
    _plan([(b"k", b"v", 0, 1)]) + b"\0" * 23,  # a partial entry header
])
def test_put_plan_refuses_a_bad_plan_and_puts_nothing(db, plan):
    b = WriteBatch()
    with pytest.raises(LogDeviceError) as ei:
        b.put_plan(_plan([(b"good", b"v", 0, 0)]) + plan, b"0123456789", db["a"])
    assert ei.value.status == E.INVALID_PARAM
    assert b.count() == 0
