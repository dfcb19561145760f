"""The epoch store contract, run against both backends (the SQLite ``file:`` store and a
real ZooKeeper): compare-and-set per log, metadata history, last clean epoch, the event log
and shard status, the cluster identity, and safety across processes sharing one store.
What needs no store server (URIs, the SQLite busy lock, states that cannot be built) is in
tests/unit/test_epochstore.py."""

import multiprocessing as mp
import threading

import pytest

from logdevice.epochstore import (
    EPOCH_MIN,
    SHARD_ABORT_REBUILD,
    SHARD_ACK_REBUILT,
    SHARD_IS_REBUILT,
    SHARD_NEEDS_REBUILD,
    SHARD_UNRECOVERABLE,
    AuthoritativeStatus,
    EpochMetadata,
    LogEpochState,
    ShardStatusFold,
    TailRecord,
    VersionMismatchError,
    open_epoch_store,
)
from logdevice.errors import E, InvalidParamError, LogDeviceError, NotFoundError

A = AuthoritativeStatus
MD = {"nodeset": [0, 1, 2], "replication": {"node": 2}}
WAIT = 60  # seconds: every cross-process wait is bounded by this


@pytest.fixture(params=["file", "zookeeper"])
def store_uri(request, tmp_path):
    """The URI of a fresh, empty store of each backend."""
    if request.param == "file":
        return f"file:{tmp_path / 'epochs.sqlite'}"
    return request.getfixturevalue("zk_uri")


@pytest.fixture
def store(store_uri):
    with open_epoch_store(store_uri, timeout=10) as s:
        yield s


# -- activation and history ----------------------------------------------------------------
def test_first_activation_needs_metadata(store):
    assert store.get(7) is None
    with pytest.raises(InvalidParamError, match="first activation"):
        store.activate(7)
    assert store.get(7) is None  # nothing written by the failed attempt


def test_activate_bumps_epoch_and_keeps_history(store):
    epoch, st = store.activate(7, MD)
    assert epoch == EPOCH_MIN == st.epoch and st.version == 1
    assert st.history == (EpochMetadata(1, (0, 1, 2), {"node": 2}),)
    epoch, st = store.activate(7)  # keep the placement
    assert epoch == 2 and len(st.history) == 1
    epoch, st = store.activate(7, {"nodeset": [2, 1, 0], "replication": 2})  # same, reordered
    assert epoch == 3 and len(st.history) == 1
    epoch, st = store.activate(7, {"nodeset": [0, 1, 2, 3], "replication": {"node": 2}})
    assert epoch == 4 and [m.first_epoch for m in st.history] == [1, 4]
    epoch, st = store.activate(7, {"nodeset": [0, 1, 2, 3], "replication": {"rack": 2,
                                                                             "node": 3}})
    assert epoch == 5 and [m.first_epoch for m in st.history] == [1, 4, 5]
    assert store.get(7) == st and st.version == 5
    assert store.metadata_for_epoch(7, 1).nodeset == (0, 1, 2)
    assert store.metadata_for_epoch(7, 3).nodeset == (0, 1, 2)
    assert store.metadata_for_epoch(7, 4).nodeset == (0, 1, 2, 3)
    assert store.metadata_for_epoch(7, 99).replication == {"rack": 2, "node": 3}
    assert store.metadata_for_epoch(7, 0) is None
    with pytest.raises(NotFoundError):
        store.metadata_for_epoch(8, 1)


def test_activate_with_a_function_and_expected_version(store):
    seen = []

    def choose(cur):
        seen.append(None if cur is None else cur.epoch)
        return None if cur is not None else MD

    assert store.activate(3, choose)[0] == 1
    assert store.activate(3, choose)[0] == 2
    assert seen == [None, 1]
    with pytest.raises(VersionMismatchError) as ei:
        store.activate(3, expected_version=1)
    assert ei.value.status == E.AGAIN and ei.value.current.version == 2
    assert store.activate(3, expected_version=2)[0] == 3
    assert store.activate(4, MD, expected_version=0)[0] == 1


def test_sticky_flag_and_replication_property_object(store):
    from logdevice.config import ReplicationProperty

    rp = ReplicationProperty.parse({"rack": 2, "node": 3})
    _, st = store.activate(1, EpochMetadata(0, (0, 1, 2, 3), rp))
    assert st.metadata.replication == {"rack": 2, "node": 3}
    assert st.metadata.replication_factor == 3
    _, st = store.activate(1, EpochMetadata(0, (0, 1, 2, 3), rp, sticky_copysets=True))
    assert [m.sticky_copysets for m in st.history] == [False, True]


@pytest.mark.parametrize("bad", [
    {"nodeset": [], "replication": 1},
    {"nodeset": [0], "replication": 2},
    {"nodeset": [0, -1], "replication": 1},
    {"nodeset": [0, 1], "replication": {"shelf": 1}},
    {"nodeset": [0, 1], "replication": {"node": 0}},
    {"nodeset": [0, 1], "replication": 1, "colour": "red"},
])
def test_bad_metadata_is_refused(store, bad):
    with pytest.raises(InvalidParamError):
        store.activate(1, bad)


# -- compare-and-set -----------------------------------------------------------------------
def test_compare_and_set(store):
    st = store.compare_and_set(9, 0, LogEpochState(9, epoch=0, history=(
        EpochMetadata(1, (0, 1), {"node": 2}),)))
    assert st.version == 1 and st.epoch == 0
    with pytest.raises(VersionMismatchError) as ei:
        store.compare_and_set(9, 0, LogEpochState(9))
    assert ei.value.status == E.AGAIN and ei.value.current == st
    st2 = store.compare_and_set(9, 1, LogEpochState(9, epoch=4, last_clean_epoch=3,
                                                    history=st.history,
                                                    tail=TailRecord(5, 1000)))
    assert st2.version == 2 and store.get(9) == st2
    with pytest.raises(InvalidParamError, match="backwards"):
        store.compare_and_set(9, 2, LogEpochState(9, epoch=3, history=st.history))
    assert store.activate(9)[0] == 5  # activation continues from the CAS'd epoch


def test_last_clean_epoch_moves_forward_only(store):
    with pytest.raises(NotFoundError):
        store.set_last_clean_epoch(5, 1)
    for _ in range(4):
        store.activate(5, MD)
    st = store.set_last_clean_epoch(5, 2, TailRecord(lsn=(2 << 32) | 10, timestamp=111))
    assert st.last_clean_epoch == 2 and st.tail.lsn == (2 << 32) | 10
    same = store.set_last_clean_epoch(5, 1, TailRecord(lsn=1, timestamp=1))
    assert same == st  # stale: nothing changed, not even the version
    st = store.set_last_clean_epoch(5, 3)
    assert st.last_clean_epoch == 3 and st.tail.timestamp == 111
    with pytest.raises(InvalidParamError, match="past the current epoch"):
        store.set_last_clean_epoch(5, 5)
    big = TailRecord(lsn=2**64 - 2, timestamp=2)  # LSNs need all 64 bits
    assert store.set_last_clean_epoch(5, 4, big).tail == big
    assert store.get(5).tail == big


def test_logs_and_remove(store):
    for log in (30, 2, 2**62 - 5):
        store.activate(log, MD)
    assert store.logs() == [2, 30, 2**62 - 5]
    with pytest.raises(VersionMismatchError):
        store.remove(30, expected_version=7)
    assert store.remove(30, expected_version=1) and not store.remove(30)
    assert store.logs() == [2, 2**62 - 5]
    for bad in (0, -1, True, "7", 2**63):
        with pytest.raises(InvalidParamError):
            store.get(bad)


# -- the event log and shard status --------------------------------------------------------
def test_events_are_numbered_and_validated(store):
    v1 = store.append_event({"type": SHARD_NEEDS_REBUILD, "node": 2, "reason": "disk"})
    v2 = store.append_event({"type": SHARD_IS_REBUILT, "node": 2, "donor": 0})
    assert (v1, v2) == (1, 2)
    evs = store.events()
    assert [e["version"] for e in evs] == [1, 2] and evs[0]["reason"] == "disk"
    assert all(e["time_ms"] > 0 for e in evs)
    assert [e["version"] for e in store.events(since_version=1)] == [2]
    for bad in ({"type": "NOPE", "node": 1}, {"type": SHARD_IS_REBUILT},
                {"type": SHARD_IS_REBUILT, "node": -1},
                {"type": SHARD_IS_REBUILT, "node": 1, "version": 3},
                {"type": SHARD_NEEDS_REBUILD, "node": 1, "donors": "all"},
                {"type": SHARD_NEEDS_REBUILD, "node": 1, "unrecoverable": 1},
                {"type": SHARD_NEEDS_REBUILD, "node": 1, "x": object()}):
        with pytest.raises(InvalidParamError):
            store.append_event(bad)
    assert len(store.events()) == 2


def ev(kind, node=1, **kw):
    return {"type": kind, "node": node, **kw}


SHARD_CASES = [
    ("no events", [], A.FULLY_AUTHORITATIVE),
    ("needs rebuild", [ev(SHARD_NEEDS_REBUILD)], A.UNAVAILABLE),
    ("needs rebuild, data lost", [ev(SHARD_NEEDS_REBUILD, unrecoverable=True)],
     A.UNDERREPLICATION),
    ("marked unrecoverable", [ev(SHARD_NEEDS_REBUILD), ev(SHARD_UNRECOVERABLE)],
     A.UNDERREPLICATION),
    ("unrecoverable alone", [ev(SHARD_UNRECOVERABLE)], A.UNDERREPLICATION),
    ("rebuilt", [ev(SHARD_NEEDS_REBUILD), ev(SHARD_IS_REBUILT)], A.AUTHORITATIVE_EMPTY),
    ("acked", [ev(SHARD_NEEDS_REBUILD), ev(SHARD_IS_REBUILT), ev(SHARD_ACK_REBUILT)],
     A.FULLY_AUTHORITATIVE),
    ("ack too early", [ev(SHARD_NEEDS_REBUILD), ev(SHARD_ACK_REBUILT)], A.UNAVAILABLE),
    ("donors partly done", [ev(SHARD_NEEDS_REBUILD, donors=[0, 2, 3]),
                            ev(SHARD_IS_REBUILT, donor=0), ev(SHARD_IS_REBUILT, donor=3)],
     A.UNAVAILABLE),
    ("donors all done", [ev(SHARD_NEEDS_REBUILD, donors=[0, 2, 3], unrecoverable=True),
                         ev(SHARD_IS_REBUILT, donor=0), ev(SHARD_IS_REBUILT, donor=3),
                         ev(SHARD_IS_REBUILT, donor=2)], A.AUTHORITATIVE_EMPTY),
    ("other node's events", [ev(SHARD_NEEDS_REBUILD, node=4)], A.FULLY_AUTHORITATIVE),
    ("abort", [ev(SHARD_NEEDS_REBUILD), ev(SHARD_ABORT_REBUILD)], A.FULLY_AUTHORITATIVE),
    ("abort after rebuilt", [ev(SHARD_NEEDS_REBUILD), ev(SHARD_IS_REBUILT),
                             ev(SHARD_ABORT_REBUILD)], A.AUTHORITATIVE_EMPTY),
    ("restart keeps data-lost", [ev(SHARD_UNRECOVERABLE), ev(SHARD_NEEDS_REBUILD)],
     A.UNDERREPLICATION),
    ("rebuilt then fails again", [ev(SHARD_NEEDS_REBUILD), ev(SHARD_IS_REBUILT),
                                  ev(SHARD_ACK_REBUILT), ev(SHARD_NEEDS_REBUILD)],
     A.UNAVAILABLE),
    ("stray donor report", [ev(SHARD_IS_REBUILT)], A.FULLY_AUTHORITATIVE),
]


@pytest.mark.parametrize(("events", "status"), [c[1:] for c in SHARD_CASES],
                         ids=[c[0] for c in SHARD_CASES])
def test_shard_status_transitions(store, events, status):
    assert ShardStatusFold().apply_all(events).status(1) == status
    for e in events:
        store.append_event(e)
    assert store.shard_status(1) == status
    expected = {} if status == A.FULLY_AUTHORITATIVE else {1: status}
    assert {k: v for k, v in store.shard_statuses().items() if k == 1} == expected


def test_a_rebuilding_asked_for_later_does_not_wait_for_a_node_rebuilt_before(store):
    from logdevice.config import Config
    from logdevice.rebuilding.requests import request_rebuild

    config = Config.from_dict({
        "cluster": "c", "epoch_store": "file:/unused.sqlite",
        "nodes": [{"index": i, "host": "127.0.0.1", "port": 4440 + i} for i in range(5)],
        "logs": [{"name": "l", "id": 1, "replication": 3}]})
    request_rebuild(store, config, 2, unrecoverable=True)
    assert store.rebuilding_set().donors == {0, 1, 3, 4}
    for donor in (0, 1, 3, 4):
        store.append_event(ev(SHARD_IS_REBUILT, node=2, donor=donor))
    assert store.shard_status(2) == A.AUTHORITATIVE_EMPTY  # rebuilt, and still down
    # N2 holds nothing now and may never come back: N4's rebuilding must not wait for it.
    request_rebuild(store, config, 4, unrecoverable=True)
    assert store.rebuilding_set().donors == {0, 1, 3}


def test_shard_status_follows_new_events(store_uri):
    with open_epoch_store(store_uri) as a, open_epoch_store(store_uri) as b:
        assert a.shard_status(3) == A.FULLY_AUTHORITATIVE
        b.append_event(ev(SHARD_NEEDS_REBUILD, node=3))
        assert a.shard_status(3) == A.UNAVAILABLE  # a sees b's event
        b.append_event(ev(SHARD_IS_REBUILT, node=3))
        assert a.shard_status(3) == A.AUTHORITATIVE_EMPTY
        assert a.shard_statuses() == {3: A.AUTHORITATIVE_EMPTY}


# -- closing, threads -----------------------------------------------------------------------


def test_closed_store_refuses(store_uri):
    s = open_epoch_store(store_uri)
    s.activate(1, MD)
    s.close()
    s.close()  # idempotent
    assert s.closed
    with pytest.raises(LogDeviceError) as ei:
        s.get(1)
    assert ei.value.status == E.SHUTDOWN


def test_threads_sharing_and_not_sharing_a_store(store_uri):
    shared = open_epoch_store(store_uri)
    shared.activate(1, MD)
    got: list[int] = []
    lock = threading.Lock()

    def run(own: bool):
        s = open_epoch_store(store_uri) if own else shared
        try:
            for _ in range(20):
                e = s.activate(1)[0]
                with lock:
                    got.append(e)
        finally:
            if own:
                s.close()

    threads = [threading.Thread(target=run, args=(i % 2 == 0,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(WAIT)
        assert not t.is_alive()
    shared.close()
    assert sorted(got) == list(range(2, 2 + 80))


# -- several logs at once -----------------------------------------------------------------
def test_activate_many_activates_each_and_fails_only_the_bad_entry(store):
    store.activate(5, MD)  # already at epoch 1
    results = store.activate_many([(4, MD), (5, None), (6, None), (7, MD)])
    assert [r[0] for r in (results[0], results[1], results[3])] == [1, 2, 1]
    assert isinstance(results[2], InvalidParamError)  # a first activation without metadata
    assert store.get(6) is None  # nothing written for it
    for log_id, (epoch, state) in zip((4, 5, 7), (results[0], results[1], results[3]),
                                      strict=True):
        assert store.get(log_id) == state and state.epoch == epoch
        assert [m.nodeset for m in state.history] == [(0, 1, 2)]
    again = store.activate_many([(4, None), (7, {"nodeset": [1, 2], "replication": 2})])
    assert [e for e, _ in again] == [2, 2]
    assert [m.first_epoch for m in store.get(7).history] == [1, 2]


def test_epochs_of_many_logs_leave_out_the_unknown(store):
    store.activate_many([(n, MD) for n in range(1, 601)])
    store.activate(7, MD)
    assert store.epochs([]) == {}
    got = store.epochs([7, 8, 999, *range(100, 700)])
    assert got == {7: 2, 8: 1, **{n: 1 for n in range(100, 601)}}


def test_states_of_many_logs_are_what_get_reads(store):
    store.activate_many([(n, MD) for n in range(1, 601)])
    store.activate(7, {"nodeset": [1, 2], "replication": 2})
    assert store.get_many([]) == {}
    got = store.get_many([7, 8, 999, *range(100, 700)])
    assert sorted(got) == [7, 8, *range(100, 601)]
    assert all(got[n] == store.get(n) for n in got)
    assert [m.first_epoch for m in got[7].history] == [1, 2]
    plain = store.get_many_plain([7, 8, 999, *range(100, 700)])
    assert plain == {n: state.to_dict() for n, state in got.items()}
    assert all(LogEpochState.from_dict(d) == got[n] for n, d in plain.items())


def test_update_many_applies_changes_in_order_even_to_one_log(store):
    def bump_clean(cur):
        return LogEpochState(cur.log_id, epoch=cur.epoch,
                             last_clean_epoch=cur.last_clean_epoch + 1, history=cur.history)

    store.activate(3, MD)
    store.activate(3, MD)
    store.activate(3, MD)
    out = store.update_many([(3, bump_clean), (3, bump_clean), (9, lambda cur: None)])
    assert [s.last_clean_epoch for s in out[:2]] == [1, 2] and out[2] is None
    assert store.get(3).last_clean_epoch == 2 and store.get(3).version == 5


def test_activate_many_in_batches_larger_than_one_transaction(store):
    logs = range(1000, 1000 + 1200)  # ZooKeeper: three multi transactions
    results = store.activate_many([(log_id, MD) for log_id in logs])
    assert [e for e, _ in results] == [1] * len(logs)
    assert sorted(store.logs()) == list(logs)
    assert [e for e, _ in store.activate_many([(log_id, None) for log_id in logs])] == \
        [2] * len(logs)


def _activate_batches(uri, logs, count, barrier, out):
    try:
        with open_epoch_store(uri, timeout=30) as s:
            barrier.wait(WAIT)
            got = []
            for _ in range(count):
                got.append([r[0] for r in s.activate_many([(log, MD) for log in logs])])
            out.put(got)
    except BaseException as e:  # report, so the parent fails fast instead of waiting
        out.put(repr(e))


def test_concurrent_batches_from_processes_get_distinct_epochs(store_uri):
    with open_epoch_store(store_uri) as s:
        s.logs()
    n_procs, per_proc, logs = 3, 10, [21, 22, 23]
    ctx = mp.get_context("spawn")
    barrier = ctx.Barrier(n_procs)
    results = _run(ctx, _activate_batches, (store_uri, logs, per_proc, barrier), n=n_procs)
    for i in range(len(logs)):
        epochs = sorted(batch[i] for r in results for batch in r)
        assert epochs == list(range(1, n_procs * per_proc + 1))  # no epoch handed out twice
    with open_epoch_store(store_uri) as s:
        assert [s.get(log).epoch for log in logs] == [n_procs * per_proc] * len(logs)


# -- across processes ----------------------------------------------------------------------
def _activate_many(uri, log_id, count, barrier, out):
    try:
        with open_epoch_store(uri, timeout=30) as s:
            barrier.wait(WAIT)
            out.put([s.activate(log_id, MD)[0] for _ in range(count)])
    except BaseException as e:  # report, so the parent fails fast instead of waiting
        out.put(repr(e))


def _read_and_activate(uri, out):
    try:
        with open_epoch_store(uri) as s:
            st = s.get(11)
            e, _ = s.activate(11)
            s.append_event({"type": SHARD_NEEDS_REBUILD, "node": 4})
            out.put((st.epoch, st.last_clean_epoch, st.tail, [m.nodeset for m in st.history], e))
    except BaseException as e:
        out.put(repr(e))


def _run(ctx, target, args, n=1):
    out = ctx.Queue()
    procs = [ctx.Process(target=target, args=(*args, out)) for _ in range(n)]
    for p in procs:
        p.start()
    try:
        results = [out.get(timeout=WAIT) for _ in procs]
    finally:
        for p in procs:
            p.join(WAIT)
            if p.is_alive():
                p.kill()
    for r in results:
        assert not isinstance(r, str), r
    return results


def test_reopen_from_another_process(store_uri):
    with open_epoch_store(store_uri) as s:
        s.activate(11, MD)
        s.activate(11, {"nodeset": [1, 2, 3], "replication": 2})
        s.set_last_clean_epoch(11, 1, TailRecord(99, 5))
    ctx = mp.get_context("spawn")
    [(epoch, lce, tail, nodesets, new_epoch)] = _run(ctx, _read_and_activate, (store_uri,))
    assert (epoch, lce, tail, nodesets, new_epoch) == (
        2, 1, TailRecord(99, 5), [(0, 1, 2), (1, 2, 3)], 3)
    with open_epoch_store(store_uri) as s:
        assert s.get(11).epoch == 3 and s.get(11).version == 4
        assert s.shard_status(4) == A.UNAVAILABLE


def test_concurrent_activations_from_processes_get_distinct_epochs(store_uri):
    with open_epoch_store(store_uri) as s:  # create the layout up front: the race is on
        s.logs()                            # activate
    n_procs, per_proc = 4, 25
    ctx = mp.get_context("spawn")
    barrier = ctx.Barrier(n_procs)
    results = _run(ctx, _activate_many, (store_uri, 42, per_proc, barrier), n=n_procs)
    epochs = [e for r in results for e in r]
    assert sorted(epochs) == list(range(1, n_procs * per_proc + 1))  # distinct, contiguous
    assert all(r == sorted(r) for r in results)  # each process sees its epochs increase
    with open_epoch_store(store_uri) as s:
        st = s.get(42)
        assert st.epoch == n_procs * per_proc == st.version and len(st.history) == 1


# -- cluster identity ------------------------------------------------------------------------
def test_cluster_identity_is_set_once(store_uri):
    with open_epoch_store(store_uri) as a, open_epoch_store(store_uri) as b:
        ident = a.cluster_identity("prod")
        assert len(ident) == 32 and b.cluster_identity("prod") == ident
        with pytest.raises(LogDeviceError, match="belongs to cluster 'prod'") as ei:
            b.cluster_identity("staging")
        assert ei.value.status == E.INVALID_CONFIG


def test_separate_stores_have_separate_identities(tmp_path, zk_uri):
    ids = set()
    for uri in (f"file:{tmp_path / 'a.sqlite'}", f"file:{tmp_path / 'b.sqlite'}", zk_uri,
                zk_uri + "_other"):
        with open_epoch_store(uri) as s:
            ids.add(s.cluster_identity("c"))
    assert len(ids) == 4


# -- runtime log groups (LogsConfig) -----------------------------------------------------------
def test_logs_config_starts_empty_and_changes_by_compare_and_set(store_uri):
    g1 = {"name": "a", "id": [10, 19], "replication": 2}
    with open_epoch_store(store_uri) as a, open_epoch_store(store_uri) as b:
        assert a.logs_config().version == 0 and a.logs_config().groups == ()
        st = a.update_logs_config(lambda groups: [*groups, g1])
        assert st.version == 1 and st.groups == (g1,)
        assert b.logs_config() == st  # another handle sees the write at once
        assert b.update_logs_config(lambda groups: None) == st  # None: nothing changes
        g2 = {"name": "b", "id": 30, "replication": {"node": 1}}
        assert b.update_logs_config(lambda groups: [*groups, g2]).version == 2
        assert a.logs_config().groups == (g1, g2)
        assert a.update_logs_config(lambda groups: []).groups == ()
        assert b.logs_config().version == 3
        assert 10 not in a.logs() and a.logs() == []  # not a log of the store


def test_logs_config_refuses_what_is_not_json_and_keeps_the_old_state(store_uri):
    with open_epoch_store(store_uri) as s:
        s.update_logs_config(lambda groups: [{"name": "a", "id": 1, "replication": 1}])
        with pytest.raises(InvalidParamError, match="JSON object"):
            s.update_logs_config(lambda groups: ["not a group"])
        with pytest.raises(InvalidParamError, match="JSON"):
            s.update_logs_config(lambda groups: [{"name": "a", "id": {1, 2}}])

        def abort(groups):
            raise NotFoundError(message="nope")

        with pytest.raises(NotFoundError):
            s.update_logs_config(abort)
        assert s.logs_config().version == 1


def test_concurrent_logs_config_updates_are_all_kept(store_uri):
    with open_epoch_store(store_uri) as s:
        s.logs()  # the layout exists before the race

    def add(i: int) -> None:
        with open_epoch_store(store_uri, timeout=30) as own:
            for j in range(5):
                name = f"g{i}_{j}"
                own.update_logs_config(lambda groups, name=name: [*groups, {"name": name}])

    threads = [threading.Thread(target=add, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(WAIT)
        assert not t.is_alive()
    with open_epoch_store(store_uri) as s:
        st = s.logs_config()
        assert st.version == 20 and len({g["name"] for g in st.groups}) == 20
