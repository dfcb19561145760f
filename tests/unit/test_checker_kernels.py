"""The checker's kernels: copyset runs (``ldcore.runs``) and the merge of per-node
holdings onto slots (``ldcore.holders``), against plain Python."""

from __future__ import annotations

import numpy as np
import pytest

from ldcore.holders import merge_holders
from ldcore.runs import copyset_runs


def _python_runs(cs):
    lengths, index, distinct = [], [], []
    for row in map(tuple, cs):
        if lengths and row == distinct[index[-1]]:
            lengths[-1] += 1
            continue
        if row not in distinct:
            distinct.append(row)
        lengths.append(1)
        index.append(distinct.index(row))
    return lengths, index, distinct


@pytest.mark.parametrize("seed, n, width, nodes", [(0, 500, 2, 3), (1, 3000, 3, 40),
                                                    (2, 2000, 6, 9), (3, 1, 1, 1)])
def test_copyset_runs_matches_python(seed, n, width, nodes):
    rng = np.random.default_rng(seed)
    cs = rng.integers(-1, nodes, (n, width)).astype(np.int16)
    cs[n // 3:n // 2] = cs[n // 3]  # a long run
    lengths, index, distinct = copyset_runs(cs)
    want = _python_runs(cs.tolist())
    assert lengths.tolist() == want[0]
    assert index.tolist() == want[1]
    assert [tuple(r) for r in distinct.tolist()] == want[2]  # in order of first appearance
    assert lengths.dtype == index.dtype == np.uint32 and distinct.dtype == np.int16


def test_copyset_runs_edges():
    lengths, index, distinct = copyset_runs(np.empty((4, 0), np.int16))
    assert (lengths.tolist(), index.tolist(), distinct.shape) == ([4], [0], (1, 0))
    assert [len(a) for a in copyset_runs(np.empty((0, 3), np.int16))] == [0, 0, 0]
    # Many distinct rows: the hash table grows several times and keeps every row.
    cs = np.stack([np.arange(5000) % 977, np.arange(5000) // 977], 1).astype(np.int16)
    lengths, index, distinct = copyset_runs(cs)
    assert len(distinct) == 5000 and np.array_equal(distinct[index], cs)
    with pytest.raises(ValueError):
        copyset_runs(np.zeros(3, np.int16))


def _lsns(*esns, epoch=1):
    return np.array([(epoch << 32) | e for e in esns], np.uint64)


# One segment: epoch 1, ESNs 1..4 at slots 0..3.
GRID = (np.array([(1 << 32) | 1], np.uint64), np.array([0]), np.array([4]))


def test_merge_holders_bits_counts_and_choice():
    # Copysets: row 0 = {0, 1}, row 1 = {0, 2}, row 2 = "none" (the last row).
    member_of = np.array([[0b011], [0b101], [0]], np.uint64)
    # ESN 1: node 0 says {0,2} (an old wave), node 1 says {0,1}: {0,1} is complete.
    # ESN 2: node 0 alone says {0,1}: incomplete, but the only one.  ESN 3: nobody.
    # ESN 4: nodes 0 and 2 agree on {0,2}.  Node tables map their rows differently.
    holders = [(_lsns(1, 2, 4), [1, 1, 1], [0, 1, 0], [1, 0], 0),
               (_lsns(1), [1], [0], [0], 1),
               (_lsns(4), [1], [0], [1], 2)]
    hold, copies, chosen = merge_holders(*GRID, holders, member_of)
    assert hold[:, 0].tolist() == [0b011, 0b001, 0, 0b101]
    assert copies.tolist() == [2, 1, 0, 2]
    assert chosen.tolist() == [0, 0, 2, 1]


def test_merge_holders_segments_words_and_errors():
    member_of = np.zeros((2, 2), np.uint64)
    member_of[0] = [1, 1 << 6]  # nodes at bits 0 and 70
    # Epoch 1 ESNs 1..2 at slots 0..1, epoch 3 ESNs 5..6 at slots 2..3.
    grid = (np.array([(1 << 32) | 1, (3 << 32) | 5], np.uint64), np.array([0, 2]),
            np.array([2, 2]))
    holders = [(np.concatenate([_lsns(2), _lsns(6, epoch=3)]), [2], [0], [0], 0),
               (_lsns(6, epoch=3), [1], [0], [0], 70)]
    hold, copies, chosen = merge_holders(*grid, holders, member_of)
    assert hold.tolist() == [[0, 0], [1, 0], [0, 0], [1, 1 << 6]]
    assert copies.tolist() == [0, 1, 0, 2] and chosen.tolist() == [1, 0, 1, 0]
    with pytest.raises(ValueError):  # an LSN outside the grid
        merge_holders(*grid, [(_lsns(4), [1], [0], [0], 0)], member_of)
    with pytest.raises(ValueError):  # the "none" row is not a copyset
        merge_holders(*grid, [(_lsns(1), [1], [0], [1], 0)], member_of)
    with pytest.raises(ValueError):  # a row outside the node's table
        merge_holders(*grid, [(_lsns(1), [1], [1], [0], 0)], member_of)
    with pytest.raises(ValueError):  # a bit past the words
        merge_holders(*grid, [(_lsns(1), [1], [0], [0], 128)], member_of)
    with pytest.raises(ValueError):  # runs that do not cover the LSNs
        merge_holders(*grid, [(_lsns(1, 2), [1], [0], [0], 0)], member_of)
