"""The ``imaginebench`` command line.

``imaginebench fit|validate|test -c CONFIG`` trains and scores (LightningCLI); ``collect``,
``info``, ``import-kalm``, ``import-libero`` and ``export-minari`` / ``import-minari`` manage
datasets; ``render`` draws an episode as a GIF or MP4; ``imagine`` writes imaginary datasets and
``score-imaginary`` adds confidence to them, ``refilter`` applies filter steps to them again;
``benchmark -c FILE`` runs a grid of fits and
``report RUNS_DIR`` tabulates and plots it.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from imaginebench.atomic import check_output_path
from imaginebench.envs.base import LEVELS


def _collect(args: argparse.Namespace) -> int:
    from imaginebench.data.collect import collect
    from imaginebench.data.format import save_dataset

    out = check_output_path(args.out, args.overwrite)
    dataset, stats = collect(
        args.domain,
        args.level,
        args.episodes,
        args.seed,
        epsilon=args.epsilon,
        paraphrases=args.paraphrases,
        progress=not args.quiet,
        workers=args.workers,
    )
    save_dataset(dataset, out, overwrite=args.overwrite)
    print(stats)
    print(f"wrote {out}")
    print(dataset.summary())
    return 0


def _info(args: argparse.Namespace) -> int:
    from imaginebench.data.format import load_dataset

    for path in args.paths:
        print(load_dataset(path, nonfinite="drop" if args.drop_nonfinite else "raise").summary())
    return 0


def _import_kalm(args: argparse.Namespace) -> int:
    from imaginebench.data.format import save_dataset

    check_output_path(args.out, args.overwrite)
    if args.domain == "metaworld":
        from imaginebench.data.importers.metaworld import import_metaworld

        dataset, report = import_metaworld(
            args.source,
            level=args.level,
            source=args.as_source,
            instruction=args.instruction,
            companion=args.companion,
            keep_distractor=args.keep_distractor,
        )
        print(report.summary())
    else:
        from imaginebench.data.importers.kalm import import_kalm_clevr

        if args.keep_distractor:
            raise SystemExit("--keep-distractor applies to --domain metaworld only")
        dataset = import_kalm_clevr(
            args.source,
            level=args.level or "train",
            source=args.as_source,
            instruction=args.instruction,
            companion=args.companion,
        )
    save_dataset(dataset, args.out, overwrite=args.overwrite)
    print(f"wrote {args.out}")
    print(dataset.summary())
    return 0


def _import_libero(args: argparse.Namespace) -> int:
    from imaginebench.data.format import save_dataset
    from imaginebench.data.importers.libero import import_libero

    check_output_path(args.out, args.overwrite)
    dataset = import_libero(
        args.source, level=args.level, source=args.as_source, instruction=args.instruction
    )
    save_dataset(dataset, args.out, overwrite=args.overwrite)
    print(f"wrote {args.out}")
    print(dataset.summary())
    return 0


def _export_minari(args: argparse.Namespace) -> int:
    from imaginebench.data.format import load_dataset
    from imaginebench.data.minari_io import (
        MinariMissingError,
        default_datasets_root,
        export_minari,
    )
    from imaginebench.data.shipped import resolve_data_path

    root = Path(args.out if args.out is not None else default_datasets_root())
    root = root.expanduser().absolute()
    try:
        path = resolve_data_path(args.file)
        target = export_minari(
            load_dataset(path),
            root,
            dataset_id=args.dataset_id,
            env_level=args.env_level,
            overwrite=args.overwrite,
            source_name=str(path),
        )
    except MinariMissingError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    dataset_id = target.relative_to(root).as_posix()
    print(f"wrote Minari dataset {dataset_id} to {target}")
    print(f"minari.load_dataset({dataset_id!r}) finds it with MINARI_DATASETS_PATH={root}")
    return 0


def _import_minari(args: argparse.Namespace) -> int:
    from imaginebench.data.format import save_dataset
    from imaginebench.data.minari_io import MinariMissingError, import_minari

    out = check_output_path(args.out, args.overwrite)
    try:
        dataset = import_minari(args.dataset, args.root)
    except MinariMissingError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    save_dataset(dataset, out, overwrite=args.overwrite)
    print(f"wrote {out}")
    print(dataset.summary())
    return 0


def _render(args: argparse.Namespace) -> int:
    from imaginebench.video import (
        VideoEncoderMissing,
        check_video_format,
        render_dataset_episode,
        write_video,
    )

    out = check_output_path(args.out, args.overwrite)
    try:
        check_video_format(out)
    except VideoEncoderMissing as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    frames, fps = render_dataset_episode(
        args.file,
        args.episode,
        args.height,
        args.width,
        drop_nonfinite=args.drop_nonfinite,
        every=args.every,
    )
    write_video(frames, out, args.fps or fps)
    print(f"wrote {out}: {len(frames)} frames of {frames.shape[2]}x{frames.shape[1]}")
    return 0


def _relabel(args: argparse.Namespace) -> int:
    import json

    from imaginebench.atomic import write_text_atomically
    from imaginebench.data.format import load_dataset, save_dataset
    from imaginebench.data.relabel import relabel_success
    from imaginebench.imagination.quality import quality_report

    for name in args.paths:
        path = Path(name)
        before = load_dataset(path)
        dataset, changed = relabel_success(before, args.reason, args.drop_unsuccessful)
        save_dataset(dataset, path, overwrite=True)
        report_path = path.with_suffix(".quality.json")
        if report_path.is_file():  # its consistency is the success flags': judge it again
            saved = json.loads(report_path.read_text())
            level = saved["quality"]["level"]
            episodes = [dataset.episode(i) for i in range(len(dataset))]
            saved["quality"] = quality_report(dataset.domain, level, episodes).to_dict()
            saved.setdefault("provenance", {})["relabelled"] = dataset.provenance["relabelled"]
            write_text_atomically(report_path, json.dumps(saved, indent=2) + "\n")
        dropped = len(before) - len(dataset)
        print(
            f"{path}: {changed} of {len(before)} episodes relabelled"
            + (f", {dropped} dropped (no longer successful)" if args.drop_unsuccessful else "")
        )
    return 0


def _refilter(args: argparse.Namespace) -> int:
    from imaginebench.imagination.quality import format_table
    from imaginebench.imagination.refilter import refilter_file

    kept, report, per_family = refilter_file(
        args.file,
        args.out,
        args.max_progress_drop,
        args.family_horizon,
        args.quantile,
        args.scale,
        args.overwrite,
        args.min_confidence,
        args.erase_loops,
        args.max_per_task,
    )
    record = kept.provenance["post_filter"]
    print(f"kept {record['kept']} of {record['of']} episodes")
    if record["erase_loops"]:
        print(f"loop steps erased: {record['loop_steps_erased']}")
    for family, (n, of) in per_family.items():
        print(f"  {family}: {n} of {of}")
    if record["family_horizon"] is not None:
        print("family limits (steps):", record["family_horizon"]["limits"])
    print(format_table([report]))
    print(f"wrote {args.out}")
    return 0


def _manifest(args: argparse.Namespace) -> int:
    from imaginebench.data.shipped import write_manifest

    manifest = write_manifest(args.directory)
    for name, entry in manifest["files"].items():
        print(f"{name}: {entry['episodes']} episodes, {entry['bytes']} bytes, {entry['sha256']}")
    return 0


def _train_expert(args: argparse.Namespace) -> int:
    if args.domain != "halfcheetah":
        raise ValueError(
            f"{args.domain!r} has a scripted expert; only halfcheetah's experts are trained"
        )
    import torch

    from imaginebench.experts.halfcheetah import SKILLS, train_skill
    from imaginebench.experts.online_sac import OnlineSACConfig

    torch.set_num_threads(args.threads)
    skills = list(SKILLS) if args.skill == "all" else [args.skill]
    config = OnlineSACConfig(total_steps=args.steps, seed=args.seed)
    for skill in skills:
        train_skill(skill, config, args.out_dir, progress=not args.quiet)
    return 0


def _benchmark(args: argparse.Namespace) -> int:
    import dataclasses
    import shlex

    from imaginebench.benchmark import load_spec, parse_shard, run_benchmark
    from imaginebench.benchmark.execute import Interrupted

    spec = load_spec(
        args.config,
        algorithms=args.algorithms,
        seeds=args.seeds,
        variants=args.variants,
        levels=args.levels,
        imaginary=args.imaginary,
        ratio=args.ratio,
        real_episodes=args.real_episodes,
        references=args.references,
        out=args.out,
    )
    if args.oracle_episodes is not None:
        oracle = dataclasses.replace(spec.oracle, episodes=args.oracle_episodes)
        spec = dataclasses.replace(spec, oracle=oracle)
    if args.set:
        spec = dataclasses.replace(spec, overrides=[*spec.overrides, *args.set])
    command = ["imaginebench", *args.argv]
    try:
        outcome = run_benchmark(
            spec,
            parse_shard(args.shard),
            workers=args.workers,
            threads=args.threads,
            force=args.force,
            dry_run=args.dry_run,
            command=command,
            progress=not args.quiet,
            records=args.records,
        )
    except Interrupted:
        print("interrupted: rerun the same command to continue", file=sys.stderr)
        return 130
    if args.dry_run:
        return 0
    print(
        f"{len(outcome.finished)} run(s) finished now, {len(outcome.skipped)} already finished, "
        f"{len(outcome.failed)} failed, {len(outcome.busy)} held by another benchmark process; "
        f"runs in {spec.out_dir} (tables and figures: imaginebench report "
        f"{shlex.quote(str(spec.out_dir))})"
    )
    for name, log in outcome.failed.items():
        print(f"failed: {name} (log: {log})", file=sys.stderr)
    return 1 if outcome.failed else 0


def _ratio(text: str) -> float | str:
    """``--ratio``: a number or ``pool``."""
    if text == "pool":
        return text
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number in [0, 1] or 'pool', got {text!r}")


def _report(args: argparse.Namespace) -> int:
    from imaginebench.report import write_report

    try:
        written = write_report(args.runs_dir, args.out, reps=args.bootstrap_reps)
    except ImportError as err:  # the report extra is missing
        print(f"error: {err}", file=sys.stderr)
        return 2
    for path in written:
        print(f"wrote {path}")
    return 0


def _records(args: argparse.Namespace) -> int:
    from imaginebench.benchmark.records import export_records, import_records

    if args.action == "export":
        names = export_records(args.runs_dir, args.archive)
        print(f"wrote {args.archive}: the records of {len(names)} finished run(s)")
        return 0
    outcome = import_records(args.archive, args.runs_dir, replace=args.replace)
    print(
        f"{args.runs_dir}: {len(outcome.written)} run(s) written, {len(outcome.replaced)} "
        f"replaced, {len(outcome.already_finished)} already finished there"
    )
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="imaginebench",
        description="ImagineBench: offline RL from real and imagined rollouts. Training: "
        "imaginebench fit|validate|test -c configs/<algo>_<env>.yaml; imagination: "
        "imaginebench imagine -c configs/imagine_<env>.yaml --level <level>; confidence of "
        "imaginary files: imaginebench score-imaginary FILE --real REAL (see --help of each). "
        "Errors in the input are reported in one line; add --debug to any command for the "
        "traceback.",
    )
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("collect", help="collect real expert rollouts into a dataset file")
    p.add_argument("--domain", default="clevr", help="environment domain (default: clevr)")
    p.add_argument("--level", default="train", choices=LEVELS)
    p.add_argument("--episodes", type=int, default=100)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--epsilon", type=float, default=0.0, help="probability of a random action")
    p.add_argument(
        "--paraphrases",
        type=int,
        default=1,
        help="store each rollout with this many wordings of its task (default 1)",
    )
    p.add_argument(
        "--workers",
        type=int,
        default=1,
        help="run the episodes in this many processes (default 1; with --epsilon > 0 the "
        "random actions then differ from the single-process run's, see docs)",
    )
    p.add_argument("--out", required=True, help="output .h5 path")
    p.add_argument("--overwrite", action="store_true", help="replace an existing output file")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=_collect)

    p = sub.add_parser("info", help="validate dataset files and print their summaries")
    p.add_argument("paths", nargs="+")
    p.add_argument(
        "--drop-nonfinite",
        action="store_true",
        help="summarise files with NaN/inf episodes without them (as imaginary data is loaded) "
        "instead of failing (as real data is)",
    )
    p.set_defaults(func=_info)

    p = sub.add_parser(
        "import-kalm",
        help="convert an original KALM/ImagineBench CLEVR or Meta-World .npy/.h5 file "
        "(Meta-World: every episode re-judged by our success functions, compared with the "
        "file's marking)",
    )
    p.add_argument(
        "source",
        help="the original file (dict .npy or .h5 with masks/observations...); .npy pickles "
        "are read without running code: anything but arrays, lists, dicts, strings and "
        "numbers is refused",
    )
    p.add_argument("--out", required=True)
    p.add_argument("--domain", default="clevr", choices=("clevr", "metaworld"))
    p.add_argument(
        "--level",
        default=None,
        choices=LEVELS,
        help="level of every episode (default: clevr train; metaworld from the env names)",
    )
    p.add_argument("--as-source", default="real", choices=("real", "imaginary"))
    p.add_argument(
        "--instruction",
        default="first",
        choices=("first", "cycle", "all"),
        help="which paraphrase(s) to use: the first (default), paraphrase i %% K for "
        "episode i, or one copy of the episode per paraphrase",
    )
    p.add_argument(
        "--companion",
        default=None,
        help="the .npy dict with instructions/goals (metaworld: env_names/instructions, .npy "
        "or .h5) of an .h5 file that lacks them (never guessed: only named files are read)",
    )
    p.add_argument(
        "--keep-distractor",
        action="store_true",
        help="metaworld: keep the entity slots the task does not use (the original's per-step "
        "distractor) instead of clearing them",
    )
    p.add_argument("--overwrite", action="store_true")
    p.set_defaults(func=_import_kalm)

    p = sub.add_parser(
        "import-libero",
        help="convert an original ImagineBench LIBERO .npy file (success and rewards judged "
        "again by our tasks)",
    )
    p.add_argument(
        "source",
        help="the original .npy dict (observations, actions, masks, instructions); read without "
        "running code: anything but arrays, lists, dicts, strings and numbers is refused",
    )
    p.add_argument("--out", required=True)
    p.add_argument("--level", default="train", choices=LEVELS)
    p.add_argument("--as-source", default="real", choices=("real", "imaginary"))
    p.add_argument(
        "--instruction",
        default="first",
        choices=("first", "cycle", "all"),
        help="which sentence(s) to keep: the first (default, the one the original encodes), "
        "sentence i %% K for episode i, or one copy of the episode per sentence",
    )
    p.add_argument("--overwrite", action="store_true")
    p.set_defaults(func=_import_libero)

    p = sub.add_parser(
        "export-minari",
        help="write a dataset file as a Minari dataset (needs: pip install "
        "'imaginebench[minari]'); per-episode instruction, task, level, source and success go "
        "into the episode metadata, see docs/dataset_format.md",
    )
    p.add_argument("file", help="the .h5 dataset file (or shipped:<domain>/<file>)")
    p.add_argument(
        "--out",
        default=None,
        help="Minari datasets folder that receives the dataset (default: $MINARI_DATASETS_PATH, "
        "else ~/.minari/datasets); minari.load_dataset finds it with MINARI_DATASETS_PATH=DIR",
    )
    p.add_argument(
        "--dataset-id",
        default=None,
        help="Minari id (default: imaginebench/<domain>-<level|mixed>-<source|mixed>-v0)",
    )
    p.add_argument(
        "--env-level",
        default=None,
        choices=LEVELS,
        help="level of the environment in the env spec (default: the episodes' level; "
        "required when they span several)",
    )
    p.add_argument("--overwrite", action="store_true", help="replace an existing Minari dataset")
    p.set_defaults(func=_export_minari)

    p = sub.add_parser(
        "import-minari",
        help="convert a Minari dataset written by export-minari back into a dataset file "
        "(datasets from elsewhere lack instructions and task specs and are refused)",
    )
    p.add_argument("dataset", help="a Minari dataset id (under --root) or a dataset folder")
    p.add_argument(
        "--root",
        default=None,
        help="Minari datasets folder (default: $MINARI_DATASETS_PATH, else ~/.minari/datasets)",
    )
    p.add_argument("--out", required=True, help="output .h5 path")
    p.add_argument("--overwrite", action="store_true", help="replace an existing output file")
    p.set_defaults(func=_import_minari)

    p = sub.add_parser(
        "render",
        help="draw one episode of a dataset file (real or imagined) as a GIF or MP4, the "
        "instruction captioned under every frame (docs/rendering.md)",
    )
    p.add_argument("file", help="the .h5 dataset file (or shipped:<domain>/<file>)")
    p.add_argument("--episode", type=int, default=0, help="episode index (default 0)")
    p.add_argument(
        "--out",
        required=True,
        help="output .gif, or .mp4 (needs: pip install 'imaginebench[video]')",
    )
    p.add_argument("--height", type=int, default=240, help="frame height in pixels (default 240)")
    p.add_argument("--width", type=int, default=320, help="frame width in pixels (default 320)")
    p.add_argument(
        "--fps", type=float, default=None, help="frames per second (default: the domain's)"
    )
    p.add_argument(
        "--every",
        type=int,
        default=1,
        help="keep every N-th frame and the last (smaller files of long episodes; default 1)",
    )
    p.add_argument(
        "--drop-nonfinite",
        action="store_true",
        help="skip the file's episodes holding NaN/inf (indices then count the others) instead "
        "of failing",
    )
    p.add_argument("--overwrite", action="store_true", help="replace an existing output file")
    p.set_defaults(func=_render)

    p = sub.add_parser(
        "train-expert", help="train a domain's learned expert skills by online SAC (halfcheetah)"
    )
    p.add_argument("--domain", default="halfcheetah")
    p.add_argument("--skill", default="all", help="a skill name or 'all' (default)")
    p.add_argument("--steps", type=int, default=60_000, help="environment steps per skill")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=1, help="torch intra-op threads (default 1)")
    p.add_argument("--out-dir", default=None, help="default: the package's shipped weights")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=_train_expert)

    p = sub.add_parser(
        "relabel",
        help="judge the episodes of dataset files again with the current success functions "
        "(success, terminated/truncated and rewards; states and actions untouched), in place; "
        "a quality report beside a file is recomputed",
    )
    p.add_argument("paths", nargs="+")
    p.add_argument("--reason", required=True, help="recorded in the provenance")
    p.add_argument(
        "--drop-unsuccessful",
        action="store_true",
        help="also remove the episodes that no longer satisfy their instruction (imagination's "
        "own-success filter applied again)",
    )
    p.set_defaults(func=_relabel)

    p = sub.add_parser(
        "refilter",
        help="apply imagination's simulator-free filter steps (erase_loops, max_progress_drop, "
        "a family length limit from real data, min_confidence, max_per_task) to an imaginary "
        "file that exists; writes the kept episodes and their quality report "
        "(docs/grounding.md#filters-filters-of-imaginebench-imagine)",
    )
    p.add_argument("file", help="imaginary dataset file (.h5)")
    p.add_argument("--out", required=True, help="where to write the kept episodes")
    p.add_argument(
        "--max-progress-drop",
        type=float,
        default=None,
        help="largest fall of the task's state-only potential allowed at one step (0: none)",
    )
    p.add_argument(
        "--family-horizon",
        metavar="REAL",
        default=None,
        help="real dataset file: each task family's limit is the --quantile of its successful "
        "episode lengths times --scale",
    )
    p.add_argument("--quantile", type=float, default=0.95)
    p.add_argument("--scale", type=float, default=1.0)
    p.add_argument(
        "--min-confidence",
        type=float,
        default=None,
        help="least 'ensemble' confidence (stored in the file) allowed at any transition",
    )
    p.add_argument(
        "--erase-loops",
        action="store_true",
        help="first cut out each episode's detours back to a state it visited (rewards "
        "labelled again)",
    )
    p.add_argument(
        "--max-per-task",
        type=int,
        default=None,
        help="after the other steps, keep at most this many episodes of each task (the "
        "shortest, ties by the LM's likelihood)",
    )
    p.add_argument("--overwrite", action="store_true", help="replace --out (may be FILE)")
    p.set_defaults(func=_refilter)

    p = sub.add_parser(
        "benchmark",
        help="run a grid of algorithms x data variants x seeds (each a normal fit with its own "
        "folder); finished runs are skipped, interrupted ones resume (docs/benchmarking.md)",
    )
    p.add_argument("-c", "--config", required=True, help="benchmark file, configs/benchmark/*.yaml")
    p.add_argument("--workers", type=int, default=1, help="runs at a time (default 1)")
    p.add_argument(
        "--threads",
        type=int,
        default=None,
        help="torch threads shared by the workers (default: the usable cores), each run "
        "getting threads // workers",
    )
    p.add_argument(
        "--shard",
        default="0/1",
        help="run only shard i of n of the grid (i/n, from 0), e.g. a job array's "
        "$SLURM_ARRAY_TASK_ID/$SLURM_ARRAY_TASK_COUNT",
    )
    p.add_argument("--dry-run", action="store_true", help="list the runs and their state only")
    p.add_argument("--force", action="store_true", help="rerun finished runs too")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.add_argument("--out", default=None, help="folder of the runs (default: the file's out)")
    p.add_argument(
        "--records",
        default=None,
        metavar="ARCHIVE",
        help="rewrite ARCHIVE (.tar.gz) with the folder's finished runs' records each time a "
        "run finishes (`imaginebench records import` reads it)",
    )
    p.add_argument("--algorithms", nargs="+", default=None, help="replace the file's algorithms")
    p.add_argument("--seeds", nargs="+", type=int, default=None, help="replace the file's seeds")
    p.add_argument(
        "--variants",
        nargs="+",
        default=None,
        help="real, imaginary, oracle, imaginary_all, oracle_all",
    )
    p.add_argument("--levels", nargs="+", default=None, help="levels of the per-level variants")
    p.add_argument(
        "--imaginary",
        default=None,
        help="imaginary file of a level, {domain} and {level} filled in (default: the shipped "
        "one), e.g. to compare freshly imagined data before shipping it",
    )
    p.add_argument(
        "--ratio",
        type=_ratio,
        default=None,
        help="share of every batch from the second stream, or 'pool' (both streams pooled)",
    )
    p.add_argument(
        "--real-episodes", type=int, default=None, help="episodes of real data every run shares"
    )
    p.add_argument(
        "--oracle-episodes", type=int, default=None, help="expert episodes per oracle level"
    )
    p.add_argument(
        "--references",
        nargs="*",
        default=None,
        help="replace the file's reference policies (random, expert); none after the flag: "
        "score no reference (e.g. where the expert's long episodes are already reported)",
    )
    p.add_argument(
        "--set",
        action="append",
        default=None,
        metavar="ARG",
        help="a fit argument added to every run, written with '=' (repeatable), e.g. "
        "--set=--trainer.max_steps=500",
    )
    p.set_defaults(func=_benchmark)

    p = sub.add_parser(
        "report",
        help="tables (Markdown, CSV), per-task success, Figures 5 and 6 and aggregate scores "
        "(IQM, stratified bootstrap) of a benchmark folder (needs: pip install "
        "'imaginebench[report]')",
    )
    p.add_argument("runs_dir", help="the benchmark's output folder (its out)")
    p.add_argument("--out", default=None, help="where to write (default: RUNS_DIR/report)")
    p.add_argument(
        "--bootstrap-reps",
        type=int,
        default=10_000,
        help="bootstrap resamples of the aggregate scores' confidence intervals (default 10000)",
    )
    p.set_defaults(func=_report)

    p = sub.add_parser(
        "records",
        help="carry a benchmark's finished runs between folders or machines: export their "
        "records (grid, run.json, done.json, results.json; no checkpoints) to a .tar.gz, or "
        "import them so the runner skips those runs and report reads them",
    )
    records = p.add_subparsers(dest="action", required=True)
    q = records.add_parser("export", help="write RUNS_DIR's finished runs to ARCHIVE")
    q.add_argument("runs_dir", help="the benchmark's output folder (its out)")
    q.add_argument("archive", help="the .tar.gz to write")
    q = records.add_parser("import", help="check ARCHIVE whole, then write its runs into RUNS_DIR")
    q.add_argument("archive", help="a .tar.gz made by `imaginebench records export`")
    q.add_argument("runs_dir", help="the benchmark's output folder (its out)")
    q.add_argument(
        "--replace",
        action="store_true",
        help="empty run folders that hold other files (an interrupted attempt, other "
        "settings) and import into them; without it such folders are an error",
    )
    p.set_defaults(func=_records)

    p = sub.add_parser(
        "manifest", help="write MANIFEST.json (checksums, provenance) for a directory of datasets"
    )
    p.add_argument("directory")
    p.set_defaults(func=_manifest)
    return parser


TRAINER_COMMANDS = ("fit", "validate", "test", "predict")


def _run_command(argv: list[str]) -> int:
    if argv and argv[0] in TRAINER_COMMANDS:
        from imaginebench.train_cli import run

        run(argv)
        return 0
    if argv and argv[0] == "imagine":
        from imaginebench.imagination.run import main as imagine

        return imagine(argv[1:])
    if argv and argv[0] == "score-imaginary":
        from imaginebench.imagination.score import main as score_imaginary

        return score_imaginary(argv[1:])
    args = build_parser().parse_args(argv)
    args.argv = argv
    return int(args.func(args) or 0)


def main(argv: list[str] | None = None) -> int:
    """Run one command. Bad input (a ``ValueError`` such as :class:`DatasetError`, or an
    ``OSError``) is reported in one line with exit code 2; ``--debug`` anywhere on the command
    line (or ``IMAGINEBENCH_DEBUG=1``) lets the exception and its traceback through."""
    argv = sys.argv[1:] if argv is None else list(argv)
    debug = "--debug" in argv or os.environ.get("IMAGINEBENCH_DEBUG", "") not in ("", "0")
    argv = [a for a in argv if a != "--debug"]
    try:
        return _run_command(argv)
    except (ValueError, OSError) as err:
        if debug:
            raise
        print(f"error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
