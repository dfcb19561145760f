"""What a written, idle log costs a node, by owner, measured in-process on the real objects.

tracemalloc counts the Python-side bytes (objects, and the buffers of compiled ones) each
owner keeps per log after ``--logs`` logs were written twice (100 B records):

- **sequencer**: the log's ``Sequencer`` as the sequencer role builds it (the node's
  shared rng and node health, a selector shared by every log of the nodeset when the
  tree has that), after two appends, awake and, when the tree has it, asleep;
- **LogsDB**: the partition directory and per-log metadata after one ``write_records``
  per record and a release pointer per log (RocksDB's own memory, the records in its
  memtable, is not Python's and not counted here: see ``many_logs.py``);
- **storage role tables**: release pointers and the newest epoch's LNG per log, in the
  tree's own structures.

Run it against another tree to compare (``PYTHONPATH=<tree>/python:<tree>/src``); parts
the tree does not have are reported as such.

    .venv/bin/python benchmarks/log_memory.py [--logs 20000]
"""

from __future__ import annotations

import argparse
import gc
import random
import tempfile
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

T0 = 1_700_000_000_000
EPOCH = 3


def traced(build: Callable[[], Any]) -> tuple[int, Any]:
    """Bytes still allocated after ``build()`` (what it returns is kept alive)."""
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        kept = build()
        gc.collect()
        return tracemalloc.get_traced_memory()[0] - before, kept
    finally:
        tracemalloc.stop()


def sequencers(n: int) -> dict[str, float]:
    from logdevice.errors import E
    from logdevice.sequencer import CopysetSelector, NodeHealth, Sequencer, StoreWave

    rng, health = random.Random(1), NodeHealth()
    nodes, weights = (0, 1, 2), {0: 1.0, 1: 1.0, 2: 1.0}
    shared: dict[str, Any] = {}
    try:
        shared["selector"] = CopysetSelector(nodes, 2, None, weights)
        Sequencer(1, EPOCH, nodes, 2, None, weights, **shared)
    except TypeError:  # a tree whose sequencers cannot share a selector
        shared = {}

    def build() -> list[Sequencer]:
        out = []
        for log_id in range(1, n + 1):
            seq = Sequencer(log_id, EPOCH, nodes, 2, None, weights, rng=rng, health=health,
                            store_waves=True, **shared)
            for rid in range(2):
                wave = next(a for a in seq.append(rid, 100) if type(a) is StoreWave)
                seq.on_stored_many([(node, wave.lsn, wave.wave, E.OK)
                                    for node in wave.copyset])
            out.append(seq)
        return out

    gc.collect()
    tracemalloc.start()  # one session: what sleeping frees must have been traced
    try:
        before = tracemalloc.get_traced_memory()[0]
        seqs = build()
        gc.collect()
        out = {"awake": (tracemalloc.get_traced_memory()[0] - before) / n}
        if hasattr(seqs[0], "sleep"):
            for seq in seqs:
                seq.sleep()
            gc.collect()
            out["asleep"] = (tracemalloc.get_traced_memory()[0] - before) / n
    finally:
        tracemalloc.stop()
    return out


def logsdb(n: int, root: Path) -> float:
    import numpy as np

    from logdevice.storage.logsdb import LogsDB

    db = LogsDB(root / "logsdb")
    db.write_records(n + 1, [1], [T0], [0], [[0, 1]], b"x" * 100, [0, 100])  # the partition
    payload = np.frombuffer(b"x" * 100, np.uint8)

    def build() -> None:
        for esn in (1, 2):
            for log_id in range(1, n + 1):
                lsn = EPOCH << 32 | esn
                db.write_records(log_id, [lsn], [T0 + esn], [0], [[0, 1]], payload, [0, 100])
        for log_id in range(1, n + 1):
            db.set_last_released(log_id, EPOCH << 32 | 2)

    try:
        size, _ = traced(build)
    finally:
        db.close()
    return size / n


def storage_tables(n: int) -> float:
    try:
        from ldcore.logtable import LogTable
        from logdevice.node.roles.known_good import KnownGood
    except ImportError:  # the tree keeps them in dicts, as the storage role did
        def build() -> Any:
            released: dict[int, int] = {}
            lng: dict[tuple[int, int], int] = {}
            for log_id in range(1, n + 1):
                released[log_id] = EPOCH << 32 | 2
                lng[(log_id, EPOCH)] = EPOCH << 32 | 1
            return released, lng
    else:
        def build() -> Any:
            released, lng = LogTable(1), KnownGood()
            for log_id in range(1, n + 1):
                released.set(log_id, 0, EPOCH << 32 | 2)
                lng[(log_id, EPOCH)] = EPOCH << 32 | 1
            return released, lng

    size, _ = traced(build)
    return size / n


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--logs", type=int, default=20_000)
    args = p.parse_args(argv)
    n = args.logs
    seq = sequencers(n)
    with tempfile.TemporaryDirectory(prefix="ld-log-memory-") as tmp:
        db = logsdb(n, Path(tmp))
    tables = storage_tables(n)
    print(f"| owner ({n:,} logs) | bytes per log |")
    print("|---|---|")
    print(f"| sequencer, awake after 2 appends | {seq['awake']:,.0f} |")
    print(f"| sequencer, asleep | {seq.get('asleep', float('nan')):,.0f} |")
    print(f"| LogsDB directory + metadata | {db:,.0f} |")
    print(f"| storage role: release pointer + LNG | {tables:,.0f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
