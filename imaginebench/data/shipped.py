"""Datasets shipped inside the package (``imaginebench/datasets``) and their manifests.

Configs name a shipped file as ``shipped:<domain>/<file>`` (e.g.
``shipped:clevr/imaginary_hard.h5``); :func:`resolve_data_path` maps it to the installed copy.
Every shipped directory has a ``MANIFEST.json`` with each file's SHA-256, size, contents and the
command that regenerates it (``imaginebench manifest <dir>`` rewrites it).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from imaginebench.atomic import write_text_atomically
from imaginebench.data.hdf5 import load_dataset

SHIPPED_PREFIX = "shipped:"
SHIPPED_ROOT = Path(__file__).resolve().parents[1] / "datasets"
MANIFEST = "MANIFEST.json"


def resolve_data_path(path: str | Path) -> Path:
    """``shipped:<domain>/<file>`` -> the package's copy; any other path unchanged."""
    text = str(path)
    if text.startswith(SHIPPED_PREFIX):
        return SHIPPED_ROOT / text[len(SHIPPED_PREFIX) :]
    return Path(text)


def file_sha256(path: str | Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _regenerate_command(provenance: dict[str, Any], domain: str, name: str) -> str:
    decoding = provenance.get("decoding", {})
    out = f"imaginebench/datasets/{domain}/{name}"
    command = (
        f"imaginebench imagine -c configs/imagine_{domain}.yaml --level {provenance['level']} "
        f"--rollouts {provenance['rollouts_requested']} --seed {provenance['seed']} "
        f"--decoding.strategy {decoding.get('strategy', 'greedy')} "
    )
    if decoding.get("guidance", 1.0) != 1.0:  # instruction guidance (1: none)
        command += f"--decoding.guidance {decoding['guidance']} "
    if decoding.get("guidance_reference", "empty") != "empty":
        command += f"--decoding.guidance_reference {decoding['guidance_reference']} "
    if decoding.get("stage_tasks", "off") != "off":
        command += f"--decoding.stage_tasks {decoding['stage_tasks']} "
    if provenance.get("adapter_checkpoint"):
        command += f"--checkpoint {provenance['adapter_checkpoint']} "
    if provenance.get("filters"):  # exactly the file's (every field), whatever the config says
        from dataclasses import asdict

        from imaginebench.imagination.filters import FilterConfig

        filters = asdict(FilterConfig(**provenance["filters"]))  # steps added since: defaults
        command += f"--filters '{json.dumps(filters, sort_keys=True)}' "
    if provenance.get("state_model") == "lm":  # the LM's own state head, whatever the config says
        command += "--state_model lm "
    elif isinstance(provenance.get("state_model"), dict):  # a fitted model
        name, fitted = next(iter(provenance["state_model"].items()))
        command += f"--state_model {name} "
        # its settings (the slot model's, then the ensemble's that gave its context)
        for part in dict.fromkeys([name, "ensemble"]):
            if isinstance(fitted, dict) and isinstance(fitted.get(part), dict):
                settings = fitted[part]
                if part == "ensemble":  # recorded before the setting existed: the rule then
                    settings = {"still_measured_on": "all", **settings}
                command += f"--{part} '{json.dumps(settings, sort_keys=True)}' "
    if isinstance(provenance.get("lookahead"), dict):  # the search before each action
        command += f"--lookahead '{json.dumps(provenance['lookahead'], sort_keys=True)}' "
    if provenance.get("ensemble_real"):  # the ensemble's own real data
        command += f"--ensemble_real {provenance['ensemble_real']} "
    command += f"--out {out} --overwrite true"
    steps = [*provenance.get("earlier_post_filters", []), provenance.get("post_filter")]
    for refiltered in filter(None, steps):  # imaginebench refilter, in place, in order
        command += f" && imaginebench refilter {out} --out {out} --overwrite"
        if refiltered.get("erase_loops"):
            command += " --erase-loops"
        if refiltered.get("max_progress_drop") is not None:
            command += f" --max-progress-drop {refiltered['max_progress_drop']}"
        if refiltered.get("min_confidence") is not None:
            command += f" --min-confidence {refiltered['min_confidence']}"
        if family := refiltered.get("family_horizon"):
            command += (
                f" --family-horizon {family['real']} --quantile {family['quantile']} "
                f"--scale {family['scale']}"
            )
        if refiltered.get("max_per_task") is not None:
            command += f" --max-per-task {refiltered['max_per_task']}"
    for step in provenance.get("relabelled", []):
        command += f" && imaginebench relabel {out} --reason {json.dumps(step['reason'])}"
        if "dropped_unsuccessful" in step:
            command += " --drop-unsuccessful"
    return command


def _collect_command(provenance: dict[str, Any], domain: str, name: str) -> str | None:
    """The ``imaginebench collect`` command line a real dataset's provenance records, writing
    to its shipped place; ``None`` if it was not made by that command."""
    args = str(provenance.get("command", "")).split()
    if "collect" not in args:
        return None
    rest = args[args.index("collect") + 1 :]
    if "--out" in rest[:-1]:
        rest[rest.index("--out") + 1] = f"imaginebench/datasets/{domain}/{name}"
    return " ".join(["imaginebench collect", *rest])


def write_manifest(directory: str | Path) -> dict[str, Any]:
    """(Re)write ``MANIFEST.json`` for the ``.h5`` files of ``directory``; return it.

    Raises ``FileNotFoundError`` for a missing directory and ``ValueError`` for one without
    ``.h5`` files (a mistyped path must not become an empty manifest)."""
    directory = Path(directory)
    if not directory.is_dir():
        raise FileNotFoundError(f"{directory}: no such directory")
    paths = sorted(directory.glob("*.h5"))
    if not paths:
        raise ValueError(f"{directory}: no .h5 dataset files to list in a {MANIFEST}")
    files = {}
    for path in paths:
        dataset = load_dataset(path)
        provenance = dataset.provenance
        entry: dict[str, Any] = {
            "sha256": file_sha256(path),
            "bytes": path.stat().st_size,
            "episodes": len(dataset),
            "transitions": dataset.num_transitions,
            "success_rate": round(float(dataset.episode_success.mean()), 4),
            "provenance": provenance,
        }
        if provenance.get("generator") == "imaginebench imagine":
            entry["command"] = _regenerate_command(provenance, dataset.domain, path.name)
        elif command := _collect_command(provenance, dataset.domain, path.name):
            entry["command"] = command
        files[path.name] = entry
    manifest = {"files": files}
    write_text_atomically(directory / MANIFEST, json.dumps(manifest, indent=2) + "\n")
    return manifest


def verify_manifest(directory: str | Path) -> None:
    """Raise ``ValueError`` if a file is missing or differs from its manifest checksum."""
    directory = Path(directory)
    manifest = json.loads((directory / MANIFEST).read_text())
    for name, entry in manifest["files"].items():
        path = directory / name
        if not path.is_file():
            raise ValueError(f"{path}: listed in {MANIFEST} but missing")
        if file_sha256(path) != entry["sha256"]:
            raise ValueError(f"{path}: SHA-256 differs from {MANIFEST}")
