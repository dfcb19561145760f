"""Retention runs on the nodes: trimming frees disk, and records older than a log's
backlog retention go away with a TRIM gap for readers."""

from __future__ import annotations

import os
import time

import pytest

from logdevice.records import DataRecord, GapRecord, GapType
from tests.waiting import wait_until

pytestmark = pytest.mark.cluster

SETTINGS = {"partition_size_limit_bytes": 256 << 10, "retention_interval_ms": 200}


def disk_usage(path) -> int:
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, files in os.walk(path)
               for f in files)


def test_trim_frees_disk(local_cluster):
    cluster = local_cluster(nodes=2, replication=2, logs=[1], **SETTINGS)
    client = cluster.client(timeout=30.0)
    writer = client.create_buffered_writer(size_trigger=64 << 10, compression="none")
    payloads = [os.urandom(1000) for _ in range(8000)]  # 8 MB, incompressible
    futures = writer.append_many(1, payloads)
    writer.flush(wait=True)
    tail = int(futures.result(30).max())
    full = disk_usage(cluster.logsdb_path(0))
    assert full > 7 << 20
    client.trim(1, tail)
    # The newest partition is never dropped: a record after the trim starts a new one.
    client.append(1, b"after the trim")
    wait_until(lambda: disk_usage(cluster.logsdb_path(0)) < full // 4, 30.0, 0.1,
               f"disk usage did not fall from {full} bytes after the trim")
    # The log reads as trimmed.
    reader = client.create_reader()
    reader.start_reading(1, until_lsn=tail)
    items = reader.read(10, timeout=5.0)
    assert items and isinstance(items[0], GapRecord) and items[0].type == GapType.TRIM
    assert items[0].hi >= tail
    client.close()


def test_backlog_retention_drops_old_records(local_cluster):
    cluster = local_cluster(nodes=2, replication=2, logs=[1], backlog_retention_ms=1000,
                            **SETTINGS)
    client = cluster.client(timeout=30.0)
    writer = client.create_buffered_writer(size_trigger=64 << 10, compression="none")
    old = writer.append_many(1, [os.urandom(1000) for _ in range(2000)])
    writer.flush(wait=True)
    old_tail = int(old.result(30).max())
    time.sleep(1.2)  # the records must age past the 1 s backlog; nothing to poll for
    fresh = client.append(1, b"fresh")  # lands in a newer partition (the old ones aged)
    wait_until(lambda: client.get_head_attributes(1).trim_point >= old_tail // 2, 30.0, 0.1,
               "the old partitions were not dropped")
    reader = client.create_reader()
    reader.start_reading(1, until_lsn=fresh)
    items = []
    while not items or not (isinstance(items[-1], DataRecord) and items[-1].lsn == fresh):
        got = reader.read(1000, timeout=5.0)
        assert got, "reader stalled"
        items += got
    assert isinstance(items[0], GapRecord) and items[0].type == GapType.TRIM
    assert bytes(items[-1].payload) == b"fresh"
    client.close()
