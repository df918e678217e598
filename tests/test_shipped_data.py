"""The datasets shipped inside the package (imaginary ones, and LIBERO's real data, slow to
collect): checksums, validity, size, configs."""

import json
from pathlib import Path

import numpy as np
import pytest
import yaml

from imaginebench.data.format import load_dataset, save_dataset
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
IMAGINARY = [
    (domain, level)
    for domain in SHIPPED_DOMAINS
    for level in LEVELS
    if (SHIPPED_ROOT / domain / f"imaginary_{level}.h5").is_file()
]


def test_imaginary_data_of_five_domains_and_libero_real_data_ship():
    # every novel level of every domain (Meta-World's hard file, shipped 2026-12-06, replays to
    # success in 0.6 % of its rollouts: docs/metaworld.md)
    for domain in ("clevr", "babyai", "halfcheetah", "metaworld", "libero"):
        assert {(domain, level) for level in LEVELS} <= set(IMAGINARY), domain
    assert (SHIPPED_ROOT / "libero" / "real_train.h5").is_file()


def test_shipped_libero_real_data_is_the_experts_and_judged_by_the_tasks():
    dataset = load_dataset(resolve_data_path("shipped:libero/real_train.h5"))
    assert dataset.domain == "libero" and len(dataset) >= 300
    assert set(dataset.episode_source.tolist()) == {0}  # real
    assert dataset.provenance["level"] == "train"
    tasks = {Task.from_spec(dataset.episode(i).task_spec).spec() for i in range(len(dataset))}
    assert len(tasks) == 6  # pick and place of each of the three objects
    for i in range(len(dataset)):
        ep = dataset.episode(i)
        assert ep.success == bool(Task.from_spec(ep.task_spec).success(ep.states)[1:].any())
    assert dataset.episode_success.mean() > 0.85


@pytest.mark.slow  # two LIBERO expert episodes, about 20 s
def test_shipped_libero_real_data_is_what_its_command_collects():
    pytest.importorskip("libero")
    from imaginebench.data.collect import collect

    shipped = load_dataset(resolve_data_path("shipped:libero/real_train.h5"))
    p = shipped.provenance
    again, _ = collect(
        "libero",
        p["level"],
        2,
        seed=p["seed"],
        # files collected before provenance recorded epsilon name it only in the generator
        epsilon=float(p.get("epsilon", p["generator"].split("epsilon=")[1].rstrip(")"))),
        paraphrases=p["paraphrases"],
        progress=False,
    )
    # MuJoCo's floating point differs between CPUs: on one machine the first episode's reset
    # already differs by 0.2 mm and its actions by 2e-3 (the expert closes the loop on the state),
    # while another seed moves the objects by decimetres; so the layout, the instruction, the
    # length and the outcome must match exactly, the trajectory to a millimetre.
    for i in range(2):
        a, b = shipped.episode(i), again.episode(i)
        assert a.instruction == b.instruction and a.task_spec == b.task_spec
        assert len(a.actions) == len(b.actions) and a.success == b.success
        np.testing.assert_allclose(a.actions, b.actions, atol=1e-2)
        np.testing.assert_allclose(a.states, b.states, atol=1e-3)


@pytest.mark.parametrize("domain", SHIPPED_DOMAINS)
def test_manifest_matches_the_shipped_files(domain):
    verify_manifest(SHIPPED_ROOT / domain)
    manifest = json.loads((SHIPPED_ROOT / domain / MANIFEST).read_text())
    names = {f"imaginary_{level}.h5" for level in LEVELS} | {"real_train.h5"}
    assert manifest["files"] and set(manifest["files"]) <= names
    total = sum(entry["bytes"] for entry in manifest["files"].values())
    assert total < 8e6, f"shipped data should stay small, got {total / 1e6:.1f} MB"
    for name, entry in manifest["files"].items():
        if name.startswith("imaginary_"):
            assert entry["command"].startswith("imaginebench imagine")
            assert entry["provenance"]["model"] == "smollm2"
            assert entry["provenance"]["adapter_checkpoint_sha256"]
        else:  # real data: the collect command that writes it to its shipped place
            assert entry["command"].startswith(f"imaginebench collect --domain {domain} ")
            assert f"--out imaginebench/datasets/{domain}/{name}" in entry["command"]


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


@pytest.mark.parametrize("domain,level", IMAGINARY)
def test_shipped_imaginary_data_is_valid_and_self_consistent(domain, level):
    path = resolve_data_path(f"shipped:{domain}/imaginary_{level}.h5")
    dataset = load_dataset(path)
    listed = json.loads((path.parent / "MANIFEST.json").read_text())["files"][path.name]
    assert dataset.domain == domain and len(dataset) == listed["episodes"] > 0
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
        data = text.get("data", {}).get("init_args", {}) or {}
        paths = [*(data.get("imaginary") or []), *([data["real"]] if data.get("real") else [])]
        for path in paths:
            if str(path).startswith("shipped:"):
                assert resolve_data_path(path).is_file(), (config, path)


def test_relabel_judges_episodes_again_and_records_it(tmp_path, capsys):
    """A stale success flag (the task's judge changed) is recomputed from the states; states,
    actions and rewards stay; the relabelling is in the provenance and the regeneration command."""
    import dataclasses

    from imaginebench.cli import main
    from imaginebench.data.dataset import RolloutDataset

    source = load_dataset(resolve_data_path("shipped:clevr/imaginary_easy.h5"))
    episodes = [source.episode(i) for i in range(6)]
    wrong = [
        dataclasses.replace(e, success=not e.success, terminated=not e.success, truncated=e.success)
        for e in episodes[:2]
    ]
    stale = RolloutDataset.from_episodes(
        wrong + episodes[2:],
        domain="clevr",
        action_spec=source.action_spec,
        provenance=source.provenance,
    )
    path = tmp_path / "imaginary_easy.h5"
    save_dataset(stale, path)
    assert main(["relabel", str(path), "--reason", "judge changed"]) == 0
    assert "2 of 6 episodes relabelled" in capsys.readouterr().out
    fixed = load_dataset(path)
    for i, ep in enumerate(episodes):
        again = fixed.episode(i)
        assert again.success == ep.success and again.terminated == ep.terminated
        np.testing.assert_array_equal(again.states, ep.states)
        np.testing.assert_array_equal(again.rewards, ep.rewards)
    assert fixed.provenance["relabelled"][-1]["changed_episodes"] == 2
    manifest = write_manifest(tmp_path)
    assert "imaginebench relabel" in manifest["files"][path.name]["command"]


def test_relabel_can_drop_what_no_longer_succeeds_and_recomputes_rewards(tmp_path, capsys):
    """BabyAI put-next judged by the verifier's rule (object 1 moved): an imagined episode that
    carried object 2 over is relabelled unsuccessful and, with --drop-unsuccessful, removed;
    the rest keep their states, success and the rewards the reward function gives them."""
    from imaginebench.cli import main
    from imaginebench.data.dataset import Episode, RolloutDataset
    from imaginebench.data.shipped import _regenerate_command
    from imaginebench.envs.babyai.env import episode_rewards
    from imaginebench.envs.babyai.tasks import PutNext
    from imaginebench.envs.babyai.world import compose_state

    task = PutNext("ball", "red", "box", "green")

    def layout(ball, box, agent, carried=None):
        return compose_state(
            ball=("red", *ball),
            box=("green", *box),
            key=("blue", 5, 2),
            door=("purple", 3, 1),
            agent=agent,
            carried=carried,
        )

    moved_ball = np.stack(
        [
            layout((2, 2), (4, 5), (2, 2)),
            layout((2, 2), (4, 5), (2, 2), "ball"),
            layout((0, 0), (4, 5), (4, 4), "ball"),
            layout((4, 4), (4, 5), (4, 4)),
        ]
    )
    moved_box = np.stack(
        [
            layout((2, 2), (4, 5), (4, 5)),
            layout((2, 2), (0, 0), (4, 5), "box"),
            layout((2, 2), (0, 0), (2, 3), "box"),
            layout((2, 2), (2, 3), (2, 3)),
        ]
    )
    episodes = [
        Episode(
            states=s.astype(np.float32),
            actions=np.array(a),
            rewards=np.ones(3, np.float32),
            terminated=True,
            truncated=False,
            instruction="put the red ball next to the green box",
            task_spec=task.spec(),
            level="rephrase",
            source="imaginary",
            success=True,
        )
        for s, a in ((moved_ball, [3, 6, 4]), (moved_box, [3, 2, 4]))
    ]
    path = tmp_path / "imaginary_rephrase.h5"
    save_dataset(
        RolloutDataset.from_episodes(
            episodes,
            domain="babyai",
            action_spec={"type": "discrete", "n": 7},
            provenance={"level": "rephrase"},
        ),
        path,
    )
    args = ["relabel", str(path), "--reason", "put-next", "--drop-unsuccessful"]
    assert main(args) == 0
    assert "1 of 2 episodes relabelled, 1 dropped" in capsys.readouterr().out
    fixed = load_dataset(path)
    assert len(fixed) == 1 and fixed.episode(0).success
    np.testing.assert_array_equal(fixed.episode(0).states, moved_ball.astype(np.float32))
    np.testing.assert_allclose(fixed.episode(0).rewards, episode_rewards(task, moved_ball))
    assert fixed.provenance["relabelled"][-1]["dropped_unsuccessful"] == 1
    provenance = {"level": "rephrase", "rollouts_requested": 2, "seed": 0, **fixed.provenance}
    command = _regenerate_command(provenance, "babyai", path.name)
    assert command.endswith(
        "relabel imaginebench/datasets/babyai/imaginary_rephrase.h5 "
        '--reason "put-next" --drop-unsuccessful'
    )


def test_the_regeneration_command_names_the_checkpoint_and_the_state_model():
    """A manifest's command reproduces the file: the adapter checkpoint it was imagined with,
    and the state model (the LM's own head too: a config may name another)."""
    from imaginebench.data.shipped import _regenerate_command

    provenance = {
        "level": "hard",
        "rollouts_requested": 500,
        "seed": 0,
        "decoding": {"strategy": "sample"},
        "adapter_checkpoint": "runs/grounding_clevr/checkpoints/best.ckpt",
        "state_model": {"ensemble": {"real": "r.h5"}},
    }
    command = _regenerate_command(provenance, "clevr", "imaginary_hard.h5")
    assert "--checkpoint runs/grounding_clevr/checkpoints/best.ckpt " in command
    assert "--filters" not in command and "--ensemble" not in command  # none recorded
    # the filters and the ensemble's settings the file was made with, whatever the config says
    filters = {"best_of": 4, "coverage_rounds": 3, "require_success": True}
    settings = {"nll_beta": 1.0, "hidden": [256, 256, 256]}
    exact = _regenerate_command(
        {
            **provenance,
            "filters": filters,
            "state_model": {"ensemble": {"ensemble": settings, "real": "r.h5"}},
        },
        "clevr",
        "imaginary_hard.h5",
    )
    recorded = json.loads(exact.split("--filters '")[1].split("'")[0])
    assert {k: recorded[k] for k in filters} == filters
    assert recorded["best_by"] == "likelihood"  # not recorded: the default, not the config's
    # settings recorded before still_measured_on existed were made with the rule of then
    then = {"still_measured_on": "all", **settings}
    assert f"--ensemble '{json.dumps(then, sort_keys=True)}' " in exact
    now = {**settings, "still_measured_on": "in_use"}
    assert f"--ensemble '{json.dumps(now, sort_keys=True)}' " in _regenerate_command(
        {**provenance, "state_model": {"ensemble": {"ensemble": now, "real": "r.h5"}}},
        "clevr",
        "imaginary_hard.h5",
    )
    staged = {**provenance, "decoding": {"strategy": "greedy", "stage_tasks": "lm"}}
    assert "--decoding.stage_tasks lm " in _regenerate_command(staged, "metaworld", "x.h5")
    assert "--state_model ensemble " in command
    assert command.endswith("--out imaginebench/datasets/clevr/imaginary_hard.h5 --overwrite true")
    assert "--state_model lm " in _regenerate_command(
        {**provenance, "state_model": "lm"}, "clevr", "imaginary_hard.h5"
    )
    assert "--state_model" not in _regenerate_command(  # files from before it was recorded
        {k: v for k, v in provenance.items() if k != "state_model"}, "clevr", "imaginary_hard.h5"
    )
