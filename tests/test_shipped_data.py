"""The imaginary datasets shipped inside the package: checksums, validity, size, configs."""

import json
from pathlib import Path

import numpy as np
import pytest
import yaml

from imaginebench.data.format import load_dataset
from imaginebench.data.shipped import (
    MANIFEST,
    SHIPPED_ROOT,
    resolve_data_path,
    verify_manifest,
    write_manifest,
)
from imaginebench.envs.base import Task

ROOT = Path(__file__).resolve().parents[1]
CLEVR = SHIPPED_ROOT / "clevr"
LEVELS = ("rephrase", "easy", "hard")
SHIPPED_DOMAINS = sorted(d.name for d in SHIPPED_ROOT.iterdir() if (d / MANIFEST).is_file())


def test_clevr_babyai_and_halfcheetah_data_ship():
    assert {"clevr", "babyai", "halfcheetah"} <= set(SHIPPED_DOMAINS)


@pytest.mark.parametrize("domain", SHIPPED_DOMAINS)
def test_manifest_matches_the_shipped_files(domain):
    verify_manifest(SHIPPED_ROOT / domain)
    manifest = json.loads((SHIPPED_ROOT / domain / MANIFEST).read_text())
    assert set(manifest["files"]) == {f"imaginary_{level}.h5" for level in LEVELS}
    total = sum(entry["bytes"] for entry in manifest["files"].values())
    assert total < 8e6, f"shipped data should stay small, got {total / 1e6:.1f} MB"
    for entry in manifest["files"].values():
        assert entry["command"].startswith("imaginebench imagine")
        assert entry["provenance"]["model"] == "smollm2"
        assert entry["provenance"]["adapter_checkpoint_sha256"]


def test_a_tampered_file_fails_verification(tmp_path):
    source = CLEVR / "imaginary_easy.h5"
    (tmp_path / source.name).write_bytes(source.read_bytes())
    write_manifest(tmp_path)
    verify_manifest(tmp_path)
    with open(tmp_path / source.name, "r+b") as f:
        f.seek(-1, 2)
        last = f.read(1)
        f.seek(-1, 2)
        f.write(bytes([last[0] ^ 0xFF]))
    with pytest.raises(ValueError, match="SHA-256"):
        verify_manifest(tmp_path)


@pytest.mark.parametrize("domain", SHIPPED_DOMAINS)
@pytest.mark.parametrize("level", LEVELS)
def test_shipped_imaginary_data_is_valid_and_self_consistent(domain, level):
    dataset = load_dataset(resolve_data_path(f"shipped:{domain}/imaginary_{level}.h5"))
    assert dataset.domain == domain and len(dataset) > 100
    assert set(dataset.episode_source.tolist()) == {1}  # imaginary
    assert dataset.provenance["level"] == level
    # the success flags are the tasks' own judgement of the imagined states
    for i in range(0, len(dataset), max(1, len(dataset) // 50)):
        ep = dataset.episode(i)
        judged = Task.from_spec(ep.task_spec).success(ep.states)[1:]
        assert ep.success == bool(judged.any())
        assert np.isfinite(ep.states).all()


def test_configs_reference_shipped_files_that_exist():
    for config in sorted((ROOT / "configs").rglob("*.yaml")):
        text = yaml.safe_load(config.read_text()) or {}
        paths = (text.get("data", {}).get("init_args", {}) or {}).get("imaginary") or []
        for path in paths:
            if str(path).startswith("shipped:"):
                assert resolve_data_path(path).is_file(), (config, path)
