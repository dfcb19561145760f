"""The keyword options of the client's factories (readers, writers, the client settings):
one TypedDict per set types them for the user (``**options: Unpack[...]``); it names exactly
what the runtime accepts, and any other name is ``InvalidParamError`` listing the valid ones,
never a bare ``TypeError``.  No cluster: nothing here connects."""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import os
import typing

import pytest

import logdevice as ld
from logdevice.client import Client
from logdevice.client.read.core import ReaderOptionKwargs, ReaderOptions
from logdevice.client.settings import ClientSettingKwargs, ClientSettings
from logdevice.client.write.buffered_writer import BufferedWriter, BufferedWriterKwargs
from logdevice.errors import InvalidParamError

READER_NAMES = sorted(ReaderOptionKwargs.__annotations__)
WRITER_NAMES = sorted(BufferedWriterKwargs.__annotations__)
SETTING_NAMES = sorted(ClientSettingKwargs.__annotations__)


def _lists(exc: pytest.ExceptionInfo[InvalidParamError], names: list[str]) -> None:
    text = str(exc.value)
    for name in names:
        assert name in text, (name, text)


# ---------------------------------------------------------------------- one definition each


def _hints(obj: object) -> dict[str, object]:
    # Imported for type checking only where they are annotations.
    return typing.get_type_hints(obj, localns={"Client": Client,
                                               "ClientSettingKwargs": ClientSettingKwargs})


def test_reader_kwargs_are_the_reader_options_fields():
    assert set(READER_NAMES) == {f.name for f in dataclasses.fields(ReaderOptions)}
    assert _hints(ReaderOptionKwargs) == _hints(ReaderOptions)


def test_writer_kwargs_are_the_buffered_writer_parameters():
    params = inspect.signature(BufferedWriter.__init__).parameters
    keyword_only = {n for n, p in params.items() if p.kind is p.KEYWORD_ONLY}
    assert set(WRITER_NAMES) == keyword_only
    init = _hints(BufferedWriter.__init__)
    assert _hints(BufferedWriterKwargs) == {n: init[n] for n in keyword_only}


def test_setting_kwargs_are_the_client_settings_fields():
    fields = _hints(ClientSettings)
    kwargs = _hints(ClientSettingKwargs)
    assert set(kwargs) == set(fields)
    for name, hint in kwargs.items():
        if name in ("tls_cert", "tls_key", "tls_ca"):  # paths: also os.PathLike
            assert hint == str | os.PathLike[str] | None
        else:
            assert hint == fields[name], name


def test_factories_are_typed_with_the_kwargs():
    """What an IDE or mypy sees: ``**options: Unpack[TheKwargs]`` on every factory."""
    cases = [(Client.__init__, "settings", ClientSettingKwargs),
             (ld.AsyncClient.__init__, "settings", ClientSettingKwargs),
             (Client.create_reader, "options", ReaderOptionKwargs),
             (Client.create_async_reader, "options", ReaderOptionKwargs),
             (Client.create_checkpointed_reader, "options", ReaderOptionKwargs),
             (Client.create_group_reader, "options", ReaderOptionKwargs),
             (ld.AsyncClient.create_reader, "options", ReaderOptionKwargs),
             (Client.create_buffered_writer, "options", BufferedWriterKwargs),
             (ld.LocalCluster.client, "settings", ClientSettingKwargs)]
    for fn, name, kwargs in cases:
        param = inspect.signature(fn).parameters[name]
        assert param.kind is param.VAR_KEYWORD, fn
        hint = _hints(fn)[name]
        assert typing.get_origin(hint) is typing.Unpack, fn
        assert typing.get_args(hint) == (kwargs,), fn


# ---------------------------------------------------------------------- unknown names


def test_unknown_reader_option_lists_the_valid_ones(client):
    factories = [lambda: client.create_reader(bufer_size=10),
                 lambda: client.create_async_reader(bufer_size=10),
                 # refused before the checkpoints are loaded or the group joined:
                 lambda: client.create_checkpointed_reader("c", bufer_size=10),
                 lambda: client.create_group_reader("g", [1], bufer_size=10)]
    for make in factories:
        with pytest.raises(InvalidParamError, match="unknown reader option 'bufer_size'") as ei:
            make()
        _lists(ei, READER_NAMES)


def test_unknown_writer_option_lists_the_valid_ones(client):
    with pytest.raises(InvalidParamError,
                       match="unknown buffered writer option 'time_triger'") as ei:
        client.create_buffered_writer(time_triger=0.1)
    _lists(ei, WRITER_NAMES)
    assert ei.value.status == ld.E.INVALID_PARAM


def test_unknown_client_setting_lists_the_valid_ones(config):
    with pytest.raises(InvalidParamError, match="unknown client setting 'conect_timeout'") as ei:
        Client(config, conect_timeout=1.0)
    _lists(ei, SETTING_NAMES)
    with pytest.raises(InvalidParamError, match="unknown client setting"):
        ld.AsyncClient(config, conect_timeout=1.0)


def test_async_client_reader_refuses_unknown_options(config):
    async def main() -> None:
        async with ld.AsyncClient(config, timeout=1.0) as ac:
            with pytest.raises(InvalidParamError, match="unknown reader option") as ei:
                ac.create_reader(grace=1.0)
            _lists(ei, READER_NAMES)
            r = ac.create_reader(2, grace_period=0.5, max_buffered_records=9)
            assert (r.max_logs, r.options.grace_period, r.options.max_buffered_records) == (
                2, 0.5, 9)
            await r.aclose()

    asyncio.run(main())


# ---------------------------------------------------------------------- the options work


def test_reader_options_reach_the_reader(client, config):
    with client.create_reader(3, buffer_size=64, flow_control_threshold=0.5,
                              max_buffered_bytes=1 << 20) as r:
        assert r.max_logs == 3
        o = r.options
        assert (o.buffer_size, o.flow_control_threshold, o.max_buffered_bytes) == (
            64, 0.5, 1 << 20)
        s = config.settings  # the rest: the config's read settings
        assert o.grace_period == s.gap_grace_period_ms / 1000
        assert o.scd_timeout == s.scd_timeout_ms / 1000
    with pytest.raises(InvalidParamError, match="buffer_size must be a non-negative"):
        client.create_reader(buffer_size=-1)


def test_a_window_asked_for_is_kept_unless_growth_is_asked_for_too(client, config):
    s = config.settings
    with client.create_reader() as r:  # the default window grows for small records
        assert (r.options.buffer_size, r.options.window_bytes) == (
            s.read_window_size, s.read_window_bytes)
        assert s.read_window_bytes > 0
    with client.create_reader(buffer_size=64) as r:
        assert (r.options.buffer_size, r.options.window_bytes) == (64, 0)
    with client.create_reader(buffer_size=64, window_bytes=1 << 20) as r:
        assert (r.options.buffer_size, r.options.window_bytes) == (64, 1 << 20)


def test_writer_options_reach_the_writer(client):
    w = client.create_buffered_writer(mode="one_at_a_time", retries=5, backoff=0.1,
                                      compression=None, block=False)
    try:
        assert (w.mode, w.retries, w.backoff, w.compression, w.block) == (
            "one_at_a_time", 5, (0.1, 2.0), "none", False)
    finally:
        w.close()
    with pytest.raises(InvalidParamError, match="mode must be one of"):
        client.create_buffered_writer(mode="sometimes")


def test_client_settings_reach_the_client(config):
    with Client(config, timeout=1.0, unreachable_timeout=0.5, max_redirects=7) as c:
        assert (c.settings.unreachable_timeout, c.settings.max_redirects) == (0.5, 7)
