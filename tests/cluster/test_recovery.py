"""Epoch recovery on a real cluster: a sequencer dies with appends half stored; the new
sequencer recovers the old epoch before releasing its own, and every reader sees the same
log.
"""

from __future__ import annotations

import contextlib
import time

import pytest

from ldcore import lsn as ldlsn
from logdevice.errors import LogDeviceError
from logdevice.placement import sequencer_for
from logdevice.protocol.flags import FLAG_BRIDGE, FLAG_WRITTEN_BY_RECOVERY
from logdevice.records import DataRecord, GapRecord, GapType
from tests.cluster.conftest import check_acked_on_disk, read_back

pytestmark = pytest.mark.cluster

LOG = 1
ESN_MAX = ldlsn.ESN_MAX


def read_all(reader, target: int, timeout: float = 30.0) -> list:
    """Items of the reader up to and including LSN ``target`` (bounded wait)."""
    items: list = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        items += reader.read(200, timeout=0.5)
        if items and isinstance(items[-1], DataRecord) and items[-1].lsn >= target:
            return items
        if items and isinstance(items[-1], GapRecord) and items[-1].hi >= target:
            return items
    raise AssertionError(f"reader did not reach {ldlsn.to_string(target)}: "
                         f"{[summary(i) for i in items[-5:]]}")


def same_items(a: list, b: list) -> None:
    """Assert two readers delivered the same sequence; show where they part if not."""
    sa, sb = [summary(i) for i in a], [summary(i) for i in b]
    if sa != sb:
        pairs = enumerate(zip(sa, sb, strict=False))
        k = next((i for i, (x, y) in pairs if x != y), min(len(sa), len(sb)))
        raise AssertionError(f"readers differ at item {k} (of {len(sa)} / {len(sb)}): "
                             f"{sa[max(0, k - 3):k + 4]} vs {sb[max(0, k - 3):k + 4]}")


def summary(item) -> tuple:
    if isinstance(item, DataRecord):
        return ("R", ldlsn.to_string(item.lsn), bytes(item.payload))
    return (GapType(item.type).name, ldlsn.to_string(item.lo), ldlsn.to_string(item.hi))


def test_failover_recovers_the_old_epoch(local_cluster):
    cluster = local_cluster(nodes=5, replication=2, logs=[LOG])
    victim = sequencer_for(LOG, cluster.config.sequencer_weights())
    peers = [i for i in range(5) if i != victim]
    paused = peers[:2]
    client = cluster.client(timeout=20.0)
    acked: dict[int, bytes] = {}
    for i in range(20):
        payload = b"before %d" % i
        acked[client.append(LOG, payload)] = payload
    first_epoch = ldlsn.epoch_of(max(acked))

    # Two storage peers stop answering: appends whose copyset names one of them stay
    # half stored (a copy on a live node, the other STORE stuck in the paused node's
    # socket) until the sequencer dies with them.
    for i in paused:
        cluster.pause(i)
    futures = [(b"in flight %d" % i, client.append_async(LOG, b"in flight %d" % i))
               for i in range(30)]
    time.sleep(0.05)  # below the first store timeout: no second wave yet
    cluster.kill(victim)
    for i in paused:
        cluster.resume(i)
    for payload, fut in futures:
        # Failed ones went to the dead sequencer: they may or may not be stored.
        with contextlib.suppress(LogDeviceError):
            acked[fut.result(30)] = payload

    # A reader that starts before the new sequencer exists (tails the log).
    early = client.create_reader()
    early.start_reading(LOG)

    for i in range(20):
        payload = b"after %d" % i
        acked[client.append(LOG, payload)] = payload
    target = max(acked)
    assert ldlsn.epoch_of(target) > first_epoch

    late_client = cluster.client(timeout=20.0)
    late = late_client.create_reader()
    late.start_reading(LOG, until_lsn=target)
    items_early = read_all(early, target)
    items_late = read_all(late, target)
    # Invariant 2: the same records and gaps, in the same order.
    same_items(items_early, items_late)
    delivered = {i.lsn: bytes(i.payload) for i in items_late if isinstance(i, DataRecord)}
    for lsn, payload in acked.items():
        assert delivered.get(lsn) == payload, f"acked {ldlsn.to_string(lsn)} not delivered"
    gaps = [i for i in items_late if isinstance(i, GapRecord)]
    assert not [g for g in gaps if g.type == GapType.DATALOSS], [summary(g) for g in gaps]
    assert items_late[0].type == GapType.BRIDGE  # LSN 1 up to the first epoch
    # The old epoch ends with a BRIDGE gap from its bridge record to the epoch's end.
    bridges = [g for g in gaps if g.type == GapType.BRIDGE
               and ldlsn.epoch_of(g.lo) == first_epoch]
    assert len(bridges) == 1 and ldlsn.esn_of(bridges[0].hi) == ESN_MAX
    bridge_lsn = bridges[0].lo
    for i in items_late:  # everything of the old epoch comes before its bridge
        lsn = i.lsn if isinstance(i, DataRecord) else i.hi
        if ldlsn.epoch_of(lsn) == first_epoch and i is not bridges[0]:
            assert lsn < bridge_lsn
    holes = [g for g in gaps if g.type == GapType.HOLE]
    print(f"{len(acked)} acked, {len(delivered)} delivered, {len(holes)} hole plugs, "
          f"bridge at {ldlsn.to_string(bridge_lsn)}")
    late_client.close()
    client.close()

    # On disk: the bridge record, written by recovery on a full copyset; every acked
    # record on R nodes.
    cluster.stop_all()
    stored = read_back(cluster, [LOG])
    copies = stored[(LOG, bridge_lsn)]
    assert len(copies) >= 2
    assert all(c.flags & FLAG_BRIDGE and c.flags & FLAG_WRITTEN_BY_RECOVERY for c in copies)
    check_acked_on_disk(cluster, {(LOG, lsn): p for lsn, p in acked.items()}, 2)


def test_recovery_without_a_paused_node(local_cluster):
    """A storage node stays stopped through the failover: recovery goes on with an
    f-majority (R=3 of 5 nodes: 3) and the node, resumed afterwards, holds nothing
    that contradicts what readers were given."""
    cluster = local_cluster(nodes=5, replication=3, logs=[LOG])
    victim = sequencer_for(LOG, cluster.config.sequencer_weights())
    silent = next(i for i in range(5) if i != victim)
    client = cluster.client(timeout=20.0)
    acked: dict[int, bytes] = {}
    for i in range(10):
        acked[client.append(LOG, b"before %d" % i)] = b"before %d" % i
    cluster.pause(silent)
    futures = [(b"in flight %d" % i, client.append_async(LOG, b"in flight %d" % i))
               for i in range(20)]
    time.sleep(0.05)  # below the first store timeout: no second wave yet
    cluster.kill(victim)
    for payload, fut in futures:
        with contextlib.suppress(LogDeviceError):
            acked[fut.result(30)] = payload
    for i in range(10):  # the new sequencer recovers without the silent node
        acked[client.append(LOG, b"after %d" % i)] = b"after %d" % i
    target = max(acked)
    first = client.create_reader()
    # A stopped node stalls single copy delivery until its timeouts: read all-send-all.
    first.force_no_single_copy_delivery()
    first.start_reading(LOG, until_lsn=target)
    items_first = read_all(first, target)
    cluster.resume(silent)
    cluster.wait_alive([i for i in range(5) if i != victim], timeout=15.0)
    second = cluster.client(timeout=20.0).create_reader()
    second.force_no_single_copy_delivery()  # every copy on the resumed node is sent
    second.start_reading(LOG, until_lsn=target)
    items_second = read_all(second, target)
    same_items(items_first, items_second)
    delivered = {i.lsn: bytes(i.payload) for i in items_second if isinstance(i, DataRecord)}
    assert all(delivered.get(lsn) == p for lsn, p in acked.items())
    assert not [i for i in items_second
                if isinstance(i, GapRecord) and i.type == GapType.DATALOSS]
    client.close()
