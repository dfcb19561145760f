"""Parsing the data source's options.

Spark hands a data source its options as a case-insensitive map of strings (the keys
arrive lower-cased).  This module turns them into typed values once, on the driver, and
rejects bad input with ``InvalidParamError`` naming the option, so a typo fails the query
at planning time instead of inside an executor.

``OPTIONS`` is the one list of option names and of what takes each (a batch read, a
stream read, a write).  A key is looked up lower-cased and without underscores, so
``from_lsn``, ``fromLsn`` and ``FROM_LSN`` are one option; a key that is none of the
options of that use is an error naming the valid ones (``option_values``).

The cluster config reaches the executors inside the pickled options: the driver reads
the file of option ``config`` once (``ship_config``), or takes the document of
``config_json``, and executors build their clients from that text (``ShippedConfig``),
so they need no config file.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import difflib
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from logdevice import validate
from logdevice.client import Client
from logdevice.config import Config
from logdevice.errors import InvalidParamError
from logdevice.records import LSN_MAX, LSN_OLDEST

__all__ = ["ReadOptions", "parse_logs", "parse_lsn", "parse_time_ms", "parse_bool",
           "parse_int", "parse_credentials", "require", "Credentials", "connect",
           "OPTIONS", "BATCH_READ", "STREAM_READ", "WRITE", "option_values",
           "ShippedConfig", "ConfigRef", "parse_config", "ship_config", "with_shipped_config"]

#: What a task presents to the nodes: ``ld.Client`` keyword arguments (``tls_cert``,
#: ``tls_key``, ``tls_ca``, ``token``), as pairs so the options stay hashable and picklable.
Credentials = tuple[tuple[str, str], ...]

#: Default slice sizes of the batch plan: one Spark task reads about this much.
DEFAULT_RECORDS_PER_PARTITION = 1_000_000
DEFAULT_BYTES_PER_PARTITION = 128 * 1024 * 1024
#: A batch read is cut into at least this many tasks when it is big enough (the planner
#: runs in a process that cannot see Spark's default parallelism).
DEFAULT_MIN_PARTITIONS = 8
#: Rows per Arrow batch handed to Spark (and per ``read_batch`` call).
DEFAULT_BATCH_RECORDS = 65_536
#: A read that makes no progress for this long fails (seconds).
DEFAULT_READ_TIMEOUT = 120.0

# -- the option names ----------------------------------------------------------------

BATCH_READ = "batch read"
STREAM_READ = "stream read"
WRITE = "write"
_READS = frozenset({BATCH_READ, STREAM_READ})
_ALL = frozenset({BATCH_READ, STREAM_READ, WRITE})

#: Every option of the data source (its documented snake_case name) and the uses that
#: take it.  Meanings and defaults: the package docstring and the README.
OPTIONS: Mapping[str, frozenset[str]] = {
    "config": _ALL,
    "config_json": _ALL,
    "token": _ALL,
    "token_file": _ALL,
    "tls_cert": _ALL,
    "tls_key": _ALL,
    "tls_ca": _ALL,
    "logs": _READS,
    "fail_on_data_loss": _READS,
    "records_per_partition": _READS,
    "batch_records": _READS,
    "read_timeout": _READS,
    "from_lsn": frozenset({BATCH_READ}),
    "until_lsn": frozenset({BATCH_READ}),
    "from_time": frozenset({BATCH_READ}),
    "until_time": frozenset({BATCH_READ}),
    "bytes_per_partition": frozenset({BATCH_READ}),
    "min_partitions": frozenset({BATCH_READ}),
    "filter_pushdown": frozenset({BATCH_READ}),
    "starting_offsets": frozenset({STREAM_READ}),
    "starting_timestamp": frozenset({STREAM_READ}),
    "max_records_per_trigger": frozenset({STREAM_READ}),
    "log": frozenset({WRITE}),
    "size_trigger": frozenset({WRITE}),
    "time_trigger": frozenset({WRITE}),
    "compression": frozenset({WRITE}),
    "write_timeout": frozenset({WRITE}),
    "exactly_once": frozenset({WRITE}),
}

#: Options Spark itself passes to the sink: ``writeStream.option("checkpointLocation",
#: ...)`` reaches the writer's options too.  They are Spark's business, not ours.
_SPARK_OPTIONS = frozenset({"checkpointlocation"})
#: What ``.load(path)`` / ``.save(path)`` add; this data source takes no path.
_PATH_OPTIONS = frozenset({"path", "paths"})


def _normal(key: str) -> str:
    return key.lower().replace("_", "")


_BY_NORMAL = {_normal(name): name for name in OPTIONS}


def option_values(options: Mapping[str, Any], use: str) -> dict[str, Any]:
    """``options`` (as Spark passes them) by documented name, for ``use`` (``BATCH_READ``,
    ``STREAM_READ`` or ``WRITE``).  ``InvalidParamError`` for a key that is no option of
    ``use`` (naming it, the closest valid name and all of them), a key given twice in
    two spellings, or a path."""
    out: dict[str, Any] = {}
    spelt: dict[str, str] = {}
    for raw_key, value in options.items():
        key = str(raw_key)
        normal = _normal(key)
        if normal in _SPARK_OPTIONS:
            continue
        if normal in _PATH_OPTIONS:
            raise InvalidParamError(message=f"the logdevice data source takes no path "
                                            f"(got {key}={value!r}): call load() / save() "
                                            "without one and give the cluster config with "
                                            "option config or config_json")
        name = _BY_NORMAL.get(normal)
        if name is None or use not in OPTIONS[name]:
            raise InvalidParamError(message=_unknown(key, name, use))
        if name in out:
            raise InvalidParamError(message=f"option {name} is given twice (as "
                                            f"{spelt[name]!r} and {key!r})")
        out[name] = value
        spelt[name] = key
    return out


def _unknown(key: str, name: str | None, use: str) -> str:
    valid = sorted(n for n, uses in OPTIONS.items() if use in uses)
    if name is not None:
        elsewhere = " and ".join(sorted(OPTIONS[name]))
        why = f"option {name!r} is not used by a {use} (only by a {elsewhere})"
    else:
        why = f"unknown option {key!r} for a logdevice {use}"
        close = difflib.get_close_matches(_normal(key), [_normal(n) for n in valid], n=1)
        if close:
            why += f" (did you mean {_BY_NORMAL[close[0]]!r}?)"
    return (f"{why}.  Valid options (case and underscores do not matter): "
            f"{', '.join(valid)}")


# -- the cluster config ----------------------------------------------------------------


@dataclass(frozen=True)
class ShippedConfig:
    """The cluster config as the driver read it, for executors that may not have the file:
    its JSON ``text`` and ``base_dir``, the directory its relative paths (the TLS CA) are
    taken from (that of the driver's config file, or the driver's working directory for
    ``config_json``)."""

    text: str
    base_dir: str
    origin: str  # where the driver got it from (for messages)

    def load(self) -> Config:
        # No source: a client of a shipped config watches no file.
        return Config.from_dict(json.loads(self.text), base_dir=self.base_dir)

    def __repr__(self) -> str:  # the document is long; where it came from says enough
        return f"ShippedConfig({self.origin})"


#: A config path (read where the client is opened) or a shipped config.
ConfigRef = str | ShippedConfig


def parse_config(options: Mapping[str, Any]) -> ConfigRef:
    """Option ``config`` (a path, as given: ``ship_config`` reads it) or ``config_json``
    (the document itself, checked here); exactly one of them."""
    path, doc = options.get("config"), options.get("config_json")
    if path is not None and doc is not None:
        raise InvalidParamError(message="give option config (a path) or config_json (the "
                                        "document), not both")
    if doc is None:
        return require(options, "config")
    shipped = ShippedConfig(str(doc), os.getcwd(), "option config_json")
    _check(shipped)
    return shipped


def ship_config(config: ConfigRef) -> ShippedConfig:
    """``config`` as executors get it: a path is read and checked here (on the driver)."""
    if isinstance(config, ShippedConfig):
        return config
    path = Path(config)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise InvalidParamError(message=f"option config: cannot read {config!r}: "
                                        f"{exc}") from None
    shipped = ShippedConfig(text, str(path.resolve().parent), f"config file {config}")
    _check(shipped)
    return shipped


def _check(shipped: ShippedConfig) -> None:
    try:
        doc = json.loads(shipped.text)
    except ValueError as exc:
        raise InvalidParamError(message=f"{shipped.origin}: not valid JSON: {exc}") from None
    if not isinstance(doc, dict):
        raise InvalidParamError(message=f"{shipped.origin}: not a JSON object")
    shipped.load()  # InvalidConfigError naming the field, on the driver


_Options = TypeVar("_Options")


def with_shipped_config(options: _Options) -> _Options:
    """Parsed options (a dataclass with a ``config`` field) with the config read on the
    driver, ready to be pickled to executors."""
    config = options.config  # type: ignore[attr-defined]
    return dataclasses.replace(options, config=ship_config(config))  # type: ignore[type-var]


def require(options: Mapping[str, str], name: str) -> str:
    value = options.get(name)
    if value is None or not str(value).strip():
        raise InvalidParamError(message=f"the logdevice data source needs option {name!r}")
    return str(value).strip()


def parse_logs(spec: str) -> list[int]:
    """``"1,2,10-20"`` -> ``[1, 2, 10, ..., 20]`` (sorted, without duplicates)."""
    logs: set[int] = set()
    for part in spec.split(","):
        part = part.strip()
        if not part:
            continue
        lo_s, sep, hi_s = part.partition("-")
        try:
            lo = int(lo_s)
            hi = int(hi_s) if sep else lo
        except ValueError:
            raise InvalidParamError(message=f"option logs: {part!r} is not a log id or "
                                            "an id range like 10-20") from None
        if lo < 1 or hi < lo:
            raise InvalidParamError(message=f"option logs: bad range {part!r}")
        if hi - lo > 1_000_000:
            raise InvalidParamError(message=f"option logs: range {part!r} is too large")
        logs.update(range(lo, hi + 1))
    if not logs:
        raise InvalidParamError(message=f"option logs: no log id in {spec!r}")
    return sorted(logs)


def parse_credentials(options: Mapping[str, Any]) -> Credentials:
    """The principal a query acts as: ``tls_cert`` (and ``tls_key``, unless in the same
    file) and/or ``token`` or ``token_file``; ``tls_ca``, the CA to trust instead of the
    config's.  A token file is read here, on the driver, so executors need not have it;
    certificate, key and CA paths are made absolute here and must exist at that path on
    every executor."""
    creds = {name: str(options[name]).strip() for name in ("tls_cert", "tls_key", "tls_ca",
                                                           "token")
             if options.get(name) is not None and str(options[name]).strip()}
    for name in ("tls_cert", "tls_key", "tls_ca"):
        if name in creds:  # executors run in other directories
            creds[name] = os.path.abspath(creds[name])
    token_file = options.get("token_file")
    if token_file is not None:
        if "token" in creds:
            raise InvalidParamError(message="give option token or token_file, not both")
        try:
            with open(str(token_file).strip()) as f:
                creds["token"] = f.readline().strip()
        except OSError as exc:
            raise InvalidParamError(message=f"option token_file: cannot read "
                                            f"{token_file!r}: {exc}") from None
        if not creds["token"]:
            raise InvalidParamError(message=f"option token_file: {token_file!r} is empty")
    if "tls_key" in creds and "tls_cert" not in creds:
        raise InvalidParamError(message="option tls_key needs tls_cert")
    return tuple(sorted(creds.items()))


def connect(config: ConfigRef, credentials: Credentials) -> Client:
    """A ``Client`` of ``config`` (a path or a ``ShippedConfig``) presenting
    ``credentials`` (close it)."""
    loaded = config.load() if isinstance(config, ShippedConfig) else config
    return Client(loaded, **dict(credentials))  # type: ignore[arg-type]  # names checked


def parse_int(options: Mapping[str, str], name: str, default: int, *,
              minimum: int = 0) -> int:
    raw = options.get(name)
    if raw is None:
        return default
    try:
        value = int(str(raw).strip())
    except ValueError:
        raise InvalidParamError(message=f"option {name}: {raw!r} is not an integer") from None
    if value < minimum:
        raise InvalidParamError(message=f"option {name} must be >= {minimum}, got {value}")
    return value


def parse_float(options: Mapping[str, str], name: str, default: float) -> float:
    raw = options.get(name)
    if raw is None:
        return default
    try:
        value = float(str(raw).strip())
    except ValueError:
        raise InvalidParamError(message=f"option {name}: {raw!r} is not a number") from None
    return validate.timeout(value, f"option {name}", positive=True)


def parse_bool(options: Mapping[str, str], name: str, default: bool) -> bool:
    raw = options.get(name)
    if raw is None:
        return default
    text = str(raw).strip().lower()
    if text in ("true", "1", "yes"):
        return True
    if text in ("false", "0", "no"):
        return False
    raise InvalidParamError(message=f"option {name}: {raw!r} is not true or false")


def parse_lsn(options: Mapping[str, str], name: str, default: int) -> int:
    raw = options.get(name)
    if raw is None:
        return default
    text = str(raw).strip().lower()
    if text in ("oldest", "earliest"):
        return LSN_OLDEST
    if text in ("max", "latest"):
        return LSN_MAX
    try:
        value = int(text, 0)
    except ValueError:
        raise InvalidParamError(message=f"option {name}: {raw!r} is not an LSN") from None
    return validate.lsn(value, f"option {name}")


def parse_time_ms(options: Mapping[str, str], name: str) -> int | None:
    """Milliseconds since the Unix epoch, from an integer or an ISO 8601 timestamp (naive
    timestamps are UTC)."""
    raw = options.get(name)
    if raw is None:
        return None
    text = str(raw).strip()
    try:
        return int(text)
    except ValueError:
        pass
    try:
        t = _dt.datetime.fromisoformat(text)
    except ValueError:
        raise InvalidParamError(message=f"option {name}: {raw!r} is neither milliseconds "
                                        "since the epoch nor an ISO 8601 time") from None
    if t.tzinfo is None:
        t = t.replace(tzinfo=_dt.UTC)
    return int(t.timestamp() * 1000)


@dataclass(frozen=True)
class ReadOptions:
    """What a read (batch or streaming) was asked for.

    ``from_time`` is inclusive and ``until_time`` exclusive (ms); both are turned into
    LSNs with ``find_time`` on the driver.  ``from_lsn``/``until_lsn`` are inclusive.
    """

    config: ConfigRef
    logs: tuple[int, ...]
    from_lsn: int = LSN_OLDEST
    until_lsn: int = LSN_MAX
    from_time: int | None = None
    until_time: int | None = None
    fail_on_data_loss: bool = True
    records_per_partition: int = DEFAULT_RECORDS_PER_PARTITION
    bytes_per_partition: int = DEFAULT_BYTES_PER_PARTITION
    min_partitions: int = DEFAULT_MIN_PARTITIONS
    batch_records: int = DEFAULT_BATCH_RECORDS
    read_timeout: float = DEFAULT_READ_TIMEOUT
    filter_pushdown: bool = False
    credentials: Credentials = ()

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> ReadOptions:
        opts = option_values(options, BATCH_READ)
        parsed = cls(
            config=parse_config(opts),
            logs=tuple(parse_logs(require(opts, "logs"))),
            from_lsn=parse_lsn(opts, "from_lsn", LSN_OLDEST),
            until_lsn=parse_lsn(opts, "until_lsn", LSN_MAX),
            from_time=parse_time_ms(opts, "from_time"),
            until_time=parse_time_ms(opts, "until_time"),
            fail_on_data_loss=parse_bool(opts, "fail_on_data_loss", True),
            records_per_partition=parse_int(opts, "records_per_partition",
                                            DEFAULT_RECORDS_PER_PARTITION, minimum=1),
            bytes_per_partition=parse_int(opts, "bytes_per_partition",
                                          DEFAULT_BYTES_PER_PARTITION, minimum=1),
            min_partitions=parse_int(opts, "min_partitions", DEFAULT_MIN_PARTITIONS,
                                     minimum=1),
            batch_records=parse_int(opts, "batch_records", DEFAULT_BATCH_RECORDS, minimum=1),
            read_timeout=parse_float(opts, "read_timeout", DEFAULT_READ_TIMEOUT),
            filter_pushdown=parse_bool(opts, "filter_pushdown", False),
            credentials=parse_credentials(opts),
        )
        if parsed.from_lsn > parsed.until_lsn:
            raise InvalidParamError(message=f"from_lsn {parsed.from_lsn} is past until_lsn "
                                            f"{parsed.until_lsn}")
        if (parsed.from_time is not None and parsed.until_time is not None
                and parsed.from_time > parsed.until_time):
            raise InvalidParamError(message=f"from_time {parsed.from_time} is past "
                                            f"until_time {parsed.until_time}")
        return parsed
