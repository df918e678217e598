"""Success rate per task level (and per task), measured in the simulators.

Every algorithm and run is scored on the same fixed evaluation set: the task suite's seeded
episodes (task, instruction, initial state) per level. All episodes of a level run side by side:
one batched policy call per step for every unfinished episode.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import lightning as L
import numpy as np
import torch
from lightning.pytorch.loggers import TensorBoardLogger
from lightning.pytorch.trainer.states import TrainerFn
from lightning.pytorch.utilities import rank_zero_info, rank_zero_only

from imaginebench.atomic import write_text_atomically
from imaginebench.envs import make
from imaginebench.envs.base import LEVELS, Level, check_level
from imaginebench.envs.rendering import RolloutRenderer


def wilson_interval(successes: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """95 % Wilson score interval of a success proportion."""
    if n == 0:
        return (0.0, 1.0)
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return (max(0.0, centre - half), min(1.0, centre + half))


@dataclass
class LevelResult:
    """One level's score. ``tasks`` breaks it down per task of the level's suite, in the order
    the tasks first occur: ``{"task": spec, "name": its first training wording, "episodes",
    "successes"}`` (the counts sum to the level's)."""

    level: str
    episodes: int
    successes: int
    success: float
    ci95: tuple[float, float]
    mean_return: float
    mean_length: float
    tasks: list[dict[str, Any]] = field(default_factory=list)


class ExpertPolicy:
    """A domain's expert (``act(env)``, :mod:`imaginebench.experts`) as a policy that
    :func:`evaluate_level` runs on the fixed evaluation set: it reads each live env instead of
    the batched states, with one expert per episode (experts may remember their episode).

    Args:
        make_expert: builds one expert, e.g. ``lambda: make_expert("clevr", seed=0)``.
    """

    def __init__(self, make_expert: Callable[[], Any]) -> None:
        self.make_expert = make_expert
        self._experts: dict[int, Any] = {}

    def start(self, envs: Sequence[Any]) -> None:
        """New episodes begin in ``envs``: each gets a fresh expert at its first action."""
        for env in envs:
            self._experts.pop(id(env), None)

    def act_in(self, envs: Sequence[Any]) -> list[Any]:
        """The next action of each env's expert in ``envs``."""
        for env in envs:
            if id(env) not in self._experts:
                self._experts[id(env)] = self.make_expert()
        return [self._experts[id(env)].act(env) for env in envs]


def per_task(plans: Sequence[Any], success: np.ndarray) -> list[dict[str, Any]]:
    """Episodes and successes per task of ``plans`` (the evaluated episodes' specs), in the
    order the tasks first occur."""
    counts: dict[str, dict[str, Any]] = {}
    for plan, solved in zip(plans, success):
        spec = plan.task.spec()
        entry = counts.setdefault(
            spec,
            {
                "task": spec,
                "name": plan.task.instructions("train")[0],
                "episodes": 0,
                "successes": 0,
            },
        )
        entry["episodes"] += 1
        entry["successes"] += int(solved)
    return list(counts.values())


def evaluate_level(
    policy: Any,
    domain: str,
    level: Level,
    episodes: int,
    seed: int,
    envs: list | None = None,
    max_episode_steps: int | None = None,
    max_envs: int | None = None,
) -> LevelResult:
    """Run ``episodes`` fixed episodes of ``level`` with ``policy.act(states, instructions)``
    (or, for an :class:`ExpertPolicy`, its ``act_in(envs)``).

    The episodes run side by side, one environment each (the policy acts on all of them in
    one batch), or with ``max_envs`` in consecutive groups of at most that many environments
    (domains whose simulators are large, such as LIBERO's). Success is counted once per
    episode (at termination or at the time limit), overall and per task
    (:attr:`LevelResult.tasks`). ``max_episode_steps`` overrides the environment's time limit.
    """
    check_level(level)
    group = group_size(episodes, max_envs)
    envs = envs if envs is not None else []
    while len(envs) < group:
        envs.append(make(domain, level).unwrapped)
    if max_episode_steps is not None:
        for env in envs:
            env.max_episode_steps = max_episode_steps
    plans = envs[0].suite.episodes(level, episodes, seed)
    success = np.zeros(episodes, dtype=bool)
    returns = np.zeros(episodes)
    lengths = np.zeros(episodes, dtype=int)
    for first in range(0, episodes, group):
        chunk = slice(first, min(first + group, episodes))
        _run_episodes(policy, envs, plans[chunk], success[chunk], returns[chunk], lengths[chunk])
    k = int(success.sum())
    return LevelResult(
        level,
        episodes,
        k,
        k / episodes,
        wilson_interval(k, episodes),
        float(returns.mean()),
        float(lengths.mean()),
        per_task(plans, success),
    )


def group_size(episodes: int, max_envs: int | None) -> int:
    """Environments per group when :func:`evaluate_level` runs ``episodes`` at most
    ``max_envs`` at a time (``None``: all side by side)."""
    if max_envs is not None and max_envs < 1:
        raise ValueError(f"max_envs must be >= 1, got {max_envs}")
    return min(episodes, max_envs or episodes)


def _run_episodes(
    policy: Any,
    envs: list,
    plans: Sequence[Any],
    success: np.ndarray,
    returns: np.ndarray,
    lengths: np.ndarray,
) -> None:
    """Run ``plans`` side by side in the first ``len(plans)`` of ``envs``, writing each
    episode's outcome into ``success``, ``returns`` and ``lengths`` (views, in plan order)."""
    states = np.stack([env.reset(options={"episode": plan})[0] for env, plan in zip(envs, plans)])
    if isinstance(policy, ExpertPolicy):
        policy.start(envs[: len(plans)])
    active = np.ones(len(plans), dtype=bool)
    instructions = [p.instruction for p in plans]
    while active.any():
        idx = np.flatnonzero(active)
        if isinstance(policy, ExpertPolicy):
            actions = policy.act_in([envs[i] for i in idx])
        else:
            actions = np.asarray(policy.act(states[idx], [instructions[i] for i in idx]))
        for i, action in zip(idx, actions):
            state, reward, terminated, truncated, info = envs[i].step(action)
            states[i] = state
            returns[i] += reward
            lengths[i] += 1
            if terminated or truncated:
                active[i] = False
                success[i] = bool(info["is_success"])


def level_metrics(
    results: Sequence[LevelResult], prefix: str, details: bool = True
) -> dict[str, float]:
    """``<prefix>/<level>/success`` per level; with ``details`` also ``/success_ci_low`` and
    ``/success_ci_high`` (95 % Wilson interval), ``/return`` and ``/length``, plus
    ``<prefix>/mean_success`` over the levels."""
    metrics = {}
    for r in results:
        metrics[f"{prefix}/{r.level}/success"] = r.success
        if details:
            metrics[f"{prefix}/{r.level}/success_ci_low"] = r.ci95[0]
            metrics[f"{prefix}/{r.level}/success_ci_high"] = r.ci95[1]
            metrics[f"{prefix}/{r.level}/return"] = r.mean_return
            metrics[f"{prefix}/{r.level}/length"] = r.mean_length
    if details and results:
        metrics[f"{prefix}/mean_success"] = float(np.mean([r.success for r in results]))
    return metrics


def format_table(results: Sequence[LevelResult]) -> str:
    rows = [
        "| level | success | 95% CI | episodes | return | length |",
        "|---|---|---|---|---|---|",
    ]
    for r in results:
        rows.append(
            f"| {r.level} | {100 * r.success:.1f}% | {100 * r.ci95[0]:.1f}–{100 * r.ci95[1]:.1f}% "
            f"| {r.episodes} | {r.mean_return:.2f} | {r.mean_length:.1f} |"
        )
    return "\n".join(rows)


class SuccessRateEvaluation(L.Callback):
    """Evaluate the policy in the simulator during training and on ``trainer.test``.

    ``trainer.test`` returns (and the loggers get) :func:`level_metrics` with prefix ``test``:
    ``trainer.test(model, datamodule=dm)[0]["test/hard/success"]``; ``trainer.validate``
    returns ``val/<level>/success``.

    Args:
        every_n_steps: evaluate after every this many training steps (0 or ``None``: only on
            ``validate`` / ``test``; the CLI fills a ``None`` from its ``every_n_steps``).
        episodes_per_level: episodes per level during training.
        levels: levels to evaluate (default: all four).
        seed: seed of the fixed evaluation set (the same for every algorithm and run).
        test_episodes_per_level: episodes per level for ``trainer.test`` (the final score).
        results_file: file name of the test results, written to the logger's directory (or
            ``trainer.default_root_dir`` without one); an absolute path is used as is.
        test_after_fit: run the test evaluation at the end of ``fit`` as well.
        max_episode_steps: time limit override (default: the environment's own).
        video_episodes_per_level: render this many of each level's evaluation episodes (the
            first ones) and log them to TensorBoard as animated GIFs, tagged
            ``<eval|val|test>/<level>/episode_<k>``, at every evaluation; 0 (the default)
            renders nothing. Needs a ``TensorBoardLogger``; costs about 0.01 to 0.05 s per
            frame (Meta-World 0.1 s: its poses are fitted to the states).
        video_size: ``(height, width)`` of the rendered frames, before the caption.
        max_envs: run each level's episodes in groups of at most this many environments
            (default: all side by side); the videos then show the last group's episodes.
            For simulators too large to hold one per episode (LIBERO: a few hundred MB each).
    """

    def __init__(
        self,
        every_n_steps: int | None = 1000,
        episodes_per_level: int = 40,
        levels: Sequence[str] = LEVELS,
        seed: int = 0,
        test_episodes_per_level: int = 200,
        results_file: str = "results.json",
        test_after_fit: bool = False,
        max_episode_steps: int | None = None,
        video_episodes_per_level: int = 0,
        video_size: tuple[int, int] = (120, 160),
        max_envs: int | None = None,
    ) -> None:
        if max_envs is not None and max_envs < 1:
            raise ValueError(f"max_envs must be >= 1, got {max_envs}")
        self.max_envs = max_envs
        if video_episodes_per_level < 0:
            raise ValueError(
                f"video_episodes_per_level must be >= 0, got {video_episodes_per_level}"
            )
        self.max_episode_steps = max_episode_steps
        self.video_episodes_per_level = video_episodes_per_level
        self.video_size = (int(video_size[0]), int(video_size[1]))
        self._renderer: RolloutRenderer | None = None
        self.every_n_steps = every_n_steps or 0
        self.episodes_per_level = episodes_per_level
        self.levels = [check_level(level) for level in levels]
        self.seed = seed
        self.test_episodes_per_level = test_episodes_per_level
        self.results_file = results_file
        self.test_after_fit = test_after_fit
        self._envs: dict[str, list] = {}
        self._next_eval = self.every_n_steps
        self.last_results: list[LevelResult] = []

    def setup(self, trainer: L.Trainer, pl_module: Any, stage: str) -> None:
        """Turn off TensorBoard loggers' placeholder ``hp_metric`` record: the HParams tab keeps
        a run's first hyperparameter record, and this callback writes the one that matters, with
        the final success per level (:func:`log_final_scores`)."""
        for logger in trainer.loggers:
            if isinstance(logger, TensorBoardLogger):
                logger._default_hp_metric = False

    def run(
        self, trainer: L.Trainer, module: Any, episodes: int, video_prefix: str | None = None
    ) -> list[LevelResult]:
        """Evaluate every level; with ``video_prefix`` and ``video_episodes_per_level``, log
        that many rendered episodes per level (:meth:`_log_videos`)."""
        domain = trainer.datamodule.domain
        results = []
        for level in self.levels:
            envs = self._envs.setdefault(level, [])
            results.append(
                evaluate_level(
                    module,
                    domain,
                    level,
                    episodes,
                    self.seed,
                    envs,
                    self.max_episode_steps,
                    self.max_envs,
                )
            )
            if video_prefix is not None and self.video_episodes_per_level:
                # the environments of the last group hold its episodes
                last = (episodes - 1) % group_size(episodes, self.max_envs) + 1
                self._log_videos(trainer, domain, f"{video_prefix}/{level}", envs[:last])
            self._release_extra_envs(envs)
        return results

    def _release_extra_envs(self, envs: list) -> None:
        """Close and drop the environments beyond what a training-time evaluation uses: the
        final score's extra ones would otherwise stay alive for every level at once (Meta-World:
        tens of MB per simulator, 400 of them after a 100-episode test). Episodes do not depend
        on which environment object runs them, so this changes no score."""
        keep = group_size(self.episodes_per_level, self.max_envs)
        for env in envs[keep:]:
            env.close()
        del envs[keep:]

    def _log_videos(self, trainer: L.Trainer, domain: str, prefix: str, envs: list) -> None:
        """Render the episodes the first ``video_episodes_per_level`` of ``envs`` just ran (their
        ``trajectory``, ``task`` and ``instruction``) and log them to every TensorBoard logger
        as ``<prefix>/episode_<k>``."""
        from lightning.pytorch.loggers import TensorBoardLogger

        from imaginebench.envs import make_renderer
        from imaginebench.video.episodes import render_rollout
        from imaginebench.video.tensorboard import log_video

        writers = [lg.experiment for lg in trainer.loggers if isinstance(lg, TensorBoardLogger)]
        if not writers:
            return
        if self._renderer is None:
            self._renderer = make_renderer(domain, *self.video_size)
        step = trained_steps(trainer)
        for k, env in enumerate(envs[: self.video_episodes_per_level]):
            states = np.stack(env.trajectory)
            header = f"{prefix.replace('/', ' | ')} | step {step}"
            frames = render_rollout(self._renderer, env.task, env.instruction, states, header)
            for writer in writers:
                log_video(writer, f"{prefix}/episode_{k}", frames, self._renderer.fps, step)

    def teardown(self, trainer: L.Trainer, module: Any, stage: str) -> None:
        if self._renderer is not None:
            self._renderer.close()
            self._renderer = None

    # -- during training ------------------------------------------------------------------------
    def on_train_batch_end(self, trainer: L.Trainer, module: Any, *args: Any) -> None:
        step = trainer.global_step
        # ">=": a batch may hold several updates (updates_per_batch), so steps can jump.
        if self.every_n_steps and step >= self._next_eval:
            self._next_eval = (step // self.every_n_steps + 1) * self.every_n_steps
            self._evaluate_and_log(trainer, module, step)

    def on_train_start(self, trainer: L.Trainer, module: Any) -> None:
        every = self.every_n_steps or 1
        self._next_eval = (trainer.global_step // every + 1) * every

    def _run_and_log(
        self,
        trainer: L.Trainer,
        module: Any,
        episodes: int,
        prefix: str,
        details: bool,
        to_loggers: bool = True,
    ) -> list[LevelResult]:
        """Evaluate every level and keep the results; with ``to_loggers``, write
        :func:`level_metrics` to the loggers at the step of the evaluated weights (inside
        ``validate``/``test``, :func:`_return_from_loop` has the loop write them instead)."""
        results = self.run(trainer, module, episodes, video_prefix=prefix)
        self.last_results = results
        if to_loggers:
            metrics = level_metrics(results, prefix, details)
            for logger in trainer.loggers:
                logger.log_metrics(metrics, step=trained_steps(trainer))
        return results

    def _print_table(self, trainer: L.Trainer, module: Any, results: list[LevelResult]) -> None:
        print(
            f"\n{type(module).__name__} at step {trained_steps(trainer)} "
            f"({results[0].episodes} episodes per level, seed {self.seed}):"
        )
        print(format_table(results))

    @rank_zero_only
    def _evaluate_and_log(self, trainer: L.Trainer, module: Any, step: int) -> None:
        results = self._run_and_log(trainer, module, self.episodes_per_level, "eval", True)
        summary = ", ".join(f"{r.level} {100 * r.success:.0f}%" for r in results)
        rank_zero_info(f"step {step}: success {summary}")

    # -- trainer.validate: a quick look with the training-time episode count --------------------
    def on_validation_epoch_end(self, trainer: L.Trainer, module: Any) -> None:
        if trainer.state.fn == TrainerFn.VALIDATING:  # not fit's sanity check
            results = _on_every_rank(trainer, self._validate(trainer, module))
            _return_from_loop(trainer, module, level_metrics(results, "val", False))

    @rank_zero_only
    def _validate(self, trainer: L.Trainer, module: Any) -> list[LevelResult]:
        episodes = self.episodes_per_level
        results = self._run_and_log(trainer, module, episodes, "val", False, to_loggers=False)
        self._print_table(trainer, module, results)
        return results

    # -- final score ------------------------------------------------------------------------------
    def on_test_epoch_end(self, trainer: L.Trainer, module: Any) -> None:
        log_dir = trainer.log_dir  # a collective under DDP: every rank asks
        results = _on_every_rank(trainer, self._final(trainer, module, log_dir, in_loop=True))
        _return_from_loop(trainer, module, level_metrics(results, "test"))

    def on_fit_end(self, trainer: L.Trainer, module: Any) -> None:
        if self.test_after_fit:
            # trainer.log_dir is a collective under DDP: every rank asks, rank 0 evaluates.
            self._final(trainer, module, trainer.log_dir)

    @rank_zero_only
    def _final(
        self, trainer: L.Trainer, module: Any, log_dir: str | None, in_loop: bool = False
    ) -> list[LevelResult]:
        """Score every level with ``test_episodes_per_level`` episodes, log the metrics with
        the run's hyperparameters (:func:`log_final_scores`; ``in_loop``: inside ``test``, whose
        loop writes the metrics themselves), write ``results.json`` (into ``log_dir``, else
        ``trainer.default_root_dir``) and print the table and the file's absolute path."""
        episodes = self.test_episodes_per_level
        results = self._run_and_log(trainer, module, episodes, "test", True, to_loggers=False)
        log_final_scores(
            trainer, module, level_metrics(results, "test"), trained_steps(trainer), in_loop
        )
        path = Path(self.results_file)
        if not path.is_absolute():
            path = Path(log_dir or trainer.default_root_dir) / path
        path = path.resolve()
        payload = {
            "levels": {r.level: asdict(r) for r in results},
            "seed": self.seed,
            "episodes_per_level": self.test_episodes_per_level,
            "global_step": trained_steps(trainer),
            "algorithm": type(module).__name__,
            "model": dict(module.hparams),
            "data": dict(getattr(trainer.datamodule, "hparams", {})) or _data_config(trainer),
        }
        used = getattr(trainer.datamodule, "usage", None)
        if used:  # what was trained on, beside what was asked for
            payload["data_used"] = used
        write_text_atomically(path, json.dumps(payload, indent=2, default=str))
        self._print_table(trainer, module, results)
        print(f"results written to {path}")
        return results


def run_hparams(trainer: L.Trainer, module: Any) -> dict[str, Any]:
    """What tells runs apart in TensorBoard's HParams tab: the algorithm, the model's and the
    data module's hyperparameters (nested; loggers flatten them to ``model/lr``, ...)."""
    datamodule = getattr(trainer, "datamodule", None)
    data = dict(getattr(datamodule, "hparams", {})) or _data_config(trainer)
    return {"algorithm": type(module).__name__, "model": dict(module.hparams), "data": data}


def log_final_scores(
    trainer: L.Trainer, module: Any, metrics: dict[str, float], step: int, in_loop: bool
) -> None:
    """Write the final scores to the loggers at ``step``. TensorBoard loggers get them with the
    run's hyperparameters (``log_hyperparams(params, metrics)``): the success per level and
    ``test/mean_success`` become the run's metrics in the HParams tab, so runs compare there
    (that call also writes them as scalars). ``in_loop``: the ``test`` loop writes the metrics
    as scalars itself, so only the HParams record is added (with its copy of the success
    scalars, the same values at the same step)."""
    headline = {k: v for k, v in metrics.items() if k.endswith("success")}
    for logger in trainer.loggers:
        scalars = metrics
        if isinstance(logger, TensorBoardLogger):
            logger.log_hyperparams(run_hparams(trainer, module), headline, step=step)
            scalars = {k: v for k, v in metrics.items() if k not in headline}
        if not in_loop:
            logger.log_metrics(scalars, step=step)


def _on_every_rank(trainer: L.Trainer, results: list[LevelResult] | None) -> list[LevelResult]:
    """Rank 0's results (the other ranks get ``None`` from a ``rank_zero_only`` call) on every
    rank, so that each returns the same metrics."""
    return trainer.strategy.broadcast(results, src=0)


def _return_from_loop(trainer: L.Trainer, module: Any, metrics: dict[str, float]) -> None:
    """Hand ``metrics`` to the running ``validate``/``test`` loop, which returns them, keeps
    them in ``trainer.callback_metrics`` and writes them to the loggers, at the step of the
    evaluated weights (Lightning takes a metric named ``step`` as the loggers' x-axis; the
    loop returns it too). The values are the same on every rank (``sync_dist`` only averages
    identical numbers)."""
    step = {"step": float(trained_steps(trainer))}
    module.log_dict({**metrics, **step}, sync_dist=True, batch_size=1)


def trained_steps(trainer: L.Trainer) -> int:
    """The training steps behind the evaluated weights: ``trainer.global_step`` while fitting,
    the checkpoint's step under ``validate``/``test --ckpt_path`` (which do not restore it), and
    that of a module made by ``load_from_checkpoint`` that this trainer has not trained."""
    if trainer.state.fn == TrainerFn.FITTING:
        return trainer.global_step
    if trainer.ckpt_path:
        # mmap: the tensors are not read, only the small pickled header
        checkpoint = torch.load(trainer.ckpt_path, map_location="cpu", weights_only=True, mmap=True)
        return int(checkpoint["global_step"])
    loaded = getattr(trainer.lightning_module, "checkpoint_step", None)
    return trainer.global_step or loaded or 0


def _data_config(trainer: L.Trainer) -> dict[str, Any]:
    dm = trainer.datamodule
    keys = ("domain", "real_path", "imaginary_paths", "ratio", "batch_size", "seed")
    return {k: getattr(dm, k, None) for k in keys}
