"""Hostile or careless input: each test pins one behaviour listed in docs/reliability.md."""

from __future__ import annotations

from pathlib import Path

import pytest

from imaginebench.train_cli import run as train_cli

DOCS = Path(__file__).resolve().parents[1] / "docs"


def test_config_class_path_imports_code_as_documented(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    marker = tmp_path / "imported"
    (tmp_path / "sneaky_config_module.py").write_text(
        f"import pathlib\npathlib.Path({str(marker)!r}).touch()\nclass Model:\n    pass\n"
    )
    config = tmp_path / "shared.yaml"
    config.write_text("model:\n  class_path: sneaky_config_module.Model\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(SystemExit):  # Model is no LightningModule: rejected, but only after
        train_cli(["fit", "-c", str(config), "--print_config"])
    assert marker.exists()  # ... its module ran: what docs/training.md warns about
    assert "**A config file is code.**" in (DOCS / "training.md").read_text()
