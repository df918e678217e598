"""The benchmark runner: the grid, its shards, the settings hash that recognises a finished run,
run states, and tiny grids run end to end through the CLI (skip, rerun, kill and resume)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from imaginebench.benchmark import BenchmarkSpec, Run, expand_grid, load_spec, parse_shard, shard
from imaginebench.benchmark.runs import RunState, run_state

ROOT = Path(__file__).resolve().parents[1]


def _spec(**fields) -> BenchmarkSpec:
    base = {
        "domain": "clevr",
        "algorithms": ["bc", "cql"],
        "seeds": [0, 1],
        "base_dir": str(ROOT / "configs" / "benchmark"),
    }
    return BenchmarkSpec(**{**base, **fields})


def test_grid_expands_algorithms_variants_levels_and_seeds():
    spec = _spec(variants=["real", "imaginary", "oracle"], levels=["easy", "hard"])
    runs = expand_grid(spec)
    # 2 references + 2 algorithms x (real + 2 imaginary levels + 2 oracle levels) x 2 seeds
    assert len(runs) == 2 + 2 * 5 * 2
    assert runs[:2] == [Run("reference", "random", None, 0), Run("reference", "expert", None, 0)]
    assert len({r.name for r in runs}) == len(runs)  # every run has its own folder
    assert Run("cql", "oracle", "hard", 1) in runs
    assert not any(r.variant == "real" and r.level is not None for r in runs)
    assert Run("bc", "imaginary", "easy", 0).name == "bc/imaginary-easy/seed0"


def test_imaginary_all_is_one_run_per_seed_on_every_level_s_imaginary_file():
    spec = _spec(variants=["real", "imaginary_all"], levels=["easy", "hard"])
    runs = [r for r in expand_grid(spec) if not r.is_reference]
    assert Run("bc", "imaginary_all", None, 1) in runs
    assert len(runs) == 2 * 2 * 2  # 2 algorithms x (real, imaginary_all) x 2 seeds
    assert Run("cql", "imaginary_all", None, 0).name == "cql/imaginary_all/seed0"


def test_imaginary_levels_limit_the_imaginary_runs_and_leave_the_oracle_ones():
    """A level whose imagination kept nothing ships no file: its imaginary runs are left out,
    its oracle runs stay, and ``imaginary_all`` reads only the files that exist."""
    spec = _spec(variants=["imaginary", "oracle"], imaginary_levels=["rephrase", "easy"])
    runs = [r for r in expand_grid(spec) if not r.is_reference]
    assert {r.level for r in runs if r.variant == "imaginary"} == {"rephrase", "easy"}
    assert {r.level for r in runs if r.variant == "oracle"} == {"rephrase", "easy", "hard"}
    assert spec.variant_levels("imaginary_all") == ["rephrase", "easy"]
    # --levels still narrows both, in the order of levels
    narrowed = _spec(levels=["easy", "hard"], imaginary_levels=["hard", "rephrase"])
    assert narrowed.variant_levels("imaginary") == ["hard"]
    assert narrowed.variant_levels("oracle") == ["easy", "hard"]
    with pytest.raises(ValueError, match="imaginary_levels"):
        _spec(imaginary_levels=["medium"])
    with pytest.raises(ValueError, match="imaginary_levels must be a list"):
        _spec(imaginary_levels="easy")


@pytest.mark.slow  # resolves a training config in-process
def test_imaginary_all_trains_on_the_imaginary_files_of_all_levels():
    from imaginebench.benchmark.settings import fit_arguments

    spec = _spec(variants=["imaginary_all"], levels=["rephrase", "hard"], ratio=0.2)
    args, oracles = fit_arguments(spec, Run("bc", "imaginary_all", None, 0))
    assert _second_stream(args) == [
        "shipped:clevr/imaginary_rephrase.h5",
        "shipped:clevr/imaginary_hard.h5",
    ]
    assert "--data.init_args.ratio=0.2" in args and oracles == ()
    pooled, _ = fit_arguments(_spec(ratio="pool"), Run("bc", "imaginary", "easy", 0))
    assert "--data.init_args.ratio=pool" in pooled


def _second_stream(args: list[str]) -> list[str]:
    flag = "--data.init_args.imaginary="
    return json.loads(next(a for a in args if a.startswith(flag)).removeprefix(flag))


@pytest.mark.slow  # resolves a training config in-process
def test_oracle_all_collects_and_trains_on_every_level_s_oracle_file():
    from imaginebench.benchmark.settings import fit_arguments, oracle_path, run_settings

    spec = _spec(variants=["oracle", "oracle_all"], levels=["rephrase", "hard"])
    runs = [r for r in expand_grid(spec) if not r.is_reference]
    assert Run("bc", "oracle_all", None, 0) in runs
    assert Run("cql", "oracle_all", None, 1).name == "cql/oracle_all/seed1"
    assert len(runs) == 2 * (2 + 1) * 2  # 2 algorithms x (2 oracle levels + oracle_all) x 2 seeds
    args, oracles = fit_arguments(spec, Run("bc", "oracle_all", None, 0))
    expected = [(lv, oracle_path("clevr", lv, spec.oracle)) for lv in ("rephrase", "hard")]
    assert list(oracles) == expected
    assert _second_stream(args) == [str(path) for _, path in expected]
    one_level = run_settings(spec, Run("bc", "oracle", "hard", 0))
    assert one_level.oracles == (expected[1],)
    assert run_settings(spec, Run("bc", "oracle_all", None, 0)).hash != one_level.hash


def test_shards_partition_the_grid_exactly():
    runs = expand_grid(_spec(seeds=[0, 1, 2]))
    for count in (1, 2, 3, 7, len(runs) + 3):
        parts = [shard(runs, i, count) for i in range(count)]
        flat = [r for part in parts for r in part]
        assert sorted(flat, key=runs.index) == runs  # every run once, none twice
        assert max(map(len, parts)) - min(map(len, parts)) <= 1  # balanced
    assert parse_shard("2/4") == (2, 4)
    for bad in ("4/4", "1", "-1/2", "a/b", "0/0"):
        with pytest.raises(ValueError, match="--shard"):
            parse_shard(bad)


def test_benchmark_files_are_checked(tmp_path):
    spec = load_spec(ROOT / "configs" / "benchmark" / "clevr.yaml", seeds=[5])
    assert spec.seeds == [5] and spec.algorithms[:2] == ["bc", "cql"]
    assert spec.config_path("cql") == (ROOT / "configs" / "cql_clevr.yaml").resolve()
    with pytest.raises(FileNotFoundError, match="no training config for algorithm 'awr'"):
        spec.config_path("awr")
    for fields, message in (
        ({"variants": ["real", "dreamed"]}, "unknown 'dreamed'"),
        ({"levels": ["train"]}, "unknown 'train'"),
        ({"algorithms": "bc"}, "algorithms must be a list of str"),
        ({"seeds": [0, 0]}, "repeats"),
        ({"colour": "red"}, "unknown key"),
        ({"ratio": 2.0}, "ratio must be in"),
        ({"ratio": "half"}, "ratio must be a number in"),
        ({"domain": "atari"}, "unknown domain"),
    ):
        path = tmp_path / "bad.yaml"
        path.write_text(
            yaml.safe_dump({"domain": "clevr", "algorithms": ["bc"], "seeds": [0], **fields})
        )
        with pytest.raises(ValueError, match=message):
            load_spec(path)
    with pytest.raises(FileNotFoundError, match="no such benchmark file"):
        load_spec(tmp_path / "missing.yaml")


def test_references_on_the_command_line_replace_the_file_s():
    from imaginebench.cli import build_parser

    def references(*flags: str) -> list[str]:
        args = build_parser().parse_args(["benchmark", "-c", "x.yaml", *flags])
        spec = load_spec(ROOT / "configs" / "benchmark" / "libero.yaml", references=args.references)
        return [run.variant for run in expand_grid(spec) if run.algorithm == "reference"]

    assert references() == ["random", "expert"]  # the file's
    assert references("--references") == []  # none
    assert references("--references", "random") == ["random"]
    with pytest.raises(ValueError, match="unknown 'oracle'"):
        references("--references", "oracle")


def test_every_domain_with_offline_rl_configs_has_a_grid_over_all_of_them():
    offline: dict[str, set[str]] = {}
    for config in (ROOT / "configs").glob("*_*.yaml"):
        if "modules.offline" in config.read_text():
            algorithm, domain = config.stem.split("_", 1)
            offline.setdefault(domain, set()).add(algorithm)
    assert {"clevr", "babyai", "halfcheetah", "metaworld", "libero"} <= set(offline)
    # real-only beside imaginary data and its oracle upper bound, per level or all levels
    per_level = ["real", "imaginary", "oracle"]
    all_levels = ["real", "imaginary_all", "oracle_all"]
    for domain, algorithms in offline.items():
        spec = load_spec(ROOT / "configs" / "benchmark" / f"{domain}.yaml")
        assert spec.domain == domain and set(spec.algorithms) == algorithms, domain
        assert spec.variants in (per_level, all_levels) and spec.seeds == [0, 1, 2], domain
        assert all(spec.config_path(a).is_file() for a in spec.algorithms)


@pytest.mark.slow  # resolves training configs in-process (imports Lightning and the models)
def test_settings_hash_changes_with_a_setting_and_only_then(tmp_path):
    from imaginebench.benchmark.settings import run_settings

    spec = _spec(variants=["real", "imaginary"], levels=["easy"])
    run = Run("bc", "real", None, 0)
    first = run_settings(spec, run)
    assert run_settings(spec, run).hash == first.hash  # the same settings: the same hash
    moved = _spec(variants=["real", "imaginary"], levels=["easy"], out=str(tmp_path / "elsewhere"))
    assert run_settings(moved, run).hash == first.hash  # where the runs go is no setting
    changed = {
        run_settings(_spec(overrides=["--trainer.max_steps=7"]), run).hash,
        run_settings(_spec(real_episodes=50), run).hash,
        run_settings(spec, Run("bc", "real", None, 1)).hash,  # the seed
        run_settings(spec, Run("cql", "real", None, 0)).hash,  # the algorithm
        run_settings(spec, Run("bc", "imaginary", "easy", 0)).hash,  # the data
        run_settings(_spec(ratio=0.25), Run("bc", "imaginary", "easy", 0)).hash,
    }
    assert first.hash not in changed and len(changed) == 6
    assert (
        "--trainer.max_steps=7"
        in run_settings(_spec(overrides=["--trainer.max_steps=7"]), run).args
    )
    # a named data file is hashed by content: a regenerated file makes its runs new
    imaginary = tmp_path / "imag_easy.h5"
    shipped = ROOT / "imaginebench" / "datasets" / "clevr" / "imaginary_easy.h5"
    imaginary.write_bytes(shipped.read_bytes())
    own = _spec(imaginary=str(tmp_path / "imag_{level}.h5"))
    before = run_settings(own, Run("bc", "imaginary", "easy", 0)).hash
    assert before == run_settings(own, Run("bc", "imaginary", "easy", 0)).hash
    imaginary.write_bytes(shipped.read_bytes() + b"\0")
    assert run_settings(own, Run("bc", "imaginary", "easy", 0)).hash != before
    imaginary.unlink()
    with pytest.raises(FileNotFoundError, match="imag_easy.h5: data file does not exist"):
        run_settings(own, Run("bc", "imaginary", "easy", 0))
    with pytest.raises(ValueError, match="invalid fit arguments"):
        run_settings(_spec(overrides=["--trainer.max_stepz=7"]), run)


def test_oracle_runs_hash_alike_in_any_cache_and_differ_with_the_oracle_s_settings(
    tmp_path, monkeypatch
):
    """Oracle files are collected into the machine's cache: where that is is no setting (a
    finished run's records must match on another machine), how they were collected is."""
    from imaginebench.benchmark.settings import run_settings
    from imaginebench.benchmark.spec import OracleData

    run = Run("bc", "oracle", "easy", 0)
    monkeypatch.setenv("IMAGINEBENCH_CACHE", str(tmp_path / "one"))
    here = run_settings(_spec(variants=["oracle"]), run)
    monkeypatch.setenv("IMAGINEBENCH_CACHE", str(tmp_path / "other"))
    there = run_settings(_spec(variants=["oracle"]), run)
    assert here.oracles[0][1] != there.oracles[0][1]  # collected elsewhere
    assert here.hash == there.hash
    more = _spec(variants=["oracle"], oracle=OracleData(episodes=2000))
    assert run_settings(more, run).hash != here.hash


def test_run_state_finished_resume_or_start(tmp_path):
    run = tmp_path / "run"
    assert run_state(run, "h1") is RunState.START  # never started
    run.mkdir()
    (run / "run.json").write_text(json.dumps({"hash": "h1"}))
    assert run_state(run, "h1") is RunState.START  # interrupted before any checkpoint
    (run / "checkpoints").mkdir()
    (run / "checkpoints" / "last.ckpt").write_bytes(b"x")
    assert run_state(run, "h1") is RunState.RESUME  # interrupted after one
    assert run_state(run, "h2") is RunState.START  # but with other settings: start over
    (run / "done.json").write_text(json.dumps({"hash": "h1"}))
    assert run_state(run, "h1") is RunState.START  # marked done, results missing
    (run / "results.json").write_text("{}")
    assert run_state(run, "h1") is RunState.FINISHED
    assert run_state(run, "h2") is RunState.START  # finished with other settings
    (run / "done.json").write_text("{not json")
    assert run_state(run, "h1") is RunState.RESUME  # a corrupt marker is no marker


def test_a_run_finished_by_another_process_after_planning_is_skipped_not_started_over(tmp_path):
    """Two benchmark processes on one folder: a run the second planned as unstarted, which
    the first finished while the second waited, is skipped when the second reaches it (a
    fresh start would empty the folder and lose the finished results); ``--force`` still
    reruns it."""
    from imaginebench.benchmark.execute import PlannedRun, run_planned

    out = tmp_path / "out"
    run = Run("bc", "real", None, 0)
    directory = run.directory(out)
    job = {"kind": "fit", "args": ["--no-such-option"]}  # fails at once if it is ever started
    planned = PlannedRun(run, directory, "h1", RunState.START, job)
    # after the planning, the other process runs it to the end
    directory.mkdir(parents=True)
    results = {"levels": {"train": {"success_rate": 0.5}}}
    (directory / "results.json").write_text(json.dumps(results))
    (directory / "done.json").write_text(json.dumps({"hash": "h1"}))
    outcome = run_planned([planned], out, progress=False, log=lambda _: None)
    assert outcome.skipped == [run.name] and not outcome.finished and not outcome.failed
    assert json.loads((directory / "results.json").read_text()) == results
    assert not (directory / "log.txt").exists()  # nothing was started

    planned.forced = True  # finished when planned, rerun on request
    outcome = run_planned([planned], out, progress=False, log=lambda _: None)
    assert list(outcome.failed) == [run.name]  # started over: the folder emptied, the job run
    assert not (directory / "results.json").exists()


# -- end to end through the CLI ----------------------------------------------------------------
@pytest.fixture(scope="module")
def tiny_benchmark(tmp_path_factory) -> Path:
    """A folder with tiny BC / CQL configs on 12 collected CLEVR episodes (hidden layer 16,
    3 evaluation episodes per level, a checkpoint every 8 updates) and ``bench.yaml``: BC on
    real and real + imaginary easy, seed 0, no references."""
    from imaginebench.config import load_config_file
    from imaginebench.data.collect import collect
    from imaginebench.data.format import save_dataset

    folder = tmp_path_factory.mktemp("bench")
    dataset, _ = collect("clevr", "train", 12, seed=0, epsilon=0.2, progress=False)
    save_dataset(dataset, folder / "real.h5")
    for algorithm in ("bc", "cql"):
        config = load_config_file(ROOT / "configs" / f"{algorithm}_clevr.yaml")
        config["trainer"]["max_steps"] = 16
        for callback in config["trainer"]["callbacks"]:
            args = callback["init_args"]
            if callback["class_path"].endswith("SuccessRateEvaluation"):
                args.update(every_n_steps=0, test_episodes_per_level=3)
            else:
                args.update(every_n_train_steps=8)
        data = config["data"]["init_args"]
        data.update(real=str(folder / "real.h5"), batch_size=16)
        config["model"]["init_args"]["hidden"] = [16]
        (folder / f"{algorithm}_clevr.yaml").write_text(yaml.safe_dump(config))
    bench = {
        "domain": "clevr",
        "algorithms": ["bc"],
        "seeds": [0],
        "variants": ["real", "imaginary"],
        "levels": ["easy"],
        "references": [],
        "config": "{algorithm}_{domain}.yaml",
        "out": str(folder / "out"),
    }
    (folder / "bench.yaml").write_text(yaml.safe_dump(bench))
    return folder


def _benchmark(
    folder: Path, *args: str, config: str = "bench.yaml", timeout: float = 600
) -> subprocess.CompletedProcess:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    command = [sys.executable, "-m", "imaginebench.cli", "benchmark", "-c", config]
    return subprocess.run(
        [*command, "--quiet", *args],
        check=False,
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.mark.slow
def test_two_run_grid_end_to_end_skips_finished_and_reruns_interrupted(tiny_benchmark):
    out = tiny_benchmark / "out"
    first = _benchmark(tiny_benchmark, "--workers", "2")
    assert first.returncode == 0, first.stdout + first.stderr
    assert "0 finished (skipped), 0 to resume, 2 to start" in first.stdout
    real, imaginary = out / "runs/bc/real/seed0", out / "runs/bc/imaginary-easy/seed0"
    for run in (real, imaginary):
        results = json.loads((run / "results.json").read_text())
        assert results["global_step"] == 16 and set(results["levels"]) == {
            "train",
            "rephrase",
            "easy",
            "hard",
        }
        assert json.loads((run / "done.json").read_text())["hash"]
    used = json.loads((imaginary / "results.json").read_text())["data_used"]["imaginary"]
    assert used[0]["file"].endswith("imaginary_easy.h5") and used[0]["found"]
    assert json.loads((real / "results.json").read_text())["data_used"]["imaginary"] == []
    stamps = {run: (run / "results.json").stat().st_mtime_ns for run in (real, imaginary)}

    again = _benchmark(tiny_benchmark)
    assert "2 finished (skipped), 0 to resume, 0 to start" in again.stdout, again.stdout
    assert {run: (run / "results.json").stat().st_mtime_ns for run in stamps} == stamps

    # the real run as if killed before its completion marker and before any checkpoint
    (real / "done.json").unlink()
    for checkpoint in (real / "checkpoints").iterdir():
        checkpoint.unlink()
    rerun = _benchmark(tiny_benchmark)
    assert rerun.returncode == 0, rerun.stdout + rerun.stderr
    assert "1 finished (skipped), 0 to resume, 1 to start" in rerun.stdout
    assert (real / "done.json").is_file()
    assert (real / "results.json").stat().st_mtime_ns != stamps[real]  # run again
    assert (imaginary / "results.json").stat().st_mtime_ns == stamps[imaginary]  # skipped

    report = subprocess.run(
        [sys.executable, "-m", "imaginebench.cli", "report", str(out), "--bootstrap-reps", "200"],
        check=False,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert report.returncode == 0, report.stderr
    table = (out / "report" / "results.md").read_text()
    assert "| DiscreteBC | real |" in table and "| DiscreteBC | real + imaginary |" in table


@pytest.mark.slow
def test_a_killed_benchmark_takes_its_runs_along_and_resumes_them(tiny_benchmark, tmp_path):
    bench = yaml.safe_load((tiny_benchmark / "bench.yaml").read_text())
    bench.update(variants=["real"], seeds=[3], out=str(tmp_path / "out"))
    # a checkpoint every 8 updates: the kill comes right after the first, 192 updates before the end
    bench["overrides"] = ["--trainer.max_steps=200"]
    # its own grid file: the module's bench.yaml stays as the other tests expect it, in any order
    (tiny_benchmark / "killed.yaml").write_text(yaml.safe_dump(bench))
    run = tmp_path / "out" / "runs" / "bc" / "real" / "seed3"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    command = [
        sys.executable,
        "-m",
        "imaginebench.cli",
        "benchmark",
        "-c",
        "killed.yaml",
        "--quiet",
    ]
    parent = subprocess.Popen(command, cwd=tiny_benchmark, env=env, stdout=subprocess.DEVNULL)
    try:
        deadline = time.time() + 300
        while not list((run / "checkpoints").glob("last*.ckpt")):
            assert parent.poll() is None and time.time() < deadline, "no checkpoint appeared"
            time.sleep(0.1)
        child = json.loads((run / "run.json").read_text())["attempts"][-1]["pid"]
        parent.kill()  # SIGKILL: no chance to stop its runs itself
        parent.wait()
        deadline = time.time() + 60
        while _alive(child):  # the run's process follows its benchmark process
            assert time.time() < deadline, "the run outlived its benchmark process"
            time.sleep(0.5)
    finally:
        if parent.poll() is None:
            parent.kill()
    assert not (run / "done.json").exists()
    resumed = _benchmark(tiny_benchmark, config="killed.yaml")
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert "0 finished (skipped), 1 to resume, 0 to start" in resumed.stdout
    done = json.loads((run / "done.json").read_text())
    assert done["attempts"] == 2
    assert "Restored all states from the checkpoint" in (run / "log.txt").read_text()
    assert json.loads((run / "results.json").read_text())["global_step"] == 200


@pytest.mark.slow
def test_exported_records_make_another_folder_s_runs_finished(tiny_benchmark, tmp_path):
    """The records of a finished run, imported into an empty folder (another machine, a wiped
    one), are what the runner and the report need: the run is skipped there and reported.
    ``benchmark --records`` keeps the same archive up to date as runs finish."""
    from imaginebench.benchmark.records import read_records

    bench = yaml.safe_load((tiny_benchmark / "bench.yaml").read_text())
    bench.update(variants=["real"], seeds=[5], out=str(tmp_path / "first"))
    (tiny_benchmark / "records_first.yaml").write_text(yaml.safe_dump(bench))
    bench["out"] = str(tmp_path / "second")
    (tiny_benchmark / "records_second.yaml").write_text(yaml.safe_dump(bench))
    live = tmp_path / "live.tar.gz"
    ran = _benchmark(tiny_benchmark, "--records", str(live), config="records_first.yaml")
    assert ran.returncode == 0, ran.stdout + ran.stderr
    cli = [sys.executable, "-m", "imaginebench.cli", "records"]
    archive = tmp_path / "records.tar.gz"
    for step in (
        ["export", str(tmp_path / "first"), str(archive)],
        ["import", str(live), str(tmp_path / "second")],
    ):
        done = subprocess.run([*cli, *step], capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stdout + done.stderr
        if step[0] == "export":
            assert read_records(live) == read_records(archive)  # the same files, byte for byte
    again = _benchmark(tiny_benchmark, config="records_second.yaml")
    assert "1 finished (skipped), 0 to resume, 0 to start" in again.stdout, again.stdout
    assert not (tmp_path / "second" / "runs" / "bc" / "real" / "seed5" / "checkpoints").exists()
    report = subprocess.run(
        [
            sys.executable,
            "-m",
            "imaginebench.cli",
            "report",
            str(tmp_path / "second"),
            "--bootstrap-reps",
            "100",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert report.returncode == 0, report.stderr
    assert "| DiscreteBC | real |" in (tmp_path / "second" / "report" / "results.md").read_text()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as f:  # a zombie has exited
        return f.read().split(") ")[1][0] != "Z"


def test_the_grid_record_keeps_every_command_that_ran_into_the_folder(tmp_path):
    """A folder extended by a second command (and resumed by the first again) records both,
    oldest first, and the newest as ``command`` (the report's header names them all)."""
    import yaml

    from imaginebench.benchmark import write_grid_record

    spec = _spec(out=str(tmp_path / "grid"))
    first = ["imaginebench", "benchmark", "--algorithms", "bc"]
    second = ["imaginebench", "benchmark", "--algorithms", "cql"]
    for command in (first, second, first):
        path = write_grid_record(spec, command)
    record = yaml.safe_load(path.read_text())
    assert record["commands"] == [first, second] and record["command"] == first
    (tmp_path / "grid" / "benchmark.yaml").write_text(yaml.safe_dump({"command": first}))
    write_grid_record(spec, second)  # a record from before ``commands`` existed
    assert yaml.safe_load(path.read_text())["commands"] == [first, second]
