"""Parsing the data source's options.

Spark hands a data source its options as a case-insensitive map of strings (the keys
arrive lower-cased).  This module turns them into typed values once, on the driver, and
rejects bad input with ``InvalidParamError`` naming the option, so a typo fails the query
at planning time instead of inside an executor.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Mapping
from dataclasses import dataclass

from logdevice.client import Client
from logdevice.errors import InvalidParamError
from logdevice.records import LSN_MAX, LSN_OLDEST

__all__ = ["ReadOptions", "parse_logs", "parse_lsn", "parse_time_ms", "parse_bool",
           "parse_int", "parse_credentials", "require", "Credentials", "connect"]

#: What a task presents to the nodes: ``ld.Client`` keyword arguments (``tls_cert``,
#: ``tls_key``, ``token``), as pairs so the options stay hashable and picklable.
Credentials = tuple[tuple[str, str], ...]

#: Default slice sizes of the batch plan: one Spark task reads about this much.
DEFAULT_RECORDS_PER_PARTITION = 1_000_000
DEFAULT_BYTES_PER_PARTITION = 128 * 1024 * 1024
#: Rows per Arrow batch handed to Spark (and per ``read_batch`` call).
DEFAULT_BATCH_RECORDS = 65_536
#: A read that makes no progress for this long fails (seconds).
DEFAULT_READ_TIMEOUT = 120.0


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


def parse_credentials(options: Mapping[str, str | None]) -> Credentials:
    """The principal a query acts as: ``tls_cert`` (and ``tls_key``, unless in the same
    file) and/or ``token`` or ``token_file``.  A token file is read here, on the driver, so
    executors need not have it; certificate paths must exist on every executor."""
    creds = {name: str(options[name]).strip() for name in ("tls_cert", "tls_key", "token")
             if options.get(name) is not None and str(options[name]).strip()}
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


def connect(config: str, credentials: Credentials) -> Client:
    """A ``Client`` of ``config`` presenting ``credentials`` (close it)."""
    return Client(config, **dict(credentials))  # type: ignore[arg-type]  # names checked


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
    if not value > 0:
        raise InvalidParamError(message=f"option {name} must be > 0, got {value}")
    return value


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
    if not 0 <= value <= LSN_MAX:
        raise InvalidParamError(message=f"option {name}: {value} is out of the LSN range")
    return value


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

    config: str
    logs: tuple[int, ...]
    from_lsn: int = LSN_OLDEST
    until_lsn: int = LSN_MAX
    from_time: int | None = None
    until_time: int | None = None
    fail_on_data_loss: bool = True
    records_per_partition: int = DEFAULT_RECORDS_PER_PARTITION
    bytes_per_partition: int = DEFAULT_BYTES_PER_PARTITION
    batch_records: int = DEFAULT_BATCH_RECORDS
    read_timeout: float = DEFAULT_READ_TIMEOUT
    filter_pushdown: bool = False
    credentials: Credentials = ()

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> ReadOptions:
        opts = {str(k).lower(): v for k, v in options.items()}
        parsed = cls(
            config=require(opts, "config"),
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
