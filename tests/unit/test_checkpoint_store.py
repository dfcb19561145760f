"""Checkpoints in the epoch store: per name, atomic, apart from every log's state."""

from __future__ import annotations

from dataclasses import replace

import pytest

from logdevice.epochstore import FileEpochStore
from logdevice.epochstore.checkpoints import (
    checkpoint_key,
    is_checkpoint_key,
    load_checkpoints,
    store_checkpoints,
)
from logdevice.errors import InvalidParamError, LogDeviceError


def test_store_merge_and_reload(tmp_path):
    path = tmp_path / "epochs.sqlite"
    with FileEpochStore(path) as store:
        assert load_checkpoints(store, "billing") == {}
        assert store_checkpoints(store, "billing", {1: (10, 3), 2: (20, 0)}) == {
            1: (10, 3), 2: (20, 0)}
        assert store_checkpoints(store, "billing", {1: (5, 0xFFFFFFFF)}) == {
            1: (5, 0xFFFFFFFF), 2: (20, 0)}  # explicit positions may go back (rewind)
        assert load_checkpoints(store, "audit") == {}
    with FileEpochStore(path) as store:  # durable
        assert load_checkpoints(store, "billing") == {1: (5, 0xFFFFFFFF), 2: (20, 0)}


def test_keys_are_outside_every_log_id():
    for name in ("a", "billing", "x" * 255):
        key = checkpoint_key(name)
        assert is_checkpoint_key(key) and 2**62 + 2**61 <= key < 2**63
    assert not is_checkpoint_key(2**62 - 1)
    assert checkpoint_key("a") != checkpoint_key("b")


def test_bad_input_and_a_key_collision(tmp_path):
    with FileEpochStore(tmp_path / "e.sqlite") as store:
        for bad in ("", "x" * 256, None, 5):
            with pytest.raises(InvalidParamError):
                store_checkpoints(store, bad, {1: (1, 0)})  # type: ignore[arg-type]
        with pytest.raises(InvalidParamError):
            store_checkpoints(store, "n", {1: (-1, 0)})
        store_checkpoints(store, "n", {1: (1, 0)})
        # Another name on the same key (a hash collision) is refused, not merged.
        key = checkpoint_key("n")
        store.update(key, lambda cur: replace(cur, extra={**cur.extra,
                                                          "checkpoint_name": "m"}))
        with pytest.raises(LogDeviceError, match="share a key"):
            load_checkpoints(store, "n")


def test_a_consumer_name_belongs_to_the_principal_that_made_it(tmp_path):
    from logdevice.epochstore.groups import heartbeat
    from logdevice.errors import E, LogDeviceError

    with FileEpochStore(tmp_path / "e.sqlite") as store:
        assert store_checkpoints(store, "c", {1: (5, 0)}, owner="alice") == {1: (5, 0)}
        for attempt in (lambda: store_checkpoints(store, "c", {1: (9, 0)}, owner="mallory"),
                        lambda: load_checkpoints(store, "c", owner="mallory")):
            with pytest.raises(LogDeviceError, match="another principal") as ei:
                attempt()
            assert ei.value.status == E.ACCESS
        assert load_checkpoints(store, "c", owner="alice") == {1: (5, 0)}
        assert store_checkpoints(store, "c", {2: (7, 1)}, owner="alice") == {
            1: (5, 0), 2: (7, 1)}
        assert load_checkpoints(store, "c") == {1: (5, 0), 2: (7, 1)}  # a node: unchecked
        assert heartbeat(store, "g", "m1", [1, 2], 1000, 10_000, owner="alice")[1] == [1, 2]
        with pytest.raises(LogDeviceError) as ei:
            heartbeat(store, "g", "m2", [1, 2], 1000, 10_000, owner="mallory")
        assert ei.value.status == E.ACCESS
        gen, mine = heartbeat(store, "g", "m1", [1, 2], 2000, 10_000, owner="alice")
        assert mine == [1, 2]
