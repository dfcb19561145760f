"""``read_ranges``' per-task function: Arrow batches of ranges in, records out.

The function Spark runs for ``mapInArrow`` must pickle small: it is a module-level class
holding the config (shipped by the driver) and the read settings, no client.  Each input
row is one range, read through ``read.read_slices`` (ranges are few; the per-range Python
loop is not on the per-record path).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from logdevice.errors import InvalidParamError
from logdevice.records import LSN_MAX
from logdevice.spark.options import ConfigRef, Credentials
from logdevice.spark.plan import Slice
from logdevice.spark.read import read_slices

__all__ = ["ranges_reader"]


class _RangesReader:
    def __init__(self, config: ConfigRef, fail_on_data_loss: bool, batch_records: int,
                 read_timeout: float, credentials: Credentials = ()) -> None:
        self.config = config
        self.credentials = credentials
        self.fail_on_data_loss = fail_on_data_loss
        self.batch_records = batch_records
        self.read_timeout = read_timeout

    def slices(self, batches: Iterator[Any]) -> Iterator[Slice]:
        for b in batches:
            cols = b.to_pydict()
            for log_id, lo, hi in zip(cols["log_id"], cols["from_lsn"], cols["until_lsn"],
                                      strict=True):
                if log_id is None or lo is None or hi is None:
                    raise InvalidParamError(message=f"read_ranges: null in range row "
                                                    f"({log_id}, {lo}, {hi})")
                if not (log_id > 0 and lo >= 0 and hi <= LSN_MAX):
                    raise InvalidParamError(message=f"read_ranges: bad range row "
                                                    f"({log_id}, {lo}, {hi})")
                yield Slice(int(log_id), int(lo), min(int(hi), LSN_MAX - 1))

    def __call__(self, batches: Iterator[Any]) -> Iterator[Any]:
        yield from read_slices(self.config, self.slices(batches),
                               fail_on_data_loss=self.fail_on_data_loss,
                               batch_records=self.batch_records,
                               read_timeout=self.read_timeout,
                               credentials=self.credentials)


def ranges_reader(config: ConfigRef, fail_on_data_loss: bool, batch_records: int,
                  read_timeout: float, credentials: Credentials = ()) -> _RangesReader:
    return _RangesReader(config, fail_on_data_loss, batch_records, read_timeout, credentials)
