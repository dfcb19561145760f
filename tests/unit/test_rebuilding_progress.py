"""A donor's saved progress: what is saved is what a restarted donor resumes from."""

from __future__ import annotations

from pathlib import Path

from logdevice.rebuilding.progress import DonorProgress


def test_saved_progress_is_resumed_for_its_set_only(tmp_path: Path) -> None:
    path = tmp_path / "rebuilding.json"
    p = DonorProgress(7, done_lsn={1: 42, 3: 9}, finished_logs={2}, records=5, bytes=50)
    p.save(path)
    p.done_lsn[1] = 43  # a batch later
    p.save(path)
    again = DonorProgress.load(path, 7)
    assert (again.done_lsn, again.finished_logs, again.records) == ({1: 43, 3: 9}, {2}, 5)
    assert not list(tmp_path.glob("*.tmp"))  # the temporary file was renamed over
    assert DonorProgress.load(path, 8).done_lsn == {}  # another set starts afresh


def test_a_missing_or_damaged_file_starts_afresh(tmp_path: Path) -> None:
    path = tmp_path / "rebuilding.json"
    assert DonorProgress.load(path, 1).done_lsn == {}
    path.write_text("{not json")
    assert DonorProgress.load(path, 1).finished_logs == set()
