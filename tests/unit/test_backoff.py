"""ExponentialBackoff: the one backoff of the package."""

from __future__ import annotations

import random

import pytest

from logdevice.backoff import ExponentialBackoff


def test_doubles_from_initial_up_to_the_maximum_and_reset_starts_over():
    b = ExponentialBackoff(0.5, 5.0)
    assert [b.next_delay() for _ in range(6)] == [0.5, 1.0, 2.0, 4.0, 5.0, 5.0]
    assert b.attempts == 6
    b.reset()
    assert b.upcoming == 0.5 and b.next_delay() == 0.5 and b.upcoming == 1.0


def test_delay_of_an_attempt_counts_nothing_and_never_overflows():
    b = ExponentialBackoff(0.1, 1.0, multiplier=3)
    assert [b.delay(k) for k in range(4)] == [0.1, 0.1 * 3, 0.1 * 9, 1.0]
    assert b.delay(10**6) == 1.0 and b.attempts == 0
    assert ExponentialBackoff(0.0, 1.0).delay(50) == 0.0
    assert ExponentialBackoff(0.25, 0.25).delay(3) == 0.25
    assert ExponentialBackoff(1.0, 8.0, multiplier=1).delay(5) == 1.0


def test_jitter_draws_between_the_delay_times_one_minus_jitter_and_the_delay():
    top = ExponentialBackoff(0.01, 0.05, jitter=0.5, rng=lambda: 1.0)
    assert [round(top.next_delay(), 4) for _ in range(5)] == [0.01, 0.02, 0.04, 0.05, 0.05]
    low = ExponentialBackoff(0.1, 0.1, jitter=0.5, rng=lambda: 0.0)
    assert low.next_delay() == pytest.approx(0.05)
    drawn = ExponentialBackoff(1.0, 1.0, jitter=0.25, rng=random.Random(7).random)
    again = ExponentialBackoff(1.0, 1.0, jitter=0.25, rng=random.Random(7).random)
    delays = [drawn.next_delay() for _ in range(20)]
    assert delays == [again.next_delay() for _ in range(20)]
    assert all(0.75 <= d <= 1.0 for d in delays) and len(set(delays)) > 1


def test_without_jitter_no_random_number_is_drawn():
    def no_rng() -> float:
        raise AssertionError("drew a random number")

    b = ExponentialBackoff(0.05, 1.0, rng=no_rng)
    assert [b.next_delay() for _ in range(3)] == [0.05, 0.1, 0.2]


@pytest.mark.parametrize("args, kwargs, match", [
    ((-1.0, 1.0), {}, "0 <= initial <= maximum"),
    ((2.0, 1.0), {}, "0 <= initial <= maximum"),
    ((0.1, 1.0, 0.5), {}, "multiplier"),
    ((0.1, 1.0), {"jitter": 1.5}, "jitter"),
    ((0.1, 1.0), {"jitter": -0.1}, "jitter"),
])
def test_bad_settings_are_refused(args, kwargs, match):
    with pytest.raises(ValueError, match=match):
        ExponentialBackoff(*args, **kwargs)
