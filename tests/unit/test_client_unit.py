"""Client pure parts: routing (view, suspects, redirects), combining per-node answers,
settings, backoff.  No sockets."""

from __future__ import annotations

import pytest

from logdevice.backoff import ExponentialBackoff
from logdevice.client.combine import (
    HeadAttributes,
    combine_data_size,
    combine_find_time,
    combine_head,
    combine_trim,
    f_majority,
    storage_nodeset,
)
from logdevice.client.net.retry import JITTER, WRITER_RETRYABLE
from logdevice.client.net.routing import Routing
from logdevice.client.settings import ClientSettings
from logdevice.config import make_local_config
from logdevice.errors import (
    AccessError,
    E,
    InvalidParamError,
    LogDeviceError,
    TimedOutError,
)
from logdevice.placement import sequencer_for
from logdevice.protocol import ClusterView, DataSizeReply, FindTimeReply, Head, SequencerNode
from logdevice.records import LSN_MAX, LSN_OLDEST
from logdevice.shards import AuthoritativeStatus as AS


class Clock:
    t = 0.0

    def __call__(self) -> float:
        return self.t


@pytest.fixture
def config(tmp_path):
    return make_local_config(5, 2, range(1, 11), root=tmp_path, ports=range(4000, 4005))


def view(alive, weights=None, node=0):
    weights = weights or {i: 1.0 for i in alive}
    return ClusterView(request_id=1, node_index=node, alive=list(alive),
                       sequencers=[SequencerNode(i, w) for i, w in weights.items()])


# ---------------------------------------------------------------------- routing


def test_routing_matches_placement_and_follows_the_view(config):
    r = Routing(config, clock=Clock())
    weights = config.sequencer_weights()
    for log in range(1, 11):
        assert r.sequencer(log) == sequencer_for(log, weights, range(5))
    owner = r.sequencer(3)
    alive = [i for i in range(5) if i != owner]
    r.update_view(view(alive))
    assert r.sequencer(3) == sequencer_for(3, {i: 1.0 for i in alive}, alive)


def test_routing_suspects_expire_and_redirects_stick(config):
    clock = Clock()
    r = Routing(config, suspect_time=1.0, clock=clock)
    owner = r.sequencer(1)
    r.suspect(owner)
    second = r.sequencer(1)
    assert second != owner
    clock.t += 1.5
    r.forget(1)
    assert r.sequencer(1) == owner
    r.redirect(1, 4)
    assert r.sequencer(1) == 4
    r.redirect(1, 99)  # not in the config: ignored
    assert r.sequencer(1) == 4
    r.update_view(view([0, 1, 2]))  # a different view clears the cache
    assert r.sequencer(1) in (0, 1, 2)


def test_routing_view_due_and_sources(config):
    clock = Clock()
    r = Routing(config, view_refresh_interval=0.1, clock=clock)
    assert r.view_due()
    r.update_view(view([1, 2, 3]))
    assert not r.view_due()
    clock.t += 0.2
    assert r.view_due()
    r.suspect(2)
    assert r.view_sources() == [1, 3, 0, 2, 4]
    # Requests sent together start at different healthy nodes; the rest stay last.
    assert [r.view_sources(k) for k in (1, 2, 3)] == [[3, 1, 0, 2, 4], [1, 3, 0, 2, 4],
                                                      [3, 1, 0, 2, 4]]
    assert r.storage_nodes(1) == [0, 1, 2, 3, 4]


def test_routing_everyone_suspected_still_routes(config):
    r = Routing(config, clock=Clock())
    for i in range(5):
        r.suspect(i)
    assert r.sequencer(2) is not None


# ---------------------------------------------------------------------- combine

THREE = storage_nodeset(range(3), 2)  # three nodes, R=2, all fully authoritative


def ft(lo, hi, status=E.OK):
    return FindTimeReply(request_id=1, status=status, log_id=1, lo=lo, hi=hi)


def test_f_majority():
    assert f_majority(5, 2) == 4
    assert f_majority(3, 3) == 1
    assert f_majority(1, 2) == 1


def test_find_time_rule():
    # records at lsn 10 (t=100) on N0,N1; lsn 11 (t=200) on N1,N2; lsn 12 (t=300) on N0,N2
    answers = {0: ft(10, 12), 1: ft(10, 11), 2: ft(0, 11)}
    assert combine_find_time(answers, THREE) == 11
    # all records older than the target: one past the last one
    assert combine_find_time({0: ft(12, LSN_MAX), 1: ft(11, LSN_MAX)}, THREE) == 13
    # empty log
    assert combine_find_time({0: ft(0, LSN_MAX), 1: ft(0, LSN_MAX)}, THREE) == LSN_OLDEST


def test_combine_needs_an_f_majority():
    with pytest.raises(LogDeviceError) as ei:
        combine_find_time({0: ft(1, 2), 1: TimedOutError(message="x"),
                           2: TimedOutError(message="y")}, THREE)
    assert ei.value.status == E.PARTIAL
    with pytest.raises(TimedOutError):
        combine_find_time({0: TimedOutError(), 1: TimedOutError(), 2: ft(0, 0, E.FAILED)},
                          THREE)



def test_a_refusal_by_every_node_says_why():
    refused = {i: AccessError(message=f"N{i}: <anonymous> may not read log 1")
               for i in range(3)}
    with pytest.raises(AccessError, match=r"\(N0: ACCESS, N1: ACCESS, N2: ACCESS\): "
                                          r"N0: <anonymous> may not read log 1$"):
        combine_head(refused, THREE)


def test_head_trim_and_data_size_rules():
    def head(tp, ts):
        return Head(request_id=1, status=E.OK, log_id=1, trim_point=tp, timestamp=ts)

    answers = {0: head(10, 500), 1: head(10, 400), 2: head(5, 100)}
    assert combine_head(answers, THREE) == HeadAttributes(10, 400)
    assert combine_trim(answers, THREE) == 10

    def size(n):
        return DataSizeReply(request_id=1, status=E.OK, log_id=1, size=n)

    assert combine_data_size({0: size(100), 1: size(100), 2: size(200)}, THREE) == 200
    assert combine_data_size({0: size(100), 1: size(100), 2: TimedOutError()}, THREE) == 150


def test_combine_counts_an_f_majority_as_the_read_path_does():
    def head(tp):
        return Head(request_id=1, status=E.OK, log_id=1, trim_point=tp, timestamp=0)

    # Two racks, copies in both: one rack answering in full covers every record, two
    # nodes of different racks do not (by count, 4 - 2 + 1 = 3 would be needed).
    racks = {0: "r.d.c.row.a", 1: "r.d.c.row.a", 2: "r.d.c.row.b", 3: "r.d.c.row.b"}
    nodes = storage_nodeset(range(4), {"rack": 2, "node": 2}, racks)
    assert combine_trim({0: head(5), 1: head(7), 2: TimedOutError(),
                         3: TimedOutError()}, nodes) == 7
    with pytest.raises(LogDeviceError) as ei:
        combine_trim({0: head(5), 2: head(7), 1: TimedOutError(), 3: TimedOutError()},
                     nodes)
    assert ei.value.status == E.PARTIAL
    # A node being rebuilt lost data: its answer does not count.
    rebuilding = storage_nodeset(range(3), 2, statuses={1: AS.UNDERREPLICATION})
    with pytest.raises(LogDeviceError) as ei:
        combine_head({0: head(5), 1: head(9), 2: TimedOutError()}, rebuilding)
    assert ei.value.status == E.PARTIAL
    assert combine_head({0: head(5), 1: head(9), 2: head(6)}, rebuilding).trim_point == 9
    # An authoritative-empty node is out of the nodeset: one of the other two suffices.
    emptied = storage_nodeset(range(3), 2, statuses={2: AS.AUTHORITATIVE_EMPTY})
    assert combine_trim({0: head(4), 1: TimedOutError(), 2: TimedOutError()}, emptied) == 4
    # Too many lost data for any f-majority: every node that counts answered, nobody
    # can say more (non-authoritative), so the answer stands.
    lost = storage_nodeset(range(3), 2, statuses={1: AS.UNDERREPLICATION,
                                                  2: AS.UNDERREPLICATION})
    assert combine_trim({0: head(3), 1: TimedOutError(), 2: TimedOutError()}, lost) == 3
    # data_size scales by the nodes that remain in the nodeset.
    def size(n):
        return DataSizeReply(request_id=1, status=E.OK, log_id=1, size=n)

    assert combine_data_size({0: size(100), 1: size(100), 2: size(0)}, emptied) == 100


# ---------------------------------------------------------------------- settings, backoff


def test_settings_from_config_and_overrides(config):
    s = ClientSettings.from_config(config, {"max_backoff": 2, "append_checksum": False})
    assert s.connect_timeout == config.settings.connect_timeout_ms / 1000
    assert s.max_payload_size == config.settings.max_payload_size
    assert s.max_backoff == 2.0 and s.append_checksum is False
    with pytest.raises(InvalidParamError, match="unknown client setting"):
        ClientSettings.from_config(config, {"conect_timeout": 1})
    with pytest.raises(InvalidParamError):
        ClientSettings.from_config(config, {"max_backoff": -1})


def test_backoff_doubles_with_jitter_and_caps():
    b = ExponentialBackoff(0.01, 0.05, jitter=JITTER, rng=lambda: 1.0)
    assert [round(b.next_delay(), 4) for _ in range(5)] == [0.01, 0.02, 0.04, 0.05, 0.05]
    low = ExponentialBackoff(0.1, 0.1, jitter=JITTER, rng=lambda: 0.0)
    assert low.next_delay() == pytest.approx(0.05)
    assert {E.SEQNOBUFS, E.NOSEQUENCER, E.TIMEDOUT} <= WRITER_RETRYABLE
    assert E.NOTFOUND not in WRITER_RETRYABLE and E.TOOBIG not in WRITER_RETRYABLE
