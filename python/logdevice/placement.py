"""Which node runs the sequencer of a log: weighted rendezvous hashing.

Every node and client computes the same answer from the same inputs (the sequencer nodes,
their weights and who is alive), so no coordination is needed to agree on an owner, and
when a node dies only the logs it owned move (each to its own next-highest scorer).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping

import numpy as np

_MASK = (1 << 64) - 1
# splitmix64's constants, and the multiplier that mixes a node into a log's hash (the
# scalar and the array forms below must agree bit for bit: nodes and clients use both).
_GAMMA, _MUL1, _MUL2 = 0x9E3779B97F4A7C15, 0xBF58476D1CE4E5B9, 0x94D049BB133111EB
_NODE_MUL = 0xD6E8FEB86659FD93


def _mix64(x: int) -> int:
    """splitmix64 finaliser: a fixed, platform-independent 64-bit hash."""
    x = (x + _GAMMA) & _MASK
    x = ((x ^ (x >> 30)) * _MUL1) & _MASK
    x = ((x ^ (x >> 27)) * _MUL2) & _MASK
    return x ^ (x >> 31)


def score(log_id: int, node: int, weight: float) -> float:
    """Rendezvous score of ``node`` for ``log_id``; the highest score owns the log."""
    if weight <= 0:
        return -math.inf
    h = _mix64(_mix64(log_id) ^ (node * _NODE_MUL & _MASK))
    unit = ((h >> 11) + 0.5) / float(1 << 53)  # uniform in (0, 1), never 0 or 1
    return -weight / math.log(unit)


def sequencer_for(
    log_id: int, weights: Mapping[int, float], alive: Iterable[int] | None = None
) -> int | None:
    """The node that should sequence ``log_id``, or None when no candidate is alive.

    ``weights`` maps each sequencer node to its sequencer weight; ``alive`` restricts the
    candidates to the nodes believed alive (all of them when None).
    """
    candidates = weights.keys() if alive is None else set(alive) & weights.keys()
    best, best_score = None, -math.inf
    for node in sorted(candidates):
        s = score(log_id, node, weights[node])
        if s > best_score:
            best, best_score = node, s
    return best


def _mix64_array(x: np.ndarray) -> np.ndarray:
    """``_mix64`` of every uint64 (numpy's uint64 arithmetic wraps as the mask does)."""
    x = x + np.uint64(_GAMMA)
    x = (x ^ (x >> np.uint64(30))) * np.uint64(_MUL1)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(_MUL2)
    return x ^ (x >> np.uint64(31))


def sequencers_for(log_ids: Iterable[int], weights: Mapping[int, float]) -> np.ndarray:
    """``sequencer_for`` of many logs at once (every node of ``weights`` alive): the owner
    of each, -1 where no node can own it.  A few array operations per node, not a Python
    call per log and node: a node re-checks every log it sequences whenever the cluster
    view changes, and may sequence hundreds of thousands."""
    logs = np.fromiter(log_ids, np.uint64)
    owners = np.full(len(logs), -1, np.int64)
    best = np.full(len(logs), -np.inf)
    base = _mix64_array(logs)
    for node in sorted(weights):  # ties go to the lowest index, as in sequencer_for
        w = weights[node]
        if w <= 0:
            continue
        h = _mix64_array(base ^ np.uint64(node * _NODE_MUL & _MASK))
        unit = ((h >> np.uint64(11)).astype(np.float64) + 0.5) / float(1 << 53)
        s = -w / np.log(unit)
        wins = s > best
        owners[wins] = node
        best[wins] = s[wins]
    return owners
