"""The batch scan's duplicate-id check keeps its memory bounded: past a size its id hashes
spill to partition files, and duplicates are still found across chunks and partitions."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pytest

from judgeq.jobs.reader import IdHashes, scan_jobs_file


def write(path: Path, ids: list[str]) -> Path:
    path.write_text("".join(json.dumps({"id": i, "input": "q", "output": f"a {i}"}) + "\n" for i in ids))
    return path


@pytest.mark.parametrize("spill_at", [10**9, 7, 1])
def test_duplicates_are_found_in_memory_and_across_spilled_chunks(
    spill_at: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(IdHashes, "spill_at", spill_at)
    monkeypatch.setattr(IdHashes, "parts", 4)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "spill"))
    (tmp_path / "spill").mkdir()
    ids = [f"j{i}" for i in range(40)] + ["j3", "j39", "j3"]  # j3 three times, j39 twice
    scan = scan_jobs_file(write(tmp_path / "b.jsonl", ids), "b.jsonl")
    assert scan.valid == 40
    assert sorted(scan.invalid_lines) == [41, 42, 43]
    assert any("duplicate id 'j3' (first on line 4)" in e for e in map(str, scan.errors))
    assert any("duplicate id 'j39' (first on line 40)" in e for e in map(str, scan.errors))
    assert list((tmp_path / "spill").iterdir()) == [], "the spill folder is removed"


def test_id_hashes_spill_and_partition() -> None:
    hashes = IdHashes()
    hashes.spill_at, hashes.parts = 5, 8
    values = [(i * 0x9E3779B97F4A7C15) % 2**64 for i in range(50)]
    for v in [*values, values[0], values[49], values[49]]:
        hashes.add(v)
    assert hashes._folder is not None  # it spilled
    folder = Path(hashes._folder.name)
    assert hashes.duplicates() == {values[0], values[49]}
    assert not folder.exists()
    unspilled = IdHashes()
    for v in (1, 2, 3, 2, 2**64 - 1, 2**64 - 1):
        unspilled.add(v)
    assert unspilled.duplicates() == {2, 2**64 - 1} and unspilled._folder is None
