"""The epoch store without a store server: states that cannot be built, opening ``file:``
stores and parsing URIs, the SQLite store's busy lock, the shard status fold.  The store
contract against both backends (SQLite and a real ZooKeeper, across processes) is in
tests/integration/test_epochstore.py."""

import sqlite3

import pytest

from logdevice.epochstore import (
    EpochMetadata,
    FileEpochStore,
    LogEpochState,
    open_epoch_store,
    parse_epoch_store_uri,
)
from logdevice.errors import InvalidParamError, TimedOutError

MD = {"nodeset": [0, 1, 2], "replication": {"node": 2}}


@pytest.mark.parametrize("kwargs", [
    {"epoch": 1, "last_clean_epoch": 2},
    {"epoch": 2**32},
    {"epoch": 1, "history": (EpochMetadata(3, (0,), {"node": 1}),)},
    {"epoch": 5, "history": (EpochMetadata(3, (0,), {"node": 1}),
                             EpochMetadata(2, (0,), {"node": 1}))},
    {"epoch": 5, "history": (EpochMetadata(0, (0,), {"node": 1}),)},
])
def test_invalid_states_cannot_be_built(kwargs):
    with pytest.raises(InvalidParamError):
        LogEpochState(1, **kwargs)


def test_decoded_metadata_is_shared_and_still_checked():
    """Logs with the same placement decode to one metadata object; a form that only
    compares equal to a known one (True for 1) is still checked, and refused."""
    a = EpochMetadata.from_dict({"first_epoch": 3, "nodeset": [2, 0, 1],
                                 "replication": {"node": 2}})
    b = EpochMetadata.from_dict({"first_epoch": 3, "nodeset": [2, 0, 1],
                                 "replication": {"node": 2}})
    assert a is b and a.nodeset == (0, 1, 2)
    assert EpochMetadata.from_dict({"first_epoch": 4, "nodeset": [2, 0, 1],
                                    "replication": {"node": 2}}) is not a
    assert EpochMetadata.from_dict({"first_epoch": 3, "nodeset": [2, 0, 1],
                                    "replication": {"node": 2},
                                    "sticky_copysets": True}).sticky_copysets
    EpochMetadata.from_dict({"first_epoch": 1, "nodeset": [1], "replication": {"node": 1}})
    for bad in ({"first_epoch": 1, "nodeset": [True], "replication": {"node": 1}},
                {"first_epoch": 1, "nodeset": [1], "replication": {"node": True}}):
        with pytest.raises(InvalidParamError):
            EpochMetadata.from_dict(bad)


def test_open_epoch_store_and_uris(tmp_path):
    with open_epoch_store("file:sub/epochs.sqlite", base_dir=tmp_path) as s:
        assert isinstance(s, FileEpochStore)
        assert s.path == tmp_path / "sub" / "epochs.sqlite" and s.path.exists()
        s.activate(1, MD)
    with open_epoch_store(f"file://{tmp_path}/sub/epochs.sqlite") as s:
        assert s.get(1).epoch == 1
    for bad in ("sqlite:/x", "file:", "zookeeper:zk1/root", "nothing"):
        with pytest.raises(InvalidParamError):
            open_epoch_store(bad)
    zk = parse_epoch_store_uri("zookeeper:a:1,b.example:2181")
    assert zk.hosts == (("a", 1), ("b.example", 2181)) and zk.root == "/logdevice"
    assert zk.uri == "zookeeper:a:1,b.example:2181/logdevice"


def test_busy_store_times_out(tmp_path):
    path = tmp_path / "e.sqlite"
    with FileEpochStore(path, timeout=0.3) as s:
        s.activate(1, MD)
        holder = sqlite3.connect(path, isolation_level=None)
        holder.execute("BEGIN IMMEDIATE")  # another writer holds the lock
        try:
            with pytest.raises(TimedOutError):
                s.activate(1)
            assert s.get(1).epoch == 1  # readers are not blocked (WAL)
        finally:
            holder.execute("ROLLBACK")
            holder.close()
        assert s.activate(1)[0] == 2


def test_status_history_folds_the_event_log_in_batches_like_all_at_once():
    from logdevice.epochstore import (
        SHARD_ACK_REBUILT,
        SHARD_IS_REBUILT,
        SHARD_NEEDS_REBUILD,
        StatusHistory,
    )

    events = [
        {"type": SHARD_NEEDS_REBUILD, "node": 1, "donors": [0, 2], "version": 1,
         "time_ms": 100},
        {"type": SHARD_NEEDS_REBUILD, "node": 3, "unrecoverable": True, "donors": [0, 2],
         "version": 2, "time_ms": 200},
        {"type": SHARD_IS_REBUILT, "node": 0, "donor": 0, "version": 3, "time_ms": 300},
        {"type": SHARD_IS_REBUILT, "node": 2, "donor": 2, "version": 4, "time_ms": 400},
        {"type": SHARD_ACK_REBUILT, "node": 1, "version": 5, "time_ms": 500},
    ]
    history = StatusHistory()
    for lo, hi in ((0, 2), (2, 3), (3, 5)):
        history.apply_all(events[lo:hi])
        assert history.version == hi
        assert history.statuses() == StatusHistory().apply_all(events[:hi]).statuses()
    statuses, since = history.statuses()
    assert 3 in statuses and since[3] == 200  # unrecoverable since its event


def test_a_log_states_body_decodes_to_the_same_histories_as_to_states():
    """A reader's placement decodes only each log's epoch and history from a node's
    ``log_states`` answer: the same as the full states have, and as strictly checked."""
    from logdevice.client.metadata import decode_log_histories, decode_log_states

    state = LogEpochState(7, epoch=4, last_clean_epoch=3, history=(
        EpochMetadata(1, (0, 1, 2), {"node": 2}), EpochMetadata(3, (1, 2, 3), {"node": 2})))
    body = [[7, state.to_dict()], [8, None]]
    histories, states = decode_log_histories(body), decode_log_states(body)
    assert histories[8] is None and states[8] is None
    assert histories[7] == (states[7].epoch, states[7].history) == (4, state.history)
    bad = state.to_dict()
    bad["history"][0]["nodeset"] = []
    with pytest.raises(InvalidParamError):
        decode_log_histories([[7, bad]])
