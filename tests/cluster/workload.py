"""Client load that cluster tests run while they change the cluster underneath it."""

from __future__ import annotations

import threading
import time
import weakref

import logdevice as ld
from logdevice.errors import LogDeviceError

# Append errors a ``Load`` keeps to report (the rest are only counted): a client that fails
# every append at once must not fill the test process's memory before the test sees it.
KEPT_ERRORS = 20


def append_many(client, log_id: int, n: int, tag: bytes, burst: int = 250,
                pad: int = 0) -> dict:
    acked = {}
    for a in range(0, n, burst):
        payloads = [b"%s-%d-%d" % (tag, log_id, i) + b"." * pad
                    for i in range(a, min(n, a + burst))]
        futs = [client.append_async(log_id, p) for p in payloads]
        for p, f in zip(payloads, futs, strict=True):
            acked[(log_id, f.result(30))] = p
    return acked


class Load:
    """Appends to ``log_id`` one record at a time and tails it with one reader, in two
    threads, until ``finish``; then the reader must have seen every acknowledged record
    in order and no DATALOSS.  A test that fails before ``finish`` leaves its loads to
    ``stop_all`` (the cluster fixtures call it)."""

    running: weakref.WeakSet[Load] = weakref.WeakSet()

    def __init__(self, client, log_id: int, start_lsn: int) -> None:
        self.client, self.log_id = client, log_id
        self.acked: dict = {}
        self.items: list = []
        self.append_errors: list = []
        self.failed_appends = 0
        self._stop = threading.Event()
        self._reader = client.create_reader()
        self._reader.start_reading(log_id, start_lsn)
        self._threads = [threading.Thread(target=self._write, daemon=True),
                         threading.Thread(target=self._read, daemon=True)]
        self._reading = True
        Load.running.add(self)
        for t in self._threads:
            t.start()

    def _write(self) -> None:
        i = 0
        while not self._stop.is_set():
            payload = b"load-%d" % i
            try:
                lsn = self.client.append(self.log_id, payload)
            except LogDeviceError as exc:  # counted: the tests require that none fail
                self.failed_appends += 1
                if len(self.append_errors) < KEPT_ERRORS:
                    self.append_errors.append(exc)
                self._stop.wait(0.01)  # a closed client fails at once: do not spin
                continue
            self.acked[(self.log_id, lsn)] = payload
            i += 1

    def _read(self) -> None:
        while self._reading:
            self.items += self._reader.read(500, timeout=0.2)

    def stop(self) -> None:
        """Stop writing and reading (at once, without waiting for the tail)."""
        self._stop.set()
        self._threads[0].join(30)
        self._reading = False
        self._threads[1].join(30)
        self._reader.close()
        Load.running.discard(self)

    @classmethod
    def stop_all(cls) -> None:
        for load in list(cls.running):
            load.stop()

    def finish(self, timeout: float = 60.0) -> None:
        self._stop.set()
        self._threads[0].join(30)
        last = max(lsn for _, lsn in self.acked)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and not any(
                getattr(x, "lsn", getattr(x, "hi", 0)) >= last for x in self.items[-5:]):
            time.sleep(0.05)
        self.stop()
        gaps = [g for g in self.items if isinstance(g, ld.GapRecord)]
        assert not [g for g in gaps if g.type == ld.GapType.DATALOSS], gaps
        got = {x.lsn: bytes(x.payload) for x in self.items if isinstance(x, ld.DataRecord)}
        want = {lsn: p for (_, lsn), p in self.acked.items()}
        missing = sorted(set(want) - set(got))
        assert not missing, f"tailing reader missed {len(missing)} records: {missing[:5]}"
        assert all(got[lsn] == p for lsn, p in want.items())
        assert not self.failed_appends, (self.failed_appends, self.append_errors[:3])
