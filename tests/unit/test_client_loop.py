"""The client's event loop: uvloop or asyncio's, chosen by the ``event_loop`` setting or
``LOGDEVICE_CLIENT_LOOP``; either runs the client's work the same way."""

from __future__ import annotations

import asyncio

import pytest

from logdevice.client.net.loop import LoopThread
from logdevice.client.settings import ClientSettings
from logdevice.errors import InvalidParamError

uvloop = pytest.importorskip("uvloop")


async def _running_loop_type() -> type:
    await asyncio.sleep(0)
    return type(asyncio.get_running_loop())


@pytest.mark.parametrize("kind", ["uvloop", "asyncio"])
def test_the_loop_asked_for_runs_submitted_work(kind):
    lt = LoopThread("test-loop-kind", kind=kind)
    try:
        loop_type = lt.run(_running_loop_type, timeout=5)
    finally:
        lt.stop()
    assert (loop_type is uvloop.Loop) == (kind == "uvloop")
    assert issubclass(loop_type, asyncio.AbstractEventLoop)


def test_the_environment_chooses_when_the_setting_does_not(monkeypatch):
    monkeypatch.setenv("LOGDEVICE_CLIENT_LOOP", "asyncio")
    lt = LoopThread("test-loop-env")
    try:
        assert lt.run(_running_loop_type, timeout=5) is not uvloop.Loop
    finally:
        lt.stop()
    monkeypatch.delenv("LOGDEVICE_CLIENT_LOOP")
    lt = LoopThread("test-loop-default")
    try:
        assert lt.run(_running_loop_type, timeout=5) is uvloop.Loop  # installed: preferred
    finally:
        lt.stop()


def test_an_unknown_loop_is_refused(config):
    with pytest.raises(InvalidParamError, match="event_loop"):
        ClientSettings.from_config(config, {"event_loop": "trio"})
    assert ClientSettings.from_config(config, {"event_loop": "asyncio"}).event_loop == "asyncio"
    with pytest.raises(InvalidParamError, match="event loop"):
        LoopThread("test-loop-bad", kind="trio")
