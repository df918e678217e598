"""Finished-run records: export keeps exactly the finished runs' small files, import checks the
archive whole before writing, refuses to overwrite other runs' files, and never leaves a run
half written. (Through a real grid and the runner's "finished" check: test_benchmark.py.)"""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path

import pytest

from imaginebench.benchmark.records import export_records, import_records, read_records
from imaginebench.cli import main


def _run(out: Path, name: str, settings_hash: str, finished: bool = True) -> Path:
    folder = out / "runs" / name
    (folder / "checkpoints").mkdir(parents=True)
    (folder / "checkpoints" / "last.ckpt").write_bytes(b"\0" * 64)
    (folder / "log.txt").write_text("training...\n")
    (folder / "run.json").write_text(json.dumps({"hash": settings_hash, "fit": ["-c", "x"]}))
    if finished:
        (folder / "results.json").write_text(json.dumps({"levels": {"train": {"success": 0.5}}}))
        (folder / "done.json").write_text(json.dumps({"hash": settings_hash, "seconds": 3.0}))
    return folder


@pytest.fixture
def grid(tmp_path) -> Path:
    out = tmp_path / "grid"
    _run(out, "bc/real/seed0", "h0")
    _run(out, "bc/imaginary-easy/seed0", "h1")
    _run(out, "bc/real/seed1", "h2", finished=False)
    _run(out, "reference/random", "h3")
    (out / "benchmark.yaml").write_text("command: [benchmark]\n")
    return out


def _members(archive: Path) -> list[str]:
    with tarfile.open(archive) as tar:
        return sorted(tar.getnames())


def test_export_keeps_the_finished_runs_small_files_and_nothing_else(grid, tmp_path):
    archive = tmp_path / "records.tar.gz"
    names = export_records(grid, archive)
    assert names == ["bc/imaginary-easy/seed0", "bc/real/seed0", "reference/random"]
    members = _members(archive)
    assert "benchmark.yaml" in members and "records.json" in members
    assert not any("seed1" in m or "ckpt" in m or "log.txt" in m for m in members)
    assert len(members) == 2 + 3 * 3


def test_import_round_trips_and_a_second_import_skips(grid, tmp_path):
    archive = tmp_path / "records.tar.gz"
    export_records(grid, archive)
    target = tmp_path / "elsewhere"
    first = import_records(archive, target)
    assert sorted(first.written) == ["bc/imaginary-easy/seed0", "bc/real/seed0", "reference/random"]
    for run in first.written:
        for name in ("run.json", "done.json", "results.json"):
            source = grid / "runs" / run / name
            assert (target / "runs" / run / name).read_bytes() == source.read_bytes()
    assert (target / "benchmark.yaml").read_text() == "command: [benchmark]\n"
    second = import_records(archive, target)
    assert second.written == [] and len(second.already_finished) == 3


def test_an_interrupted_attempt_is_not_overwritten_without_replace(grid, tmp_path):
    archive = tmp_path / "records.tar.gz"
    export_records(grid, archive)
    target = tmp_path / "elsewhere"
    attempt = _run(target, "bc/real/seed0", "h0", finished=False)  # the same run, killed
    with pytest.raises(ValueError, match="bc/real/seed0.*--replace"):
        import_records(archive, target)
    assert not (target / "runs" / "bc" / "imaginary-easy").exists()  # nothing written at all
    assert (attempt / "checkpoints" / "last.ckpt").is_file()
    outcome = import_records(archive, target, replace=True)
    assert outcome.replaced == ["bc/real/seed0"] and len(outcome.written) == 2
    assert sorted(p.name for p in attempt.iterdir()) == ["done.json", "results.json", "run.json"]


def _rewrite(archive: Path, edit) -> Path:
    """A copy of ``archive`` with ``edit(files)`` applied to its {name: bytes}."""
    with tarfile.open(archive) as tar:
        files = {m.name: tar.extractfile(m).read() for m in tar}
    edit(files)
    changed = archive.with_name("changed.tar.gz")
    with tarfile.open(changed, "w:gz") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return changed


def _bad_results(files):
    files["runs/bc/real/seed0/results.json"] = b'{"levels": {"train": {"success": 0.9}}}'


def _escape(files):
    files["runs/../../done.json"] = b"{}"


def _no_done(files):
    index = json.loads(files["records.json"])
    del files["runs/bc/real/seed0/done.json"]
    del index["sha256"]["runs/bc/real/seed0/done.json"]
    files["records.json"] = json.dumps(index).encode()


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (_bad_results, "does not match its checksum"),
        (_escape, "unexpected member"),
        (_no_done, "lacks one of"),
        (lambda files: files.pop("records.json"), "no records.json"),
    ],
    ids=["tampered", "path-escape", "incomplete-run", "no-checksums"],
)
def test_a_bad_archive_is_rejected_before_anything_is_written(grid, tmp_path, edit, message):
    archive = tmp_path / "records.tar.gz"
    export_records(grid, archive)
    bad = _rewrite(archive, edit)
    with pytest.raises(ValueError, match=message):
        read_records(bad)
    target = tmp_path / "elsewhere"
    with pytest.raises(ValueError):
        import_records(bad, target)
    assert not target.exists()


def test_the_cli_reports_errors_in_one_line(grid, tmp_path, capsys):
    archive = tmp_path / "records.tar.gz"
    assert main(["records", "export", str(grid), str(archive)]) == 0
    assert "3 finished run(s)" in capsys.readouterr().out
    (tmp_path / "not.tar.gz").write_bytes(b"not gzip")
    assert main(["records", "import", str(tmp_path / "not.tar.gz"), str(tmp_path / "t")]) != 0
    assert "not a records archive" in capsys.readouterr().err
    assert main(["records", "export", str(tmp_path / "empty"), str(archive)]) != 0
    assert "no finished run" in capsys.readouterr().err
