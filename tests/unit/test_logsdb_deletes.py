"""LogsDB.delete_records: records vanish from data and every kind of CSI entry, the rest stays."""

import numpy as np
import pytest

from logdevice.storage.flags import FLAG_HOLE
from logdevice.storage.logsdb import LSN_MAX, LogsDB
from tests.unit.test_logsdb import Model, csi_all, csi_of_model, make_batch, read_all, write


@pytest.mark.parametrize("csi_ranges", [True, False])
def test_drop_records_from_blocks_runs_and_singles(tmp_path, csi_ranges):
    rng = np.random.default_rng(3)
    model = Model()
    db = LogsDB(tmp_path / "db", csi_ranges=csi_ranges)
    batch, payloads = make_batch(rng, np.arange(1, 101), t0=0, ragged=False)
    batch["copysets"][:] = [3, 1, 4]
    batch["flags"][:] = 0
    write(db, model, 1, batch, payloads, sticky_block=True)  # a block entry
    batch, payloads = make_batch(rng, np.arange(101, 201), t0=0, ragged=False)
    batch["flags"][:] = 0
    batch["flags"][7] = FLAG_HOLE
    write(db, model, 1, batch, payloads, sticky_block=True)  # a run entry
    sparse = np.sort(rng.choice(np.arange(201, 1000), 100, replace=False))
    batch, payloads = make_batch(rng, sparse, t0=0)
    write(db, model, 1, batch, payloads)
    batch, payloads = make_batch(rng, np.arange(1, 51), t0=0)
    write(db, model, 2, batch, payloads)  # another log, untouched

    victims = [1, 2, 50, 100, 101, 150, int(sparse[0]), int(sparse[-1]), 5000]
    assert db.delete_records(1, victims) == 8
    for v in victims:
        model.logs[1].pop(v, None)
    assert read_all(db, 1) == model.rows(1, 1, LSN_MAX)
    assert csi_all(db, 1) == csi_of_model(model, 1)
    assert read_all(db, 2) == model.rows(2, 1, LSN_MAX)
    db.close()
    with LogsDB(tmp_path / "db", csi_ranges=csi_ranges) as db:
        assert csi_all(db, 1, max_entries=7) == csi_of_model(model, 1)
        assert db.delete_records(1, []) == 0
