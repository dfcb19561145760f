"""A donor's progress through one rebuilding set, kept in a small JSON file.

Per log: the highest LSN the donor has finished (every record at or below it that it
donates is on its new nodes with amended copysets).  Written atomically (a temporary
file, fsynced, renamed over the old one, and the directory fsynced) after each batch, so
a donor that restarts mid-way, even after a power loss, resumes from the last finished
batch; the file of an older set is ignored.  Losing the file costs time only: a donated
record's own copy no longer names a rebuilding node, so a fresh pass skips it.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["DonorProgress"]


@dataclass
class DonorProgress:
    """What one donor has done for rebuilding set ``set_version``."""

    set_version: int
    done_lsn: dict[int, int] = field(default_factory=dict)  # log -> last LSN finished
    finished_logs: set[int] = field(default_factory=set)
    records: int = 0
    bytes: int = 0
    started: float = field(default_factory=time.time)

    @classmethod
    def load(cls, path: Path, set_version: int) -> DonorProgress:
        """The saved progress for ``set_version``, or a fresh one."""
        try:
            raw = json.loads(path.read_text())
        except (OSError, ValueError):
            return cls(set_version)
        if not isinstance(raw, dict) or raw.get("set_version") != set_version:
            return cls(set_version)
        return cls(set_version,
                   done_lsn={int(k): int(v) for k, v in raw.get("done_lsn", {}).items()},
                   finished_logs={int(x) for x in raw.get("finished_logs", [])},
                   records=int(raw.get("records", 0)), bytes=int(raw.get("bytes", 0)),
                   started=float(raw.get("started", time.time())))

    def save(self, path: Path) -> None:
        tmp = path.with_suffix(".tmp")
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(json.dumps(self.to_json()))
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        fd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)  # the rename itself
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def to_json(self) -> dict[str, Any]:
        return {"set_version": self.set_version,
                "done_lsn": {str(k): v for k, v in sorted(self.done_lsn.items())},
                "finished_logs": sorted(self.finished_logs), "records": self.records,
                "bytes": self.bytes, "started": self.started}
