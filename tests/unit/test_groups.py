"""Consumer group settling (sans-I/O): who owns which log as members come and go."""

from __future__ import annotations

import pytest

from logdevice.epochstore import FileEpochStore
from logdevice.epochstore.groups import group_key, heartbeat, settle, wanted_owners
from logdevice.errors import InvalidParamError

LOGS = list(range(1, 9))
SESSION = 1000


def owners(state):
    return {int(k): v for k, v in state["owners"].items()}


def test_members_split_the_logs_and_never_share_one():
    st: dict = {"group": "g"}
    st, a = settle(st, "a", LOGS, 0, SESSION)
    assert a == LOGS  # alone: everything
    st, b = settle(st, "b", LOGS, 10, SESSION)
    assert b == []  # b's logs are still a's until a lets them go
    st, a = settle(st, "a", LOGS, 20, SESSION)
    want = wanted_owners(LOGS, ["a", "b"])
    assert a == [log for log in LOGS if want[log] == "a"]
    assert 0 < len(a) < len(LOGS)
    assert not set(owners(st).values()) - {"a"}  # released logs are nobody's for now
    st, b = settle(st, "b", LOGS, 30, SESSION)
    assert sorted(a + b) == LOGS and not set(a) & set(b)


def test_leave_and_expiry_hand_logs_over():
    st: dict = {"group": "g"}
    for m, t in (("a", 0), ("b", 1), ("a", 2), ("b", 3)):
        st, _ = settle(st, m, LOGS, t, SESSION)
    st, b = settle(st, "b", LOGS, 4, SESSION, leave=True)
    assert b == [] and "b" not in st["members"]
    st, a = settle(st, "a", LOGS, 5, SESSION)
    assert a == LOGS
    st, c = settle(st, "c", LOGS, 6, SESSION)
    st, a = settle(st, "a", LOGS, 7, SESSION)
    st, c = settle(st, "c", LOGS, 8, SESSION)
    assert c and sorted(a + c) == LOGS
    # a goes silent: once its session is over, c gets everything.
    st, c = settle(st, "c", LOGS, 7 + SESSION - 1, SESSION)
    assert sorted(a + c) == LOGS  # a's session still runs
    st, c = settle(st, "c", LOGS, 7 + SESSION + 1, SESSION)
    assert c == LOGS and "a" not in st["members"]


def test_generation_moves_with_changes_only():
    st: dict = {"group": "g"}
    st, _ = settle(st, "a", LOGS, 0, SESSION)
    g = st["generation"]
    st, _ = settle(st, "a", LOGS, 1, SESSION)
    assert st["generation"] == g


def test_logs_must_agree():
    st, _ = settle({"group": "g"}, "a", [1, 2], 0, SESSION)
    with pytest.raises(InvalidParamError, match="reads logs"):
        settle(st, "b", [1, 2, 3], 1, SESSION)


def test_heartbeat_in_the_store(tmp_path):
    with FileEpochStore(tmp_path / "e.sqlite") as store:
        gen1, a = heartbeat(store, "g", "a", LOGS, 0, SESSION)
        assert a == LOGS
        gen2, b = heartbeat(store, "g", "b", LOGS, 1, SESSION)
        assert b == [] and gen2 >= gen1
        _, a = heartbeat(store, "g", "a", LOGS, 2, SESSION)
        _, b = heartbeat(store, "g", "b", LOGS, 3, SESSION)
        assert sorted(a + b) == LOGS and a and b
        assert group_key("g") != group_key("h")
