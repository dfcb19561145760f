"""The sequencer's STORE columns (``ldcore.storecols``): a STORE_LOGS of one-record
STOREs built in one call carries, part by part, what each STORE alone would."""

from __future__ import annotations

import pytest

from ldcore.checksum import crc32c
from ldcore.storecols import store_columns, store_logs_columns
from logdevice.protocol import RecordFlag
from logdevice.sequencer import StoreWave

CHECKSUM = int(RecordFlag.CHECKSUM)


def _wave(log_id: int, lsn: int, copyset: tuple[int, ...], flags: int = 0,
          lng: int = 0) -> StoreWave:
    return StoreWave(log_id, lsn, 1 + lsn % 3, copyset, 1_700_000_000_000 + lsn, flags, lng,
                     ("rid", log_id))


@pytest.mark.parametrize("flagged", [False, True])
def test_one_record_stores_of_many_logs_at_once(flagged):
    waves = [_wave(7, (3 << 32) | 1, (0, 1), CHECKSUM if flagged else 0, lng=0),
             _wave(2, (5 << 32) | 9, (2, 0, 1), lng=(5 << 32) | 8),
             _wave(7, (4 << 32) | 1, (1,), lng=5)]  # a log may come twice (two epochs)
    entries = [(b"first", crc32c(b"first")), (memoryview(b"second"), crc32c(b"second")),
               (b"", 0)]
    lsns, ts, flags, wv, cs, offs, payloads, crcs, log_ids, lngs = store_logs_columns(
        waves, entries, CHECKSUM)
    assert log_ids.tolist() == [7, 2, 7]
    assert lngs.tolist() == [0, (5 << 32) | 8, 5]
    assert offs.tolist() == [0, 5, 11, 11] and bytes(payloads) == b"firstsecond"
    assert cs.tolist() == [[0, 1, -1], [2, 0, 1], [1, -1, -1]]
    # Part by part, what store_columns gives the STORE of that wave alone.
    for i, (w, e) in enumerate(zip(waves, entries, strict=True)):
        one = store_columns([w], [e], CHECKSUM)
        assert lsns[i] == one[0][0] and ts[i] == one[1][0] and flags[i] == one[2][0]
        assert wv[i] == one[3][0]
        assert cs[i, :one[4].shape[1]].tolist() == one[4][0].tolist()
        assert bytes(payloads)[offs[i]:offs[i + 1]] == bytes(one[6])
        assert lngs[i] == one[8]
    if flagged:
        assert crcs.tolist() == [e[1] for e in entries]
    else:
        assert len(crcs) == 0  # no record asks for a checksum: none sent


def test_one_entry_per_wave():
    with pytest.raises(ValueError):
        store_logs_columns([_wave(1, 1, (0,))], [], CHECKSUM)
    with pytest.raises(ValueError):
        store_logs_columns([], [], CHECKSUM)
