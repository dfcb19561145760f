"""The keepalive of a client connection (``client.net.keepalive``): when a silent node is
probed and when it is given up, driven by an explicit clock."""

from __future__ import annotations

import pytest

from logdevice.client.net.keepalive import Keepalive, Verdict

DEAD = 1.5


def ticks(ka: Keepalive, start: float, end: float, busy: bool = True) -> list[tuple[float,
                                                                                     Verdict]]:
    """``check`` every ``ka.tick`` from ``start`` to ``end``; the verdicts other than WAIT."""
    out = []
    t = start
    while t <= end + 1e-9:
        v = ka.check(t, busy)
        if v is not Verdict.WAIT:
            out.append((round(t, 6), v))
        if v is Verdict.GONE:
            break
        t += ka.tick
    return out


def test_a_silent_node_is_probed_then_given_up_at_the_dead_timeout():
    ka = Keepalive(DEAD)
    assert ka.probe_after == pytest.approx(DEAD / 3)
    assert ka.tick <= DEAD / 6
    ka.start(10.0)
    seen = ticks(ka, 10.0 + ka.tick, 20.0)
    probes = [t for t, v in seen if v is Verdict.PROBE]
    gone = [t for t, v in seen if v is Verdict.GONE]
    assert probes and probes[0] == pytest.approx(10.0 + DEAD / 3)
    assert len(probes) == 2  # again after another probe_after of silence, then given up
    assert gone == [pytest.approx(10.0 + DEAD)]


def test_anything_heard_restarts_the_silence():
    ka = Keepalive(DEAD)
    ka.start(0.0)
    t = 0.0
    for _ in range(40):  # ten seconds of a node that answers every quarter second
        t += 0.25
        assert ka.check(t, True) is Verdict.WAIT
        ka.heard(t)
    # Then silence: given up a dead timeout after the last word, not before.
    assert ticks(ka, t + ka.tick, t + 10.0)[-1] == (pytest.approx(t + DEAD), Verdict.GONE)


def test_an_idle_connection_is_never_judged_and_its_old_silence_does_not_count():
    ka = Keepalive(DEAD)
    ka.heard(0.0)
    assert ka.check(100.0, False) is Verdict.WAIT  # nothing outstanding
    ka.start(100.0)  # the first request after a long idle spell
    assert ticks(ka, 100.0 + ka.tick, 110.0)[-1] == (pytest.approx(100.0 + DEAD),
                                                      Verdict.GONE)


def test_a_probe_answered_keeps_a_slow_request_alive():
    ka = Keepalive(DEAD)
    ka.start(0.0)
    t, probes = 0.0, 0
    while t < 10.0:  # a request that takes ten seconds; each probe is answered
        t += ka.tick
        v = ka.check(t, True)
        assert v is not Verdict.GONE
        if v is Verdict.PROBE:
            probes += 1
            ka.heard(t + 0.01)
    assert probes >= 10.0 / DEAD


def test_a_stall_of_the_client_itself_proves_nothing():
    ka = Keepalive(DEAD)
    ka.start(0.0)
    assert ka.check(ka.tick, True) is Verdict.WAIT
    # The client's loop did not run for five seconds: no verdict on what it missed.
    assert ka.check(5.0, True) is Verdict.WAIT
    assert ticks(ka, 5.0 + ka.tick, 5.0 + DEAD - ka.tick) == \
        [(pytest.approx(5.0 + DEAD / 3, abs=ka.tick), Verdict.PROBE),
         (pytest.approx(5.0 + 2 * DEAD / 3, abs=ka.tick), Verdict.PROBE)]
    assert ticks(ka, 5.0 + DEAD, 5.0 + DEAD)[-1][1] is Verdict.GONE


@pytest.mark.parametrize("dead, probe", [(0, None), (-1, None), (1.0, 2.0), (1.0, 0.0)])
def test_bad_parameters(dead, probe):
    with pytest.raises(ValueError):
        Keepalive(dead, probe)
