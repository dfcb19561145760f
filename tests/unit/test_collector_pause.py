"""The reader holds the cyclic garbage collector off while it builds many streams at once,
and always turns it back on."""

from __future__ import annotations

import gc

import pytest

from logdevice.client.read.reader import collector_paused


@pytest.fixture(autouse=True)
def collector_on():
    was = gc.isenabled()
    gc.enable()
    yield
    if not was:
        gc.disable()


def test_paused_for_the_block_then_on_again():
    with collector_paused(True):
        assert not gc.isenabled()
    assert gc.isenabled()


def test_on_again_when_the_block_raises():
    with pytest.raises(RuntimeError), collector_paused(True):
        raise RuntimeError("boom")
    assert gc.isenabled()


def test_left_alone_when_not_asked_or_already_off():
    with collector_paused(False):
        assert gc.isenabled()
    gc.disable()
    with collector_paused(True):
        assert not gc.isenabled()
    assert not gc.isenabled()  # the caller turned it off: it stays off
