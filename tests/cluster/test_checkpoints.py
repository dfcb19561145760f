"""Consumer checkpoints: a CheckpointedReader resumes after its last commit, also in the
middle of a BufferedWriter blob and after the whole cluster restarted."""

from __future__ import annotations

import pytest

import logdevice as ld
from logdevice.records import DataRecord

pytestmark = pytest.mark.cluster


def payloads(items) -> list[bytes]:
    return [bytes(i.payload) for i in items if isinstance(i, DataRecord)]


def read_n(reader, n: int) -> list:
    items: list = []
    for _ in range(200):
        items += reader.read(n - len(payloads(items)), timeout=0.5)
        if len(payloads(items)) >= n:
            break
    return items


def test_resume_after_commit_mid_blob_and_across_a_cluster_restart(local_cluster):
    cluster = local_cluster(nodes=3, replication=2, logs=[1, 2])
    with cluster.client(timeout=20.0) as client:
        for i in range(10):
            client.append(1, b"plain %d" % i)
        with client.create_buffered_writer(time_trigger=None) as w:
            w.append_many(1, [b"blob %d" % i for i in range(20)])
        expected = [b"plain %d" % i for i in range(10)] + [b"blob %d" % i for i in range(20)]
        client.append(2, b"other log")

        r = client.create_checkpointed_reader("billing")
        assert r.checkpoints() == {}
        r.start_reading(1)
        first = read_n(r, 15)  # all plain records and the first five of the blob
        assert payloads(first) == expected[:15]
        committed = r.commit()
        assert committed[1] == (first[-1].lsn, 4)
        r.close()

        # Another consumer is independent; a bad name or an unknown log is refused.
        other = client.create_checkpointed_reader("audit")
        assert other.checkpoints() == {}
        other.close()
        with pytest.raises(ld.InvalidParamError):
            client.create_checkpointed_reader("")
        with pytest.raises(ld.NotFoundError):
            client.store_checkpoints("billing", {999: (5, 0)})

    cluster.stop_all()
    for i in range(cluster.n):
        cluster.start(i)

    with ld.Client(cluster.config_path, timeout=20.0) as client:
        r = client.create_checkpointed_reader("billing")
        assert r.checkpoints() == committed
        r.start_reading(1)
        rest = read_n(r, 15)
        assert payloads(rest) == expected[15:]  # mid-blob: nothing twice, nothing lost
        r.commit()
        # Rewind explicitly: everything after the third plain record again.
        lsn3 = [i for i in first if isinstance(i, DataRecord)][2].lsn
        r.commit({1: (lsn3, 0xFFFFFFFF)})
        r.close()
        again = client.create_checkpointed_reader("billing")
        again.start_reading(1)
        assert payloads(read_n(again, 27)) == expected[3:]
        f = again.commit_async()
        assert f.result(20)[1][0] > lsn3
        again.close()
