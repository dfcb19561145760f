"""Routing around a sequencer node the client cannot reach (``client.net.routing``): the
cluster's view decides where a log goes, the client's own suspicion turns a route into
a takeover (``NO_REDIRECT``), takeover routes stick, and nodes the view holds dead are
never routed or redirected to.  No sockets; the clock is explicit."""

from __future__ import annotations

import pytest

from logdevice.client.net.routing import Routing
from logdevice.config import make_local_config
from logdevice.placement import sequencer_for
from logdevice.protocol import ClusterView, SequencerNode
from tests.unit.test_client_unit import Clock

NODES = range(5)


@pytest.fixture
def config(tmp_path):
    return make_local_config(5, 3, range(1, 11), root=tmp_path, ports=range(4000, 4005))


def view(alive):
    return ClusterView(request_id=1, node_index=min(alive), alive=list(alive),
                       sequencers=[SequencerNode(i, 1.0) for i in alive])


def owner(log, alive=NODES):
    return sequencer_for(log, {i: 1.0 for i in alive}, alive)


def test_a_node_the_cluster_holds_alive_but_we_cannot_reach_is_taken_over(config):
    clock = Clock()
    r = Routing(config, suspect_time=1.0, clock=clock)
    r.update_view(view(NODES))
    first = owner(1)
    assert r.route(1) == (first, False)
    r.suspect(first)
    node, no_redirect = r.route(1)
    assert no_redirect and node == owner(1, [i for i in NODES if i != first])
    # The takeover sticks: the suspicion running out does not send the log back.
    clock.t += 5.0
    assert r.route(1) == (node, True)
    r.update_view(view(NODES))  # the same view again
    assert r.route(1) == (node, True)


def test_a_node_the_view_holds_dead_is_left_out_without_a_takeover(config):
    r = Routing(config, clock=Clock())
    first = owner(2)
    alive = [i for i in NODES if i != first]
    r.update_view(view(alive))
    assert r.route(2) == (owner(2, alive), False)
    for log in range(1, 11):
        assert r.route(log)[0] != first


def test_a_takeover_becomes_a_plain_route_when_the_view_agrees(config):
    r = Routing(config, clock=Clock())
    r.update_view(view(NODES))
    first = owner(3)
    r.suspect(first)
    taker, no_redirect = r.route(3)
    assert no_redirect
    r.update_view(view([i for i in NODES if i != first]))  # the cluster agrees: dead
    assert r.route(3) == (taker, False)


def test_a_takeover_route_to_a_node_that_died_is_dropped(config):
    r = Routing(config, clock=Clock())
    r.update_view(view(NODES))
    first = owner(4)
    r.suspect(first)
    taker, _ = r.route(4)
    alive = [i for i in NODES if i != taker]
    r.update_view(view(alive))
    node, _ = r.route(4)
    assert node != taker and node in alive


def test_redirects_to_suspects_and_to_dead_nodes(config):
    clock = Clock()
    r = Routing(config, suspect_time=1.0, clock=clock)
    alive = [0, 1, 2, 3]
    r.update_view(view(alive))
    # A redirect to a node the view holds dead is not followed.
    assert not r.redirect(5, 4, source=0)
    assert r.route(5)[0] != 4
    # A redirect to a node we could not reach: the redirecting node is asked to serve.
    r.suspect(2)
    assert r.redirect(5, 2, source=1)
    assert r.route(5) == (1, True)
    # An ordinary redirect clears the flag.
    assert r.redirect(5, 3, source=1)
    assert r.route(5) == (3, False)
    r.take_over(5, 0)
    assert r.route(5) == (0, True)
    r.forget(5)  # back to the view: a takeover only if the view's choice is the suspect
    assert r.route(5) == (owner(5, [0, 1, 3]), owner(5, alive) == 2)


def test_view_age(config):
    clock = Clock()
    r = Routing(config, clock=clock)
    assert r.view_age() == float("inf")
    r.update_view(view(NODES))
    clock.t += 2.5
    assert r.view_age() == 2.5
