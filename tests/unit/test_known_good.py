"""``KnownGood``: the storage role's ``(log, epoch) -> LNG`` table answers as a dict would,
whatever order the epochs' STOREs come in."""

from __future__ import annotations

import random

import pytest

from logdevice.node.roles.known_good import KnownGood


@pytest.mark.parametrize("seed", range(20))
def test_answers_as_a_dict(seed):
    rng = random.Random(seed)
    table, model = KnownGood(), {}
    for _ in range(400):
        key = (rng.randint(1, 4), rng.randint(1, 5))
        if rng.random() < 0.6:
            # Mostly LSNs of the key's own epoch; now and then one that is not.
            epoch = key[1] if rng.random() < 0.9 else rng.randint(0, 6)
            lng = epoch << 32 | rng.randint(0, 50)
            table[key] = model[key] = lng
        for probe in [key, (rng.randint(1, 4), rng.randint(0, 6))]:
            assert table.get(probe) == model.get(probe, 0)
            assert table.get(probe, -1) == model.get(probe, -1)


def test_one_int_per_log_while_only_the_newest_epoch_is_written():
    table = KnownGood()
    for log_id in range(1, 101):
        for esn in range(1, 4):
            table[(log_id, 7)] = 7 << 32 | esn
    assert len(table) == 100  # one entry per log
    table[(1, 8)] = 8 << 32 | 1  # a new epoch: the old one's LNG is kept aside
    assert len(table) == 101
    assert table.get((1, 7)) == 7 << 32 | 3 and table.get((1, 8)) == 8 << 32 | 1
