"""ldcore.storefmt: LogsDB data keys, record heads and CSI entries, byte for byte."""

import numpy as np
import pytest

from ldcore import storefmt
from logdevice.storage import keys as K

LSN = (5 << 32) | 7


def one(**over):
    args = {
        "log_id": 1, "lsns": np.array([LSN], np.uint64),
        "timestamps": np.array([1_700_000_000_000], np.int64),
        "flags": np.array([4], np.uint32), "waves": np.array([2], np.uint32),
        "copysets": np.array([[3, -1, 1]], np.int16), "payloads": b"hello",
        "offsets": np.array([0, 5], np.uint64),
    }
    args.update(over)
    return args


def test_golden_data_record():
    keys, heads, offs = storefmt.encode_data(**one())
    # 'd' | log 1 BE | lsn e5n7 BE
    assert keys.tobytes().hex() == "6400000000000000010000000500000007"
    # H=28 | format 1 | k=2 | ts 1700000000000 | flags 4 | wave 2 | crc32c("hello") | 3, 1
    assert heads.tobytes().hex() == (
        "1c00" "01" "02" "0068e5cf8b010000" "04000000" "02000000" "4cbb719a" "0300" "0100")
    assert offs.tolist() == [0, 28]


def test_heads_decode_to_what_was_encoded():
    rng = np.random.default_rng(3)
    n = 40
    ts = rng.integers(-2**40, 2**41, n).astype(np.int64)
    fl = rng.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32)
    wv = rng.integers(1, 9, n).astype(np.uint32)
    cs = rng.integers(-1, 300, (n, 5)).astype(np.int16)  # -1 anywhere: padding
    offs = np.zeros(n + 1, np.uint64)
    np.cumsum(rng.integers(0, 30, n), out=offs[1:])
    pay = rng.integers(0, 256, int(offs[-1]), dtype=np.uint8).tobytes()
    lsns = np.arange(1, n + 1, dtype=np.uint64)
    _, heads, hoffs = storefmt.encode_data(9, lsns, ts, fl, wv, cs, pay, offs)
    got_ts, got_fl, got_wv, got_crc, got_cs = storefmt.decode_heads(heads, hoffs)
    from ldcore.checksum import crc32c_many
    assert got_ts.tolist() == ts.tolist() and got_fl.tolist() == fl.tolist()
    assert got_wv.tolist() == wv.tolist()
    assert got_crc.tolist() == crc32c_many(pay, offs).tolist()
    norm, counts = K.normalize_copysets(cs, n)  # the padding dropped, order kept
    width = int(counts.max())
    assert got_cs.shape == (n, width)
    for i in range(n):
        assert got_cs[i].tolist() == norm[i, :counts[i]].tolist() + [-1] * (width - counts[i])
    empty = storefmt.decode_heads(np.empty(0, np.uint8), np.zeros(1, np.uint64))
    assert [len(c) for c in empty] == [0] * 5 and empty[4].shape == (0, 0)


def test_key_lsns_reads_each_keys_lsn():
    rng = np.random.default_rng(4)
    lsns = np.sort(rng.integers(1, 2**63, 50, dtype=np.uint64)) + np.uint64(2**63 - 100)
    keys = K.data_keys(7, lsns)
    assert K.lsns_of_keys(keys, len(lsns), K.DATA_KEY_LEN).tolist() == lsns.tolist()
    assert len(storefmt.key_lsns(np.empty(0, np.uint8), 0, K.DATA_KEY_LEN)) == 0
    with pytest.raises(ValueError, match="do not fit"):
        storefmt.key_lsns(keys, len(lsns) + 1, K.DATA_KEY_LEN)
    with pytest.raises(ValueError, match="do not fit"):
        storefmt.key_lsns(keys, 1, 12)  # the LSN would run past the key


def test_bad_heads_are_refused():
    _, heads, hoffs = storefmt.encode_data(**one())  # one head of 28 bytes, 2 copies
    raw = heads.tobytes()
    with pytest.raises(storefmt.RecordFormatError, match="names 2 copies"):
        storefmt.decode_heads(np.frombuffer(raw[:26], np.uint8), np.array([0, 26], np.uint64))
    with pytest.raises(storefmt.RecordFormatError, match="is 20 bytes"):
        storefmt.decode_heads(np.frombuffer(raw[:20], np.uint8), np.array([0, 20], np.uint64))
    with pytest.raises(storefmt.RecordFormatError, match="not in the 27 bytes"):
        storefmt.decode_heads(np.frombuffer(raw[:27], np.uint8), np.array([0, 28], np.uint64))
    bad = bytearray(raw)
    bad[2] = 2
    with pytest.raises(storefmt.RecordFormatError, match="format 2"):
        storefmt.decode_heads(np.frombuffer(bytes(bad), np.uint8), hoffs)
    with pytest.raises(Exception, match="CHECKSUM_MISMATCH"):  # LogsDB: a damaged record
        K.decode_heads(np.frombuffer(bytes(bad), np.uint8), hoffs)


def test_golden_csi_entry():
    a = one()
    keys, values, offs = storefmt.encode_csi(a["log_id"], a["lsns"], a["flags"], a["copysets"])
    assert keys.tobytes().hex() == "430000000000000001000000050000000700"
    assert values.tobytes().hex() == "04000000" "02" "0300" "0100"
    assert offs.tolist() == [0, 9]


def test_matches_the_numpy_encoders():
    rng = np.random.default_rng(7)
    n = 50
    lsns = np.cumsum(rng.integers(1, 4, n)).astype(np.uint64) + np.uint64(1 << 33)
    ts = rng.integers(0, 2**41, n).astype(np.int64)
    fl = rng.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32)
    wv = rng.integers(1, 9, n).astype(np.uint32)
    cs = rng.integers(-1, 40, (n, 4)).astype(np.int16)
    offs = np.zeros(n + 1, np.uint64)
    np.cumsum(rng.integers(0, 30, n), out=offs[1:])
    pay = rng.integers(0, 256, int(offs[-1]), dtype=np.uint8).tobytes()
    keys, heads, hoffs = storefmt.encode_data(9, lsns, ts, fl, wv, cs, pay, offs)
    norm, counts = K.normalize_copysets(cs, n)
    from ldcore.checksum import crc32c_many
    h2, ho2 = K.encode_heads(ts, fl, wv, crc32c_many(pay, offs), norm, counts)
    assert keys.tobytes() == K.data_keys(9, lsns).tobytes()
    assert heads.tobytes() == h2.tobytes()
    assert hoffs.tolist() == ho2.tolist()
    ck, cv, co = storefmt.encode_csi(9, lsns, fl, cs)
    v2, o2 = K.encode_csi_values(fl, norm, counts)
    assert ck.tobytes() == K.csi_keys(9, lsns, K.CSI_SINGLE).tobytes()
    assert cv.tobytes() == v2.tobytes() and co.tolist() == o2.tolist()


def test_empty():
    keys, heads, offs = storefmt.encode_data(**one(
        lsns=np.empty(0, np.uint64), timestamps=np.empty(0, np.int64),
        flags=np.empty(0, np.uint32), waves=np.empty(0, np.uint32),
        copysets=np.empty((0, 2), np.int16), payloads=b"", offsets=np.zeros(1, np.uint64)))
    assert len(keys) == len(heads) == 0 and offs.tolist() == [0]


def test_empty_payloads_and_copysets():
    keys, heads, offs = storefmt.encode_data(**one(
        copysets=np.empty((1, 0), np.int16), payloads=b"", offsets=np.zeros(2, np.uint64)))
    assert offs.tolist() == [0, 24]
    assert heads.tobytes()[3] == 0 and heads.tobytes()[20:24] == b"\0\0\0\0"


@pytest.mark.parametrize(("over", "error"), [
    ({"lsns": np.array([0], np.uint64)}, "between 1"),
    ({"lsns": np.array([2**64 - 1], np.uint64)}, "between 1"),
    ({"lsns": np.array([5, 5], np.uint64), "timestamps": np.zeros(2, np.int64),
      "flags": np.zeros(2, np.uint32), "waves": np.zeros(2, np.uint32),
      "copysets": np.zeros((2, 1), np.int16), "offsets": np.array([0, 2, 5], np.uint64)},
     "strictly increasing"),
    ({"offsets": np.array([0, 6], np.uint64)}, "past the buffer"),
    ({"offsets": np.array([3, 2], np.uint64)}, "decreasing"),
    ({"offsets": np.array([0, 2, 5], np.uint64)}, "offsets must have 2"),
    ({"flags": np.zeros(2, np.uint32)}, "must have 1 entries"),
    ({"copysets": np.zeros((2, 1), np.int16)}, "1 rows"),
    ({"copysets": np.zeros((1, 256), np.int16)}, "wider than 255"),
])
def test_bad_input(over, error):
    with pytest.raises(storefmt.RecordFormatError, match=error):
        storefmt.encode_data(**one(**over))


def test_too_big():
    storefmt.encode_data(**one(), max_payload=5)
    with pytest.raises(storefmt.RecordTooBigError, match="6 bytes|5 bytes"):
        storefmt.encode_data(**one(payloads=b"hello!", offsets=np.array([0, 6], np.uint64)),
                             max_payload=5)
    with pytest.raises(storefmt.RecordTooBigError):
        storefmt.encode_data(**one(), max_payload=0)


def test_read_only_inputs():
    a = one()
    for k in ("lsns", "timestamps", "flags", "waves", "copysets", "offsets"):
        a[k].flags.writeable = False
    a["payloads"] = memoryview(b"hello").toreadonly()
    keys, heads, _ = storefmt.encode_data(**a)
    assert len(keys) == 17 and len(heads) == 28


def _run(lsns, counts, width):
    """A CSI run entry as LogsDB writes it (``keys.encode_run``); copyset i of row r is
    ``10 * r + i``."""
    n = len(lsns)
    cs = np.full((n, width), -1, np.int16)
    for r, k in enumerate(counts):
        cs[r, :k] = [10 * r + i for i in range(k)]
    return K.encode_run(np.array(lsns, np.uint64), np.arange(n, dtype=np.uint32) + 100, cs,
                        np.array(counts, np.uint8)), cs


def test_golden_csi_run_decodes_in_one_pass():
    a, cs_a = _run([LSN, LSN + 1, LSN + 5], [2, 1, 3], 3)
    b, cs_b = _run([LSN + 6, LSN + 7], [1, 2], 2)
    # last lsn | n | width, then rows: lsn | flags | k | copyset u16 x width
    assert a[:13].hex() == "0c00000005000000" "03000000" "03"
    assert a[13:26 + 6].hex() == "0700000005000000" "64000000" "02" "0000" "0100" "0000"
    lsns, flags, cs = storefmt.decode_csi_runs([a, b])
    assert lsns.tolist() == [LSN, LSN + 1, LSN + 5, LSN + 6, LSN + 7]
    assert flags.tolist() == [100, 101, 102, 100, 101]
    want = np.full((5, 3), -1, np.int16)
    want[:3], want[3:, :2] = cs_a, cs_b  # the narrower entry padded to the widest
    assert np.array_equal(cs, want)
    # The same rows as the entries decoded one by one.
    one_by_one = [K.decode_range(LSN, K.CSI_RUN, x) for x in (a, b)]
    assert np.concatenate([p[0] for p in one_by_one]).tolist() == lsns.tolist()
    assert storefmt.decode_csi_runs([])[2].shape == (0, 0)


def test_bad_csi_runs_are_refused():
    a, _ = _run([LSN, LSN + 1], [2, 1], 2)
    with pytest.raises(storefmt.RecordFormatError, match="bytes"):
        storefmt.decode_csi_runs([a[:-1]])  # a row cut short
    with pytest.raises(storefmt.RecordFormatError, match="no head"):
        storefmt.decode_csi_runs([a[:5]])
    bad = bytearray(a)
    bad[13 + 12] = 3  # k = 3 in a width of 2
    with pytest.raises(storefmt.RecordFormatError, match="width of 2"):
        storefmt.decode_csi_runs([bytes(bad)])
    with pytest.raises(Exception, match="CHECKSUM_MISMATCH"):
        K.decode_range(LSN, K.CSI_RUN, a[:-1])  # LogsDB reports it as a damaged entry


def test_golden_run_plan():
    """A run of two records grouped into a CSI block: the plan's entries byte for byte
    (the same bytes as ``encode_data`` + the block ``keys.encode_block`` makes)."""
    from tests.reference.storefmt import plan_entries
    a = one(lsns=np.array([LSN, LSN + 1], np.uint64),
            timestamps=np.array([1_700_000_000_000, 1_700_000_000_005], np.int64),
            flags=np.array([4, 4], np.uint32), waves=None,
            copysets=np.array([[3, -1, 1], [-1, 3, 1]], np.int16), payloads=b"hello!",
            offsets=np.array([0, 5, 6], np.uint64))
    run = storefmt.encode_run(**a, grouped=True, blob_flags=4)
    entries = plan_entries(run.plan, b"hello!")
    keys, heads, hoffs = storefmt.encode_data(**dict(a, waves=np.ones(2, np.uint32)))
    assert entries[:2] == [(keys.tobytes()[:17], heads.tobytes()[:28] + b"hello"),
                           (keys.tobytes()[17:], heads.tobytes()[28:] + b"!")]
    # 'B' | log 1 | first lsn | type 1 (block); last lsn | flags 4 | k=2 | 3, 1
    assert entries[2] == (K.csi_range_key(1, LSN, K.CSI_BLOCK),
                          K.encode_block(LSN + 1, 4, np.array([3, 1]), 2))
    assert len(entries) == 3
    assert (run.first_lsn, run.last_lsn, run.records) == (LSN, LSN + 1, 2)
    assert (run.min_ts, run.max_ts) == (1_700_000_000_000, 1_700_000_000_005)
    assert (run.payload_bytes, run.head_bytes, run.blobs) == (6, 56, 2)
    # Not grouped: one single entry per record, as encode_csi writes them.
    ck, cv, co = storefmt.encode_csi(1, a["lsns"], a["flags"], a["copysets"])
    single = plan_entries(storefmt.encode_run(**a).plan, b"hello!")[2:]
    assert single == [(ck.tobytes()[:18], cv.tobytes()[:9]), (ck.tobytes()[18:], cv.tobytes()[9:])]


@pytest.mark.parametrize(("over", "error"), [
    ({"lsns": np.array([5, 5], np.uint64), "timestamps": np.zeros(2, np.int64),
      "flags": np.zeros(2, np.uint32), "waves": np.zeros(2, np.uint32),
      "copysets": np.zeros((2, 1), np.int16), "offsets": np.array([0, 2, 5], np.uint64)},
     "strictly increasing"),
    ({"offsets": np.array([0, 6], np.uint64)}, "past the buffer"),
    ({"waves": np.zeros(2, np.uint32)}, "must have 1 entries"),
    ({"copysets": np.zeros((1, 256), np.int16)}, "wider than 255"),
])
def test_encode_run_and_check_records_refuse_what_encode_data_does(over, error):
    a = one(**over)
    log_id = a.pop("log_id")
    with pytest.raises(storefmt.RecordFormatError, match=error):
        storefmt.encode_run(log_id, **a)
    with pytest.raises(storefmt.RecordFormatError, match=error):
        storefmt.check_records(**a)
    with pytest.raises(storefmt.RecordTooBigError):
        storefmt.encode_run(**one(), max_payload=4)


def test_time_range():
    assert storefmt.time_range(np.array([5, -3, 9, 0], np.int64)) == (-3, 9)
    assert storefmt.time_range(np.empty(0, np.int64)) == (2**63 - 1, -2**63)


def test_plan_of_inline_entries():
    from tests.reference.storefmt import plan_entries
    entries = [(b"P" + bytes(8), bytes(range(40))), (b"", b""), (b"k", b"v" * 300)]
    assert plan_entries(storefmt.plan_of(entries), b"") == entries
    assert storefmt.plan_of([]) == b""
    with pytest.raises(TypeError):
        storefmt.plan_of([(b"k", "not bytes")])
