"""logdevice.protocol: frame layout, every message round trip, streaming decode, errors,
zero-copy arrays (over a real socket: tests/integration/test_protocol_loopback.py)."""

import struct

import msgspec
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import logdevice.protocol as p
from logdevice.errors import E, InvalidParamError, LogDeviceError, TooBigError
from logdevice.protocol import framing
from logdevice.protocol.flags import RecordFlag, StartFlag

PREFIX = struct.Struct("<IHBBI")


def records_msg(n=5, payload_size=10, seed=0, rsid=7):
    rng = np.random.default_rng(seed)
    lengths = rng.integers(0, 2 * payload_size + 1, n).astype(np.uint64)
    offsets = np.zeros(n + 1, np.uint64)
    np.cumsum(lengths, out=offsets[1:])
    return p.Records(
        read_stream_id=rsid,
        filter_version=3,
        lsns=np.arange(1, n + 1, dtype=np.uint64) + (5 << 32),
        timestamps=np.arange(n, dtype=np.int64) + 1_700_000_000_000,
        flags=np.full(n, RecordFlag.CHECKSUM, np.uint32),
        payload_offsets=offsets,
        payloads=rng.bytes(int(offsets[-1])),
        checksums=rng.integers(0, 2**32, n, dtype=np.uint32),
    )


def sample_messages():
    """One populated instance of every message type."""
    return [
        p.Hello(cluster="test", protocol_version=1, role="node", node_index=3,
                location="r1.dc1.c1.row1.rack1"),
        p.HelloReply(status=E.PROTONOSUPPORT, node_index=2, message="no"),
        p.Error(request_id=9, status=E.NOTFOUND, message="unknown log 77",
                in_reply_to=int(p.MessageType.APPEND)),
        p.Append(request_id=1, log_id=77, payload=b"hello world", flags=int(p.AppendFlag.CHECKSUM),
                 timeout_ms=500, checksum=0xDEADBEEF),
        p.Appended(request_id=1, status=E.NOSEQUENCER, redirect_to=4, message="go to N4"),
        p.AppendBatch(request_id=3, log_id=77, flags=int(p.AppendFlag.CHECKSUM), timeout_ms=900,
                      payload_offsets=np.array([0, 2, 2, 7], np.uint64), payloads=b"abcdefg",
                      checksums=np.array([5, 6, 7], np.uint32)),
        p.AppendedBatch(request_id=3, status=E.OK,
                        statuses=np.array([E.OK, E.CHECKSUM_MISMATCH, E.OK], np.uint16),
                        lsns=np.array([(5 << 32) | 1, 0, (5 << 32) | 2], np.uint64),
                        timestamps=np.array([10, 0, 11], np.int64), redirect_to=None,
                        message="record 1: payload does not match its checksum"),
        p.Store(request_id=2, log_id=77, epoch=5, last_known_good=(5 << 32) | 9,
                recovery_epoch=0,
                lsns=np.array([(5 << 32) | 10, (5 << 32) | 11], np.uint64),
                timestamps=np.array([100, 101], np.int64),
                flags=np.array([RecordFlag.CHECKSUM, RecordFlag.HOLE], np.uint32),
                waves=np.array([1, 2], np.uint32),
                copysets=np.array([[0, 2, -1], [1, 3, 4]], np.int16),
                payload_offsets=np.array([0, 3, 3], np.uint64), payloads=b"abc",
                checksums=np.array([1, 2], np.uint32)),
        p.Stored(request_id=2, log_id=77, node_index=3,
                 lsns=np.array([10, 11], np.uint64),
                 statuses=np.array([E.OK, E.NOSPC], np.uint16)),
        p.StoreLogs(request_ids=np.array([2, 3], np.uint64),
                    log_ids=np.array([77, 78], np.uint64), epochs=np.array([5, 6], np.uint64),
                    last_known_good=np.array([(5 << 32) | 9, 0], np.uint64),
                    recovery_epochs=np.array([0, 7], np.uint64),
                    part_ends=np.array([1, 3], np.uint32),
                    lsns=np.array([(5 << 32) | 10, (6 << 32) | 1, (6 << 32) | 2], np.uint64),
                    timestamps=np.array([100, 101, 102], np.int64),
                    flags=np.array([RecordFlag.CHECKSUM, 0, RecordFlag.HOLE], np.uint32),
                    waves=np.array([1, 1, 2], np.uint32),
                    copysets=np.array([[0, 2, -1], [1, 3, 4], [1, 3, 4]], np.int16),
                    payload_offsets=np.array([0, 3, 5, 5], np.uint64), payloads=b"abcde",
                    checksums=np.array([1, 0, 0], np.uint32)),
        p.StoredLogs(node_index=3, request_ids=np.array([2, 3], np.uint64),
                     log_ids=np.array([77, 78], np.uint64),
                     statuses=np.array([E.OK, E.PREEMPTED], np.uint16),
                     sealed_by=np.array([-1, 4], np.int64), part_ends=np.array([2, 2], np.uint32),
                     lsns=np.array([10, 11], np.uint64),
                     record_statuses=np.array([E.OK, E.NOSPC], np.uint16)),
        p.AppendLogs(request_id=4, request_ids=np.array([5, 6], np.uint64),
                     log_ids=np.array([77, 78], np.uint64),
                     flags=np.array([int(p.AppendFlag.CHECKSUM), 0], np.uint32),
                     timeouts_ms=np.array([900, 800], np.uint32),
                     part_ends=np.array([2, 3], np.uint32),
                     payload_offsets=np.array([0, 2, 2, 7], np.uint64), payloads=b"abcdefg",
                     checksums=np.array([5, 6, 0], np.uint32)),
        p.AppendedLogs(request_ids=np.array([5, 6], np.uint64),
                       statuses=np.array([E.OK, E.NOSEQUENCER], np.uint16),
                       redirect_to=np.array([-1, 2], np.int64), messages=["", "go to N2"],
                       part_ends=np.array([2, 2], np.uint32),
                       record_statuses=np.array([E.OK, E.OK], np.uint16),
                       lsns=np.array([(5 << 32) | 1, (5 << 32) | 2], np.uint64),
                       timestamps=np.array([10, 11], np.int64)),
        p.Release(log_id=77, lsn=(5 << 32) | 11, epoch=5),
        p.ReleaseBatch(log_ids=np.array([1, 2, 3], np.uint64),
                       lsns=np.array([10, 20, 2**64 - 1], np.uint64),
                       epochs=np.array([1, 1, 7], np.uint64)),
        p.Start(read_stream_id=11, log_id=77, start_lsn=1, until_lsn=2**64 - 1,
                window_high=512,
                flags=int(StartFlag.SINGLE_COPY_DELIVERY | StartFlag.LOCAL_SCD_ENABLED),
                filter_version=2, known_down=[1, 4], replication=2, reorder_seed=1234,
                client_location="r1"),
        p.Started(read_stream_id=11, filter_version=2, status=E.OK, last_released=99),
        records_msg(),
        p.Gap(read_stream_id=11, filter_version=2, lo=5, hi=2**64 - 1,
              reason=p.GapReason.CHECKSUM_FAIL),
        p.Window(read_stream_id=11, filter_version=2, window_high=1024),
        p.Stop(read_stream_id=11),
        p.Heartbeat(node_index=1, generation=4, time_ms=1_700_000_000_123, alive=[0, 1, 2],
                    config_version=3),
        p.GetClusterView(request_id=5),
        p.ClusterView(request_id=5, node_index=1, config_version=3, alive=[0, 1, 2],
                      sequencers=[p.SequencerNode(0, 1.0), p.SequencerNode(2, 0.5)],
                      time_ms=12),
        p.GetTail(request_id=6, log_id=77),
        p.Tail(request_id=6, status=E.OK, log_id=77, lsn=99, timestamp=1234),
        p.GetHead(request_id=7, log_id=77),
        p.Head(request_id=7, status=E.OK, log_id=77, trim_point=50, timestamp=1000),
        p.Trim(request_id=8, log_id=77, lsn=50),
        p.Trimmed(request_id=8, status=E.OK, log_id=77, trim_point=50),
        p.FindTime(request_id=9, log_id=77, timestamp=1000),
        p.FindTimeReply(request_id=9, status=E.PARTIAL, log_id=77, lo=3, hi=4),
        p.DataSize(request_id=10, log_id=77, start_ms=0, end_ms=2**63 - 1),
        p.DataSizeReply(request_id=10, status=E.OK, log_id=77, size=123456),
        p.Seal(request_id=11, log_id=77, seal_epoch=5),
        p.Sealed(request_id=11, status=E.OK, log_id=77, node_index=3, seal_epoch=5,
                 last_known_good=(5 << 32) | 9, max_seen_lsn=(5 << 32) | 12),
        p.CheckSeal(request_id=11, log_id=77, epoch=4),
        p.SealState(request_id=11, status=E.OK, log_id=77, node_index=3, seal_epoch=5,
                    sealed_by=2),
        p.GetWriterBlobs(request_id=11, log_id=77, epoch=4, since_ms=1_700_000_000_000),
        p.WriterBlobs(request_id=11, status=E.OK, log_id=77, node_index=3,
                      lsns=np.array([(2 << 32) | 5], np.uint64),
                      producers=np.array([2**64 - 1], np.uint64),
                      seqs=np.array([7], np.uint64),
                      timestamps=np.array([1_700_000_000_001], np.int64),
                      checksums=np.array([0xDEADBEEF], np.uint32)),
        p.GetCheckpoints(request_id=12, name="billing"),
        p.SetCheckpoints(request_id=13, name="billing", log_ids=np.array([1, 7], np.uint64),
                         lsns=np.array([5, 2**64 - 2], np.uint64),
                         batch_offsets=np.array([0, 2**32 - 1], np.uint32)),
        p.Checkpoints(request_id=13, status=E.OK, name="billing",
                      log_ids=np.array([1], np.uint64), lsns=np.array([5], np.uint64),
                      batch_offsets=np.array([3], np.uint32)),
        p.GroupHeartbeat(request_id=14, group="g", member="m1",
                         log_ids=np.array([1, 2], np.uint64), session_ms=2000, leave=True),
        p.GroupAssignment(request_id=14, status=E.OK, generation=3,
                          log_ids=np.array([2], np.uint64)),
        p.GetRecordAvailability(request_id=15, log_id=77, lo=1, hi=(5 << 32) | 9,
                                max_records=1000, compress=False),
        p.RecordAvailability(request_id=15, status=E.OK, log_id=77, node_index=2, lo=1,
                             next_lsn=(5 << 32) | 10, done=True, trim_point=0,
                             last_released=(5 << 32) | 9, availability=b"\0" * 64,
                             run_lengths=np.array([2, 1], np.uint32),
                             run_copysets=np.array([0, 1], np.uint32),
                             copysets=np.array([[2, 0], [2, 1]], np.int16)),
        p.GetPartitions(request_id=16),
        p.PartitionList(request_id=16, status=E.OK, node_index=1,
                        ids=np.array([1, 2], np.int64), start_ms=np.array([0, 9], np.int64),
                        min_ts=np.array([1, 10], np.int64), max_ts=np.array([8, 12], np.int64),
                        records=np.array([5, 6], np.int64), nbytes=np.array([50, 60], np.int64)),
        p.RebuildStore(request_id=17, log_id=3, set_version=9,
                       lsns=np.array([5, 9], np.uint64), timestamps=np.array([1, 2], np.int64),
                       flags=np.array([0, 64], np.uint32), waves=np.array([1, 2], np.uint32),
                       copysets=np.array([[4, 1], [4, 2]], np.int16),
                       payload_offsets=np.array([0, 2, 5], np.uint64), payloads=b"abcde"),
        p.RebuildStored(request_id=17, status=E.REBUILDING, node_index=4),
        p.RebuildAmend(request_id=22, log_id=3, set_version=9,
                       lsns=np.array([5, 9], np.uint64), flags=np.array([0, 64], np.uint32),
                       waves=np.array([1, 2], np.uint32),
                       copysets=np.array([[4, 1], [4, 2]], np.int16)),
        p.RebuildStored(request_id=22, status=E.OK, node_index=1,
                        need_copies=np.array([9], np.uint64)),
        p.GetReadStreams(request_id=18),
        p.ReadStreamList(
            request_id=18, status=E.OK, node_index=2, read_stream_id=np.array([3], np.uint64),
            log_id=np.array([7], np.uint64), conn_id=np.array([-2], np.int64),
            peer=["N1"], address=["127.0.0.1:4444"], start_lsn=np.array([1], np.uint64),
            until_lsn=np.array([2**64 - 1], np.uint64), next_lsn=np.array([9], np.uint64),
            delivered_to=np.array([8], np.uint64), window_high=np.array([99], np.uint64),
            last_released=np.array([8], np.uint64), filter_version=np.array([2], np.uint64),
            mode=["scd"], state=["release"], known_down=[[0, 4]],
            records_sent=np.array([8], np.uint64), bytes_sent=np.array([80], np.uint64),
            gaps_sent=np.array([1], np.uint64), started_ms=np.array([1_700_000_000_000]),
            age_ms=np.array([1500])),
        p.GetRecoveries(request_id=19),
        p.RecoveryList(
            request_id=19, status=E.OK, node_index=0, log_id=np.array([7, 7], np.uint64),
            epoch=np.array([3, 4], np.uint64), seal_epoch=np.array([4, 4], np.uint64),
            attempt=np.array([1, 1], np.uint64), state=["done", "done"],
            outcome=["OK", "OK"], message=["", ""], nodeset=[[0, 1, 2], [1, 2, 3]],
            sealed=[[0, 1, 2], [1, 2]], digested=[[0, 1], [1, 2]],
            lng=np.array([(3 << 32) | 5, 0], np.uint64), records=np.array([2, 0], np.uint64),
            holes=np.array([1, 0], np.uint64),
            bridge=np.array([(3 << 32) | 9, (4 << 32) | 1], np.uint64),
            pending=np.array([0, 0], np.uint64), last_clean_epoch=np.array([4, 4], np.uint64),
            started_ms=np.array([10, 10]), duration_ms=np.array([25, 25])),
        p.GetLogSummaries(request_id=23, log_ids=np.array([1, 7], np.uint64),
                          find_times=np.array([5, 9], np.int64), size_from_ms=3),
        p.LogSummaries(request_id=23, status=E.OK, node_index=1,
                       log_ids=np.array([1, 7], np.uint64), statuses=np.array([0, 0], np.uint16),
                       trim_points=np.array([0, 4], np.uint64),
                       last_released=np.array([9, 12], np.uint64),
                       local_tails=np.array([9, 13], np.uint64),
                       min_timestamps=np.array([1, 2], np.int64),
                       max_timestamps=np.array([8, 9], np.int64),
                       nbytes=np.array([100, 7], np.uint64),
                       find_lo=np.array([1, 2, 3, 4], np.uint64),
                       find_hi=np.array([2, 3, 4, 5], np.uint64)),
        p.GetTails(request_id=24, log_ids=np.array([1, 7], np.uint64)),
        p.Tails(request_id=24, status=E.OK, log_ids=np.array([1, 7], np.uint64),
                statuses=np.array([0, int(E.NOSEQUENCER)], np.uint16),
                lsns=np.array([9, 0], np.uint64), timestamps=np.array([5, 0], np.int64),
                redirect_to=np.array([-1, 2], np.int64)),
        p.GetRecordRows(request_id=25, log_ids=np.array([1, 7], np.uint64),
                        los=np.array([1, 1], np.uint64), his=np.array([9, 9], np.uint64),
                        max_rows=2500),
        p.RecordRows(request_id=25, status=E.OK, node_index=0,
                     log_ids=np.array([1, 7], np.uint64), statuses=np.array([0, 0], np.uint16),
                     next_lsns=np.array([10, 4], np.uint64),
                     record_logs=np.array([0, 0, 1], np.uint32),
                     lsns=np.array([3, 5, 2], np.uint64),
                     rows=np.array([1000, 1, 0], np.uint32)),
        p.GetMetadata(request_id=20, kind="log_states", log_ids=np.array([1, 7], np.uint64)),
        p.MetadataReply(request_id=20, status=E.OK,
                        body=[[1, None], [7, {"epoch": 3, "history": [{"nodeset": [0, 1]}]}]]),
        p.AdminRequest(request_id=21, action="create_log_group", name="ev", lo=500, hi=599,
                       attributes={"replication": 2, "scd": None}),
        p.MetadataReply(request_id=21, status=E.EXISTS, message="ids 500..599 overlap"),
    ]


def assert_same(a, b):
    assert type(a) is type(b)
    for name in a.__struct_fields__:
        x, y = getattr(a, name), getattr(b, name)
        if isinstance(x, np.ndarray):
            assert isinstance(y, np.ndarray), name
            assert y.dtype == x.dtype and y.dtype.byteorder in "<=|", name
            assert y.shape == x.shape and np.array_equal(x, y), name
        elif isinstance(x, bytes | bytearray | memoryview):
            assert bytes(x) == bytes(y), name
        else:
            assert x == y and type(x) is type(y), name


def test_every_message_type_has_a_sample():
    covered = {type(m) for m in sample_messages()}
    assert covered == set(p.ALL_MESSAGES)
    assert {cls.TYPE for cls in p.ALL_MESSAGES} == set(p.MessageType)


@pytest.mark.parametrize("msg", sample_messages(), ids=lambda m: type(m).__name__)
def test_round_trip(msg):
    frame = p.encode_frame(msg)
    total, type_id, version, flags, _hl = PREFIX.unpack_from(frame)
    assert (total, type_id, version, flags) == (len(frame), msg.TYPE, p.PROTOCOL_VERSION, 0)
    assert_same(msg, p.decode_frame(frame))
    (decoded,) = p.FrameDecoder().feed(frame)
    assert_same(msg, decoded)


def test_hello_golden_bytes():
    hello = p.Hello(cluster="test", protocol_version=1, role="node", node_index=3,
                    location="r1.dc1.c1.row1.rack1")
    golden = bytes.fromhex(
        "30000000"  # frame_length 48
        "0100"  # HELLO
        "01"  # version 1
        "00"  # flags
        "24000000"  # header_length 36
        "97"  # msgpack array of 7 fields
        "a474657374"  # "test"
        "01"  # protocol_version 1
        "a46e6f6465"  # "node"
        "03"  # node_index 3
        "b47231"  # str of 20 bytes: "r1.dc1.c1.row1.rack1"
        "2e6463312e63312e726f77312e7261636b31"
        "a0"  # store_id ""
        "a0"  # token ""
    )
    assert p.encode_frame(hello) == golden
    assert p.decode_frame(golden) == hello
    # A peer from before the token field (6 fields) still decodes, with no token.
    before_token = bytes.fromhex("2f000000" "0100" "01" "00" "23000000" "96") + golden[13:-1]
    assert p.decode_frame(before_token) == hello


def test_hello_reply_features_golden_bytes():
    reply = p.HelloReply(status=E.OK, node_index=2, features=int(p.PeerFeature.STORE_LOGS))
    golden = bytes.fromhex(
        "12000000"  # frame_length 18
        "0200"  # HELLO_REPLY
        "01"  # version 1
        "00"  # flags
        "06000000"  # header_length 6
        "95"  # msgpack array of 5 fields
        "00"  # status OK
        "02"  # node_index 2
        "a0"  # message ""
        "01"  # protocol_version 1
        "01"  # features: STORE_LOGS
    )
    assert p.encode_frame(reply) == golden
    assert p.decode_frame(golden) == reply
    # A node from before features (4 fields) announces none.
    before = bytes.fromhex("11000000" "0200" "01" "00" "05000000" "94") + golden[13:-1]
    assert p.decode_frame(before).features == 0


def test_store_logs_golden_bytes():
    msg = p.StoreLogs(request_ids=np.array([2, 3], np.uint64),
                      log_ids=np.array([7, 8], np.uint64), epochs=np.array([1, 1], np.uint64),
                      last_known_good=np.array([0, 0], np.uint64),
                      recovery_epochs=np.array([0, 0], np.uint64),
                      part_ends=np.array([1, 2], np.uint32),
                      lsns=np.array([(1 << 32) | 1, (1 << 32) | 1], np.uint64),
                      timestamps=np.array([5, 6], np.int64), flags=np.zeros(2, np.uint32),
                      waves=np.ones(2, np.uint32), copysets=np.array([[0], [1]], np.int16),
                      payload_offsets=np.array([0, 1, 3], np.uint64), payloads=b"abc")
    frame = p.encode_frame(msg)
    total, type_id, version, flags, hl = PREFIX.unpack_from(frame)
    assert (total, type_id, version, flags) == (len(frame), 18, 1, 0)
    header = msgspec.msgpack.decode(frame[12:12 + hl])
    # every field is a raw section: the header holds their byte lengths, in field order
    # (the copysets matrix: its bytes and its width)
    assert header == [16, 16, 16, 16, 16, 8, 16, 16, 8, 8, [4, 1], 24, 3, 0]
    start = (12 + hl + 7) & ~7
    assert frame[start:start + 16] == bytes.fromhex("0200000000000000" "0300000000000000")
    assert frame.endswith(b"abc" + bytes(5))  # the payloads, padded to 8 bytes
    assert_same(msg, p.decode_frame(frame))


def test_store_logs_parts_are_the_stores_it_carries():
    stores = [
        p.Store(request_id=4, log_id=7, epoch=2, last_known_good=(2 << 32) | 1,
                lsns=np.array([(2 << 32) | 2], np.uint64), timestamps=np.array([1], np.int64),
                flags=np.array([RecordFlag.CHECKSUM], np.uint32), waves=np.ones(1, np.uint32),
                copysets=np.array([[0, 1]], np.int16),
                payload_offsets=np.array([0, 2], np.uint64), payloads=b"xy",
                checksums=np.array([99], np.uint32)),
        p.Store(request_id=5, log_id=8, epoch=3, recovery_epoch=4,
                lsns=np.array([(3 << 32) | 1, (3 << 32) | 2], np.uint64),
                timestamps=np.array([2, 3], np.int64), flags=np.zeros(2, np.uint32),
                waves=np.array([1, 2], np.uint32),
                copysets=np.array([[1, 2, 0], [2, 0, 1]], np.int16),
                payload_offsets=np.array([0, 3, 4], np.uint64), payloads=b"abcd"),
    ]
    got = p.decode_frame(p.encode_frame(p.StoreLogs.of(stores))).parts()
    assert len(got) == 2
    for want, part in zip(stores, got, strict=True):
        for field in ("request_id", "log_id", "epoch", "last_known_good", "recovery_epoch"):
            assert getattr(part, field) == getattr(want, field)
        for field in ("lsns", "timestamps", "flags", "waves", "payload_offsets"):
            assert np.array_equal(getattr(part, field), getattr(want, field)), field
        assert bytes(part.payloads) == bytes(want.payloads)
        width = want.copysets.shape[1]
        assert np.array_equal(part.copysets[:, :width], want.copysets)
        assert (part.copysets[:, width:] == -1).all()  # padded to the frame's width
        assert part.consistency_problem() is None
    assert np.array_equal(got[0].checksums, [99])
    assert np.array_equal(got[1].checksums, [0, 0])  # unflagged: zeros, never read


def test_stored_logs_parts_round_trip():
    replies = [
        p.Stored(request_id=4, log_id=7, node_index=2, lsns=np.array([5, 6], np.uint64),
                 statuses=np.array([E.OK, E.CHECKSUM_MISMATCH], np.uint16)),
        p.Stored(request_id=5, log_id=8, node_index=2, status=E.PREEMPTED, sealed_by=1),
        p.Stored(request_id=6, log_id=7, node_index=2, lsns=np.array([9], np.uint64),
                 statuses=np.array([E.OK], np.uint16)),
    ]
    got = p.decode_frame(p.encode_frame(p.StoredLogs.of(2, replies))).parts()
    assert [(r.request_id, r.log_id, r.node_index, r.status, r.sealed_by) for r in got] == \
        [(r.request_id, r.log_id, r.node_index, r.status, r.sealed_by) for r in replies]
    for want, part in zip(replies, got, strict=True):
        assert np.array_equal(part.lsns, want.lsns)
        assert np.array_equal(part.statuses, want.statuses)


def test_append_logs_parts_are_the_batches_it_carries():
    checksum, no_redirect = int(p.AppendFlag.CHECKSUM), int(p.AppendFlag.NO_REDIRECT)
    frame = p.AppendLogs.of([(7, checksum, 500, [b"xy", b"z"], [11, 12]),
                             (9, no_redirect, 700, [b"abcd"], None)])
    frame.request_ids = np.array([21, 22], np.uint64)  # (the sender's connection's)
    assert bytes(frame.payloads) == b"xyzabcd"
    assert frame.checksums.tolist() == [11, 12, 0]  # zeros where nothing is checked
    got = p.decode_frame(p.encode_frame(frame)).parts()
    assert [(b.request_id, b.log_id, b.flags, b.timeout_ms) for b in got] == \
        [(21, 7, checksum, 500), (22, 9, no_redirect, 700)]
    for want, part in zip([[b"xy", b"z"], [b"abcd"]], got, strict=True):
        o = part.payload_offsets.tolist()
        assert [bytes(part.payloads[a:b]) for a, b in zip(o, o[1:], strict=False)] == want
        assert part.consistency_problem() is None
    assert got[0].checksums.tolist() == [11, 12] and len(got[1].checksums) == 0
    unchecked = p.AppendLogs.of([(7, 0, 5, [b"a"], None), (8, 0, 5, [b"b"], None)])
    assert len(unchecked.checksums) == 0


def test_appended_logs_parts_are_the_answers_it_carries():
    answers = [
        p.AppendedBatch(request_id=4, status=E.OK,
                        statuses=np.array([E.OK, E.CHECKSUM_MISMATCH], np.uint16),
                        lsns=np.array([5, 0], np.uint64), timestamps=np.array([1, 0], np.int64),
                        message="record 1: CHECKSUM_MISMATCH"),
        p.AppendedBatch(request_id=9, status=E.NOSEQUENCER, redirect_to=2, message="N2"),
        p.AppendedBatch(request_id=5, status=E.OK, statuses=np.array([E.OK], np.uint16),
                        lsns=np.array([9], np.uint64), timestamps=np.array([3], np.int64)),
    ]
    got = p.decode_frame(p.encode_frame(p.AppendedLogs.of(answers))).parts()
    assert [(a.request_id, a.status, a.redirect_to, a.message) for a in got] == \
        [(4, E.OK, None, "record 1: CHECKSUM_MISMATCH"), (9, E.NOSEQUENCER, 2, "N2"),
         (5, E.OK, None, "")]
    for want, part in zip(answers, got, strict=True):
        for field in ("statuses", "lsns", "timestamps"):
            assert np.array_equal(getattr(part, field), getattr(want, field)), field


@pytest.mark.parametrize("change, problem", [
    ({"part_ends": np.array([2, 1], np.uint32)}, "out of order"),
    ({"part_ends": np.array([0, 2], np.uint32)}, "out of order"),
    ({"timeouts_ms": np.array([1], np.uint32)}, "timeouts_ms"),
    ({"request_ids": np.zeros(0, np.uint64)}, "request_ids"),
    ({"flags": np.array([int(p.AppendFlag.CHECKSUM), 0], np.uint32)}, "checksums"),
    ({"checksums": np.array([1], np.uint32)}, "checksums"),
    ({"log_ids": np.zeros(0, np.uint64), "flags": np.zeros(0, np.uint32),
      "request_ids": np.zeros(0, np.uint64),
      "timeouts_ms": np.zeros(0, np.uint32), "part_ends": np.zeros(0, np.uint32)},
     "without parts"),
])
def test_append_logs_inconsistent_frames_are_refused(change, problem):
    fields = dict(request_id=1, request_ids=np.array([3, 4], np.uint64),
                  log_ids=np.array([7, 8], np.uint64),
                  flags=np.zeros(2, np.uint32), timeouts_ms=np.array([5, 6], np.uint32),
                  part_ends=np.array([1, 2], np.uint32),
                  payload_offsets=np.array([0, 1, 3], np.uint64), payloads=b"abc")
    fields.update(change)
    msg = p.AppendLogs(**fields)
    assert problem in (msg.consistency_problem() or "")
    with pytest.raises(LogDeviceError):
        p.encode_frame(msg)


@pytest.mark.parametrize("change, problem", [
    ({"part_ends": np.array([2, 1], np.uint32)}, "out of order"),
    ({"part_ends": np.array([0, 2], np.uint32)}, "out of order"),
    ({"part_ends": np.array([1, 1], np.uint32)}, "out of order"),
    ({"part_ends": np.array([1, 3], np.uint32)}, "3"),
    ({"epochs": np.array([1], np.uint64)}, "epochs"),
])
def test_store_logs_inconsistent_frames_are_refused(change, problem):
    fields = dict(request_ids=np.array([2, 3], np.uint64), log_ids=np.array([7, 8], np.uint64),
                  epochs=np.array([1, 1], np.uint64), last_known_good=np.zeros(2, np.uint64),
                  recovery_epochs=np.zeros(2, np.uint64), part_ends=np.array([1, 2], np.uint32),
                  lsns=np.array([1, 1], np.uint64), timestamps=np.array([5, 6], np.int64),
                  flags=np.zeros(2, np.uint32), waves=np.ones(2, np.uint32),
                  copysets=np.array([[0], [1]], np.int16),
                  payload_offsets=np.array([0, 1, 3], np.uint64), payloads=b"abc")
    fields.update(change)
    msg = p.StoreLogs(**fields)
    assert problem in (msg.consistency_problem() or "")
    with pytest.raises(LogDeviceError):
        p.encode_frame(msg)


def test_records_layout_is_aligned_and_padded():
    msg = records_msg(n=3, payload_size=3)
    bufs = p.encode(msg)
    frame = b"".join(bufs)
    assert len(frame) % 8 == 0
    _total, _t, _v, _f, hl = PREFIX.unpack_from(frame)
    header = msgspec.msgpack.decode(frame[12 : 12 + hl])
    # raw fields hold their byte lengths at their positions
    assert header[:2] == [7, 3]
    assert header[2] == 3 * 8  # lsns
    start = (12 + hl + 7) & ~7
    assert frame[start : start + 24] == msg.lsns.tobytes()
    # sections are the caller's buffers, not copies
    assert any(isinstance(b, memoryview) and np.shares_memory(np.asarray(b), msg.lsns)
               for b in bufs)


def test_decoded_arrays_are_zero_copy_views_of_one_frame():
    msg = records_msg(n=1000, payload_size=100)
    (got,) = p.FrameDecoder().feed(p.encode_frame(msg))
    owners = set()
    for arr in (got.lsns, got.timestamps, got.flags, got.payload_offsets, got.checksums):
        assert not arr.flags.owndata and not arr.flags.writeable and arr.flags.aligned
        assert isinstance(arr.base, memoryview)
        owners.add(id(arr.base.obj))
    owners.add(id(got.payloads.obj))
    assert len(owners) == 1  # one frame buffer backs every section
    frame = np.frombuffer(got.lsns.base.obj, np.uint8)
    assert np.shares_memory(frame, got.lsns) and np.shares_memory(frame, got.checksums)
    assert got.payloads.readonly


def test_empty_and_optional_sections():
    msg = p.Records(read_stream_id=1, filter_version=1)
    got = p.decode_frame(p.encode_frame(msg))
    assert len(got.lsns) == 0 and got.copysets.shape == (0, 0) and bytes(got.payloads) == b""
    store = p.Store(request_id=1, log_id=1, epoch=1, lsns=[1], timestamps=[1], flags=[0],
                    waves=[1], copysets=[[3, 4]], payload_offsets=[0, 0])
    got = p.decode_frame(p.encode_frame(store))
    assert got.copysets.dtype == np.int16 and got.copysets.tolist() == [[3, 4]]


def test_pack_unpack_payloads():
    payloads = [b"", b"a", b"bcd", b"x" * 300]
    offsets, buf = p.pack_payloads(payloads)
    assert offsets.tolist() == [0, 0, 1, 4, 304]
    assert [bytes(x) for x in p.unpack_payloads(offsets, buf)] == payloads


def stream_of(msgs):
    return b"".join(p.encode_frame(m) for m in msgs)


def assert_same_list(expected, got):
    assert len(got) == len(expected)
    for a, b in zip(expected, got, strict=True):
        assert_same(a, b)


def test_byte_at_a_time():
    msgs = sample_messages()
    data = stream_of(msgs)
    dec = p.FrameDecoder()
    out = []
    for i in range(len(data)):
        out += dec.feed(data[i : i + 1])
    assert_same_list(msgs, out)
    assert dec.pending == 0


def test_large_frame_in_small_chunks_and_memoryview_input():
    big = records_msg(n=20_000, payload_size=50, seed=3)
    msgs = [p.Hello(cluster="c"), big, p.Stop(read_stream_id=1), big]
    data = bytearray(stream_of(msgs))
    dec = p.FrameDecoder()
    out = []
    view = memoryview(data)
    for i in range(0, len(data), 4093):
        out += dec.feed(view[i : i + 4093])
    view.release()
    data[:] = b"\0" * len(data)  # the decoder must not keep views of the caller's buffer
    assert_same_list(msgs, out)


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_random_chunk_splits(data):
    msgs = sample_messages() + [records_msg(n=300, payload_size=40, seed=1)]
    order = data.draw(st.permutations(range(len(msgs))))
    msgs = [msgs[i] for i in order]
    stream = stream_of(msgs)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(stream)), max_size=40)))
    dec = p.FrameDecoder()
    out = []
    prev = 0
    for cut in [*cuts, len(stream)]:
        out += dec.feed(stream[prev:cut])
        prev = cut
    assert_same_list(msgs, out)


# ---------------------------------------------------------------------------- errors


def prefix(total, type_id=p.MessageType.HELLO, version=1, flags=0, hl=1):
    return PREFIX.pack(total, type_id, version, flags, hl)


def expect_error(data, status, **kwargs):
    dec = p.FrameDecoder(**kwargs)
    with pytest.raises(p.ProtocolError) as info:
        dec.feed(data)
    assert info.value.status == status
    assert isinstance(info.value, LogDeviceError)
    with pytest.raises(p.ProtocolError):  # a failed decoder stays failed
        dec.feed(p.encode_frame(p.Stop(read_stream_id=1)))
    return info.value


def test_oversized_frame_refused_from_its_prefix_alone():
    err = expect_error(prefix(2**32 - 1), E.BADMSG)
    assert "exceeds" in str(err)
    expect_error(prefix(1025, p.MessageType.RECORDS), E.BADMSG, max_frame_size=1024)


def test_unknown_type_bad_version_bad_lengths():
    expect_error(prefix(20, type_id=999), E.BADMSG)
    expect_error(prefix(20, version=2), E.PROTONOSUPPORT)
    expect_error(prefix(20, version=0), E.PROTONOSUPPORT)
    expect_error(prefix(20, hl=0), E.BADMSG)
    expect_error(prefix(20, hl=100), E.BADMSG)
    expect_error(prefix(5), E.BADMSG)  # shorter than its own prefix


def test_garbage_header():
    body = b"\xc1\xc1\xc1\xc1"  # 0xc1 is never valid msgpack
    expect_error(prefix(12 + len(body), hl=len(body)) + body, E.BADMSG)
    wrong_types = msgspec.msgpack.encode([1, 2, 3])  # cluster must be a str
    expect_error(prefix(12 + len(wrong_types), hl=len(wrong_types)) + wrong_types, E.BADMSG)
    good = p.encode_frame(p.Stop(read_stream_id=1))
    padded = bytearray(good + b"\0")
    PREFIX.pack_into(padded, 0, len(padded), p.MessageType.STOP, 1, 0, len(good) - 12)
    expect_error(bytes(padded), E.BADMSG)  # trailing bytes after a control header


def test_bad_status_value():
    header = msgspec.msgpack.encode([99999])  # HELLO_REPLY with an unknown status
    expect_error(prefix(12 + len(header), p.MessageType.HELLO_REPLY, hl=len(header)) + header,
                 E.BADMSG)


def craft_records(header, sections_bytes):
    hl = len(header)
    pad = -(12 + hl) & 7
    body = header + b"\0" * pad + sections_bytes
    return prefix(12 + len(body), p.MessageType.RECORDS, hl=hl) + body


def test_bad_section_tables():
    lsns = np.arange(2, dtype=np.uint64).tobytes()
    # section lengths that do not add up to the frame
    header = msgspec.msgpack.encode([1, 1, 16, 0, 0, 0, 0, 0, 0, [0, 0]])
    expect_error(craft_records(header, lsns + b"\0" * 8), E.BADMSG)
    # a length that is not a whole number of uint64
    header = msgspec.msgpack.encode([1, 1, 12, 0, 0, 0, 0, 0, 0, [0, 0]])
    expect_error(craft_records(header, lsns), E.BADMSG)
    # negative length
    header = msgspec.msgpack.encode([1, 1, -8, 0, 0, 0, 0, 0, 0, [0, 0]])
    expect_error(craft_records(header, b""), E.BADMSG)
    # columns that disagree: 2 lsns, no timestamps
    header = msgspec.msgpack.encode([1, 1, 16, 0, 0, 0, 0, 0, 0, [0, 0]])
    err = expect_error(craft_records(header, lsns), E.BADMSG)
    assert "timestamps" in str(err)


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=200), st.sampled_from([0, 1, 2, 12, 13]))
def test_garbage_never_escapes_as_another_exception(junk, keep):
    data = p.encode_frame(p.Hello(cluster="c"))[:keep] + junk
    dec = p.FrameDecoder(max_frame_size=4096)
    try:
        dec.feed(data)
    except p.ProtocolError as exc:
        assert exc.status in (E.BADMSG, E.PROTONOSUPPORT)
    assert dec.pending <= len(data)


def test_encode_errors():
    with pytest.raises(InvalidParamError):
        p.encode(object())
    with pytest.raises(InvalidParamError, match="lsns"):
        p.encode(p.Records(read_stream_id=1, filter_version=1, lsns=np.zeros((2, 2))))
    with pytest.raises(InvalidParamError, match="timestamps"):
        p.encode(p.Records(read_stream_id=1, filter_version=1, lsns=[1, 2], timestamps=[1]))
    with pytest.raises(InvalidParamError, match="payload_offsets"):
        p.encode(p.Records(read_stream_id=1, filter_version=1, lsns=[1], timestamps=[1],
                           flags=[0], payload_offsets=[0, 5], payloads=b"abc"))
    with pytest.raises(TooBigError):
        p.encode(p.Append(request_id=1, log_id=1, payload=b"x" * 2000), max_frame_size=1024)


def test_forward_compatible_headers():
    """Extra trailing header fields from a newer peer are ignored; missing ones default."""
    header = msgspec.msgpack.encode(["test", 1, "client", None, "", "", "", "a future field"])
    (got,) = p.FrameDecoder().feed(prefix(12 + len(header), hl=len(header)) + header)
    assert got == p.Hello(cluster="test")
    header = msgspec.msgpack.encode(["test"])
    assert p.decode_frame(prefix(12 + len(header), hl=len(header)) + header) == p.Hello("test")


def test_check_hello():
    assert p.check_hello(p.Hello(cluster="a"), "a") == (E.OK, "")
    status, why = p.check_hello(p.Hello(cluster="b"), "a")
    assert status == E.ACCESS and "wrong cluster" in why
    status, why = p.check_hello(p.Hello(cluster="a", protocol_version=9), "a")
    assert status == E.PROTONOSUPPORT and "9" in why
    assert p.check_hello(p.Hello(cluster="a", role="node"), "a")[0] == E.INVALID_PARAM
    assert p.check_hello(p.Hello(cluster="a", protocol_version=2), "a", {1, 2})[0] == E.OK
    # Epoch store identities: compared when both sides know theirs.
    node = {"cluster": "a", "role": "node", "node_index": 3}
    assert p.check_hello(p.Hello(**node, store_id="x"), "a", store_id="x")[0] == E.OK
    assert p.check_hello(p.Hello(**node), "a", store_id="x")[0] == E.OK
    assert p.check_hello(p.Hello(**node, store_id="x"), "a")[0] == E.OK
    status, why = p.check_hello(p.Hello(**node, store_id="y"), "a", store_id="x")
    assert status == E.INVALID_CONFIG and "epoch store mismatch: N3" in why
    status, why = p.check_hello(p.Hello(cluster="a", store_id="y"), "a", store_id="x")
    assert status == E.INVALID_CONFIG and "the peer uses" in why


def test_message_types_are_unique():
    with pytest.raises(ValueError, match="twice"):
        framing.register(type("Dup", (p.Stop,), {"TYPE": p.MessageType.STOP}))


def test_record_flags_are_distinct_bits_shared_with_the_scd_kernel():
    from ldcore import scd

    bits = [int(f) for f in RecordFlag if f]
    assert len(set(bits)) == len(bits) and all(b & (b - 1) == 0 for b in bits)
    assert RecordFlag.HOLE == scd.FLAG_HOLE and RecordFlag.BRIDGE == scd.FLAG_BRIDGE
    assert RecordFlag.DRAINED == scd.FLAG_DRAINED
    assert RecordFlag.WRITTEN_BY_RECOVERY == scd.FLAG_WRITTEN_BY_RECOVERY
    assert int(StartFlag.SINGLE_COPY_DELIVERY) == 128 and int(StartFlag.LOCAL_SCD_ENABLED) == 2048


def test_records_flagged_checksum_need_their_checksums():
    # A record flagged CHECKSUM without a checksum would pass for verified: refused when
    # encoded, and as BADMSG when such a frame arrives (on the node: STORE; in the
    # reader: RECORDS).
    blob, checked = int(p.RecordFlag.BUFFERED_WRITER_BLOB), int(p.RecordFlag.CHECKSUM)

    def one(flags):
        return dict(lsns=np.array([5], np.uint64), timestamps=np.array([1], np.int64),
                    flags=np.array([flags], np.uint32),
                    payload_offsets=np.array([0, 3], np.uint64), payloads=b"abc")

    def forged(msg):  # the flag word turned into BLOB | CHECKSUM after encoding
        frame = bytes(p.encode_frame(msg))
        word = np.uint32(blob).tobytes()
        assert frame.count(word) == 1
        return frame.replace(word, np.uint32(blob | checked).tobytes())

    with pytest.raises(LogDeviceError):
        p.encode_frame(p.Records(read_stream_id=1, filter_version=1, **one(checked)))
    err = expect_error(forged(p.Records(read_stream_id=1, filter_version=1, **one(blob))),
                       E.BADMSG)
    assert "CHECKSUM" in str(err)
    store = p.Store(request_id=1, log_id=1, epoch=1, waves=np.array([1], np.uint32),
                    copysets=np.array([[0, 1]], np.int16), **one(blob))
    expect_error(forged(store), E.BADMSG)
    # With the checksums column they decode.
    ok = p.FrameDecoder().feed(p.encode_frame(p.Records(
        read_stream_id=1, filter_version=1, checksums=np.array([7], np.uint32),
        **one(checked))))
    assert len(ok) == 1 and ok[0].checksums.tolist() == [7]


def test_append_batch_columns_must_agree():
    def batch(**kw):
        fields = dict(request_id=1, log_id=1, payload_offsets=np.array([0, 2, 5], np.uint64),
                      payloads=b"abcde")
        fields.update(kw)
        return p.AppendBatch(**fields)

    (ok,) = p.FrameDecoder().feed(p.encode_frame(batch()))
    assert ok.payload_offsets.tolist() == [0, 2, 5] and bytes(ok.payloads) == b"abcde"
    bad = [
        batch(payload_offsets=np.array([0], np.uint64), payloads=b""),  # no records
        batch(payload_offsets=np.array([0, 2, 4], np.uint64)),  # ends before the payloads
        batch(payload_offsets=np.array([0, 4, 2, 5], np.uint64)),  # decreasing
        batch(flags=int(p.AppendFlag.CHECKSUM)),  # flagged, no checksums
        batch(flags=int(p.AppendFlag.CHECKSUM), checksums=np.array([1], np.uint32)),
    ]
    for msg in bad:
        assert msg.consistency_problem() is not None
        with pytest.raises(LogDeviceError):
            p.encode_frame(msg)
    reply = p.AppendedBatch(request_id=1, status=E.OK,
                            statuses=np.array([0, 0], np.uint16),
                            lsns=np.array([1], np.uint64), timestamps=np.array([1, 2], np.int64))
    assert "lsns" in reply.consistency_problem()
