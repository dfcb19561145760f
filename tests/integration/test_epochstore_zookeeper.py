"""The ZooKeeper epoch store across ZooKeeper outages (a real server, stopped and restarted):
operations wait with a log line saying what for, finish once ZooKeeper is back, and give up
with TIMEDOUT after the store's timeout; nothing is lost across a restart."""

import logging
import threading
import time

import pytest
from kazoo.exceptions import ConnectionLoss

from logdevice.epochstore import SHARD_NEEDS_REBUILD, open_epoch_store, parse_epoch_store_uri
from logdevice.epochstore.zookeeper import ZooKeeperEpochStore
from logdevice.errors import E, TimedOutError
from tests.waiting import wait_until

MD = {"nodeset": [0, 1, 2], "replication": {"node": 2}}
WAIT = 60


def test_state_survives_a_zookeeper_restart(zookeeper_factory):
    zk = zookeeper_factory()
    with open_epoch_store(zk.uri("/c"), timeout=30) as s:
        s.activate(1, MD)
        s.append_event({"type": SHARD_NEEDS_REBUILD, "node": 2})
        zk.stop()
        zk.start()
        assert s.get(1).epoch == 1 and s.activate(1)[0] == 2
        assert [e["version"] for e in s.events()] == [1]
    zk.kill()  # no clean shutdown this time
    zk.start()
    with open_epoch_store(zk.uri("/c")) as s:
        assert s.get(1).epoch == 2 and s.get(1).version == 2
        assert s.append_event({"type": SHARD_NEEDS_REBUILD, "node": 1}) == 2


def test_activation_waits_for_zookeeper_and_says_so(zookeeper_factory, caplog):
    zk = zookeeper_factory()
    caplog.set_level(logging.INFO, logger="logdevice.epochstore")
    with open_epoch_store(zk.uri("/c"), timeout=WAIT) as s:
        s.activate(1, MD)
        zk.stop()
        result: list = []
        t = threading.Thread(target=lambda: result.append(s.activate(1)[0]))
        t.start()
        def said_so() -> bool:
            if "waiting to activate a new epoch of log 1" in caplog.text:
                return True
            assert t.is_alive()
            return False

        wait_until(said_so, WAIT, message="the activation did not say it waits")
        zk.start()
        t.join(WAIT)
        assert not t.is_alive() and result == [2]
        assert "ZooKeeper is back; activate a new epoch of log 1" in caplog.text


def test_operations_give_up_after_the_timeout(zookeeper_factory):
    zk = zookeeper_factory()
    with open_epoch_store(zk.uri("/c"), timeout=1.0) as s:
        s.activate(1, MD)
        zk.stop()
        for op in (lambda: s.activate(1), lambda: s.get(1), s.events, s.logs):
            t0 = time.monotonic()
            with pytest.raises(TimedOutError) as ei:
                op()
            assert ei.value.status == E.TIMEDOUT and "unreachable" in str(ei.value)
            assert time.monotonic() - t0 < 5
        zk.start()
        s.timeout = 30.0
        assert s.activate(1)[0] == 2


def test_an_outage_costs_one_timeout_not_one_per_operation(zookeeper_factory):
    """Operations one after another during an outage all end within the store's timeout
    of the outage, and once it is spent each fails at once (a node answering its
    clients' metadata requests one by one would otherwise make the last wait for every
    timeout before it); with ZooKeeper back they work again."""
    zk = zookeeper_factory()
    with open_epoch_store(zk.uri("/c"), timeout=3.0) as s:
        s.activate(1, MD)
        zk.stop()
        down = time.monotonic()
        for op in (lambda: s.get(1), s.events, s.logs, lambda: s.activate(1)):
            with pytest.raises(TimedOutError, match="unreachable"):
                op()
        assert time.monotonic() - down < 3.0 + 2.0  # not 4 x 3 s
        t0 = time.monotonic()
        with pytest.raises(TimedOutError, match="the store waits 3 s"):
            s.get(1)
        assert time.monotonic() - t0 < 1.0
        zk.start()
        wait_until(lambda: _works(lambda: s.activate(1)), WAIT,
                   message="the store did not come back with ZooKeeper")
        assert s.get(1).epoch == 2


def _works(op) -> bool:
    """``op()`` succeeded (False: it timed out on an unreachable ZooKeeper)."""
    try:
        op()
    except TimedOutError:
        return False
    return True


def test_opening_while_zookeeper_is_down(zookeeper_factory):
    zk = zookeeper_factory()
    zk.stop()
    s = open_epoch_store(zk.uri("/c"), timeout=0.5)  # opening does not wait
    try:
        with pytest.raises(TimedOutError):
            s.logs()
        zk.start()
        s.timeout = 30.0
        assert s.activate(3, MD)[0] == 1
    finally:
        s.close()
    assert s.closed


def test_a_lost_session_is_replaced(zk_server, zk_uri, caplog):
    """ZooKeeper expires the store's session (here: another client takes it over and
    closes it); the store gets a new session and goes on, epochs intact."""
    from kazoo.client import KazooClient

    with open_epoch_store(zk_uri, timeout=WAIT) as s:
        s.activate(1, MD)
        old = s.session
        thief = KazooClient(hosts=zk_server.address, client_id=old)
        thief.start(30)
        thief.stop()  # closes the session: the server expires it for the store
        thief.close()
        epochs = []

        def session_replaced() -> bool:
            epochs.append(s.activate(1)[0])  # works before, during and after the change
            return s.session is not None and s.session[0] != old[0]

        wait_until(session_replaced, WAIT, message="the store kept the dead session")
        epochs.append(s.activate(1)[0])
        assert epochs == list(range(2, 2 + len(epochs)))


class _LosesCommitAnswers(ZooKeeperEpochStore):
    """The real store, except that the answer of its next ``lose`` multi-op commits is
    lost after the commit landed (as when the connection drops right then)."""

    lose = 0

    def _wait(self, async_result, deadline=None):
        out = super()._wait(async_result, deadline)
        if getattr(async_result, "is_commit", False) and self.lose:
            self.lose -= 1
            raise ConnectionLoss()
        return out

    def start_losing(self, n):
        self.lose = n
        zk, transaction = self._zk, self._zk.transaction

        def tagged():
            tx = transaction()
            commit = tx.commit_async

            def commit_async():
                result = commit()
                result.is_commit = True
                return result
            tx.commit_async = commit_async
            return tx
        zk.transaction = tagged


def test_a_batch_whose_answer_was_lost_is_not_applied_twice(zk_uri):
    with _LosesCommitAnswers(parse_epoch_store_uri(zk_uri), timeout=30) as s:
        s.activate_many([(1, MD), (2, MD)])
        s.start_losing(1)
        results = s.activate_many([(1, None), (2, None), (3, MD)])
        assert s.lose == 0  # the answer was lost, and the batch was read back
        assert [e for e, _ in results] == [2, 2, 1]  # the landed epochs, not bumped again
        assert [s.get(n).epoch for n in (1, 2, 3)] == [2, 2, 1]
        assert [s.get(n).version for n in (1, 2, 3)] == [2, 2, 1]
