from collections import Counter

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from logdevice.placement import sequencer_for, sequencers_for


def test_every_caller_agrees_and_result_is_a_candidate():
    weights = {0: 1.0, 1: 1.0, 2: 1.0, 3: 1.0}
    for log_id in range(1, 200):
        owner = sequencer_for(log_id, weights)
        assert owner in weights
        assert owner == sequencer_for(log_id, dict(reversed(list(weights.items()))))


def test_only_the_dead_nodes_logs_move():
    weights = {i: 1.0 for i in range(5)}
    before = {log: sequencer_for(log, weights) for log in range(1, 2001)}
    after = {log: sequencer_for(log, weights, alive=[0, 1, 3, 4]) for log in range(1, 2001)}
    moved = {log for log in before if before[log] != after[log]}
    assert moved == {log for log, owner in before.items() if owner == 2}
    assert all(after[log] != 2 for log in after)


def test_weights_bias_ownership():
    counts = Counter(sequencer_for(log, {0: 1.0, 1: 3.0}) for log in range(1, 8001))
    share = counts[1] / 8000
    assert 0.70 < share < 0.80  # expected 0.75


def test_zero_weight_and_no_live_candidate():
    assert sequencer_for(7, {0: 0.0, 1: 1.0}) == 1
    assert sequencer_for(7, {0: 1.0}, alive=[]) is None


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.integers(0, 65535),
                       st.sampled_from([1.0, 1.0, 0.5, 3.0, 0.0, -1.0]), max_size=6),
       st.lists(st.integers(0, 2**64 - 1), max_size=40))
def test_many_logs_at_once_is_each_log_alone(weights, logs):
    got = sequencers_for(logs, weights)
    assert got.dtype == np.int64 and len(got) == len(logs)
    want = [sequencer_for(x, weights) for x in logs]
    assert got.tolist() == [-1 if w is None else w for w in want]
