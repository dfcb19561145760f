"""DATALOSS gaps: the query fails naming the log and LSN range, or skips them with
``fail_on_data_loss=false``.

Records are lost for real: two of four storage nodes (R=2) are stopped, their data
directories wiped and restarted, so records whose copysets were exactly those two
nodes are gone and readers get DATALOSS gaps for them.
"""

from __future__ import annotations

import re
import shutil

import pytest
from pyspark.errors import PySparkException

import logdevice as ld
from tests.cluster.conftest import RawClient
from tests.spark.conftest import read_all, rows_of

pytestmark = pytest.mark.cluster

LOG = 1


def test_dataloss_fails_the_query_or_is_skipped(spark, local_cluster):
    # Rebuilding held off (nodes read the event log once an hour): the lost records stay
    # lost and the reader must say so.
    cluster = local_cluster(nodes=4, replication=2, logs=range(1, 3),
                            rebuilding_poll_ms=3_600_000)
    with ld.Client(cluster.config_path, timeout=20.0) as client:
        futs = [client.append_async(LOG, b"p-%d" % i) for i in range(600)]
        lsns = [f.result(30) for f in futs]
        with RawClient(cluster) as raw:
            owner = raw.owner(LOG)
        wiped = [n for n in range(cluster.n) if n != owner][:2]
        for n in wiped:
            cluster.stop(n)
        for n in wiped:
            shutil.rmtree(cluster.node_data_dir(n))
            cluster.start(n)
        kept = read_all(client, LOG, max(lsns))
        assert 0 < len(kept) < len(lsns)  # some copysets were exactly the wiped nodes

        def load(**options):
            r = (spark.read.format("logdevice").option("config", str(cluster.config_path))
                 .option("logs", str(LOG)))
            for k, v in options.items():
                r = r.option(k, v)
            return r.load()

        with pytest.raises(PySparkException) as info:
            load().collect()
        text = str(info.value)
        m = re.search(r"log 1: records lost in LSN range \[(\d+), (\d+)\]", text)
        assert m, text
        lo, hi = int(m.group(1)), int(m.group(2))
        kept_lsns = {r[1] for r in kept}
        assert lo <= hi and not any(lo <= x <= hi for x in kept_lsns)
        assert any(lo <= x <= hi for x in lsns)  # the range holds an acknowledged record

        assert rows_of(load(fail_on_data_loss="false")) == sorted(kept)
