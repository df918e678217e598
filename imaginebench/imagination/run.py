"""``imaginebench imagine``: imaginary datasets for the novel tasks of a level.

For every rollout an episode (task, unseen instruction, real initial state) is drawn from the
level's task suite — the same generator that starts real episodes, on the data split — and the
fine-tuned LM imagines the rest. Rollouts are rewarded by the domain's reward function, judged
by the task's success function, given their confidence per transition (the LM's likelihood of
each step where the model has one; with ``ensemble_confidence`` also the dynamics ensemble's,
see :mod:`~imaginebench.imagination.confidence`), written atomically as an imaginary dataset
with provenance, and scored by the quality report (printed and saved beside the dataset).
Decoded batches are journaled in ``<out>.partial/`` until the dataset is written, so rerunning
an interrupted command resumes it (:mod:`~imaginebench.imagination.journal`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any, Literal

import numpy as np
import torch

# Grounding checkpoints record their data module's CollectConfig: importing its module allows it
# under torch.load(weights_only=True).
import imaginebench.data.collect  # noqa: F401
from imaginebench.atomic import check_output_path
from imaginebench.config import as_config
from imaginebench.data.dataset import RolloutDataset
from imaginebench.data.format import load_dataset
from imaginebench.data.hdf5 import save_dataset
from imaginebench.data.shipped import file_sha256, resolve_data_path
from imaginebench.envs import get_domain, make
from imaginebench.envs.base import Level, Task, action_spec_of, check_level
from imaginebench.imagination.confidence import (
    ENSEMBLE,
    LIKELIHOOD,
    EnsembleConfig,
    likelihood_confidence,
)
from imaginebench.imagination.decoder import DecodingConfig, ImaginedRollout, Imaginer, to_episode
from imaginebench.imagination.filters import (
    FilterConfig,
    FilterCounts,
    cap_per_task,
    episode_families,
    family_horizons,
    real_horizon,
    select,
    start_bin,
    start_bin_edges,
    start_episodes_needed,
    start_potential,
    uncovered_tasks,
)
from imaginebench.imagination.journal import Journal, journal_path
from imaginebench.imagination.lookahead import Lookahead, LookaheadConfig
from imaginebench.imagination.quality import (
    QualityReport,
    format_table,
    quality_report,
    save_report_beside,
)
from imaginebench.imagination.references import NearestSeenInstruction
from imaginebench.imagination.score import fit_ensemble_on, with_confidence
from imaginebench.imagination.slots import SlotConfig, SlotDynamics

log = logging.getLogger(__name__)


def imagine_level(
    level: Level,
    checkpoint: str,
    out: str,
    domain: str = "clevr",
    rollouts: int = 1000,
    seed: int = 0,
    horizon: int | None = None,
    decoding: DecodingConfig | Mapping[str, Any] | None = None,
    filters: FilterConfig | Mapping[str, Any] | None = None,
    overwrite: bool = False,
    progress: bool = True,
    ensemble_confidence: bool = False,
    ensemble: EnsembleConfig | Mapping[str, Any] | None = None,
    state_model: Literal["lm", "ensemble", "slots"] = "lm",
    ensemble_real: str | None = None,
    slots: SlotConfig | Mapping[str, Any] | None = None,
    lookahead: LookaheadConfig | Mapping[str, Any] | None = None,
) -> tuple[RolloutDataset, QualityReport]:
    """Imagine ``rollouts`` episodes of ``level`` with the grounding checkpoint; write ``out``.

    Args:
        level: task level (``rephrase``, ``easy``, ``hard`` — or ``train``).
        checkpoint: a :class:`GroundingModule` checkpoint (``imaginebench fit`` output).
        out: output dataset path (``{level}`` and ``{domain}`` are filled in); the quality
            report goes to the same stem with ``.quality.json``.
        domain: environment domain.
        rollouts: number of imagined episodes.
        seed: seed of the episode draw (initial states, tasks, wordings) and of sampling.
        horizon: maximum steps per rollout (default: the level's episode limit).
        decoding: decoding settings (:class:`DecodingConfig` or a dict of its fields).
        filters: the filter steps (:mod:`~imaginebench.imagination.filters`; default none);
            how many rollouts each removed goes into the provenance and the quality report.
        overwrite: replace an existing output file.
        progress: show a progress bar.
        ensemble_confidence: also write the ``ensemble`` confidence, from a dynamics ensemble
            fitted on the real data the checkpoint was fine-tuned on (tens of seconds).
        ensemble: that ensemble's settings (:class:`EnsembleConfig` or a dict of its fields).
        state_model: what advances the imagined state: ``lm`` (the grounded LM's state head,
            KALM's imagination), ``ensemble`` (that dynamics ensemble, fitted on the real
            data; the LM then only chooses the actions) or, on Meta-World, ``slots`` (the
            object-centric model of :mod:`imaginebench.imagination.slots`, fitted on the
            same real data; the ensemble still gives the context and the confidence). Never
            the simulator.
        ensemble_real: the real dataset that ensemble is fitted on (a path or
            ``shipped:<domain>/<file>``), e.g. more real episodes of the training tasks than
            the grounding saw; default: the real data the checkpoint was fine-tuned on.
        slots: the slot model's settings with ``state_model: slots`` (:class:`SlotConfig`
            or a dict of its fields).
        lookahead: a search in the state model before each continuous action, towards the
            rollout's own task (:mod:`~imaginebench.imagination.lookahead`; needs
            ``state_model: ensemble``; default off).
    """
    from imaginebench.modules.grounding import GroundingModule

    level = check_level(level)
    decoding = as_config(decoding, DecodingConfig, "decoding") or DecodingConfig()
    filters = as_config(filters, FilterConfig, "filters") or FilterConfig()
    if filters.best_of > 1 and decoding.strategy != "sample":
        raise ValueError(
            f"filters.best_of={filters.best_of} ranks sampled candidates: set "
            "decoding.strategy to 'sample' (greedy decoding makes identical ones)"
        )
    path = Path(out.format(level=level, domain=domain))
    check_output_path(path, overwrite)
    if not Path(checkpoint).is_file():
        raise FileNotFoundError(
            f"grounding checkpoint {checkpoint} not found; train one with "
            f"imaginebench fit -c configs/grounding_{domain}.yaml"
        )
    if rollouts < 1:
        raise ValueError(f"rollouts must be >= 1, got {rollouts}")
    if state_model not in ("lm", "ensemble", "slots"):
        raise ValueError(f"state_model must be 'lm', 'ensemble' or 'slots', got {state_model!r}")
    if state_model == "slots" and domain != "metaworld":
        raise ValueError(
            f"state_model 'slots' is Meta-World's object-centric model, not {domain}'s"
        )
    if slots is not None and state_model != "slots":
        raise ValueError("slots sets the slot model: use it with state_model: slots")
    slot_config = as_config(slots, SlotConfig, "slots") or SlotConfig()
    lookahead = as_config(lookahead, LookaheadConfig, "lookahead") or LookaheadConfig()
    if lookahead.enabled and state_model != "ensemble":
        raise ValueError(
            "lookahead searches in the dynamics ensemble: set state_model: ensemble "
            f"(got {state_model!r})"
        )
    module = GroundingModule.load_from_checkpoint(checkpoint, map_location="cpu", weights_only=True)
    module.merge_lora()  # inference only: one matmul per projection instead of three
    if module.model.hidden_action is not None and state_model == "lm":
        raise ValueError(
            f"{checkpoint} was trained with hide_generation_actions: its state head never sees "
            "the action it follows, so it cannot advance the state; use --state_model ensemble"
        )
    env = make(domain, level).unwrapped
    limit = int(env.max_episode_steps)
    needs_horizon = horizon is None and filters.horizon_quantile is not None
    fitted_states = state_model in ("ensemble", "slots")
    decodes_with_ensemble = fitted_states or filters.min_confidence is not None
    needs_ensemble = decodes_with_ensemble or ensemble_confidence
    nearest_seen = decoding.guidance_reference == "nearest_seen"
    needs_real = (
        needs_horizon or needs_ensemble or nearest_seen or filters.family_horizon_scale is not None
    )
    real_path = _real_data_path(checkpoint) if needs_real else None
    real = load_dataset(real_path) if real_path is not None else None  # read once, used twice
    ensemble_real_path, ensemble_data = real_path, real
    if ensemble_real is not None:
        if not needs_ensemble:
            raise ValueError(
                "ensemble_real names the real data of a dynamics ensemble, but nothing here uses "
                "one: set state_model: ensemble, ensemble_confidence or filters.min_confidence"
            )
        ensemble_real_path = resolve_data_path(ensemble_real)
        ensemble_data = load_dataset(ensemble_real_path)
        if ensemble_data.domain != domain:
            raise ValueError(
                f"ensemble_real {ensemble_real} holds {ensemble_data.domain!r} rollouts, not "
                f"{domain!r}"
            )
    if needs_horizon:
        horizon = real_horizon(
            real.episode_lengths(),
            real.episode_success,
            filters.horizon_quantile,
            filters.horizon_scale,
            limit,
        )
    horizon = horizon or limit
    limits = None
    if filters.family_horizon_scale is not None:
        limits = family_horizons(
            episode_families(real),
            real.episode_lengths(),
            real.episode_success,
            filters.horizon_quantile,
            filters.family_horizon_scale,
        )
    action_spec = action_spec_of(env.action_space)
    env.close()
    if module.state_dim != env.observation_space.shape[0]:
        raise ValueError(
            f"{checkpoint} was trained on {module.state_dim}-d states, {domain} has "
            f"{env.observation_space.shape[0]}"
        )
    spec = get_domain(domain)
    suite = spec.make_suite()
    specs = suite.episodes(level, rollouts, seed, split="data")
    checkpoint_sha256 = file_sha256(checkpoint)
    journal = Journal(
        journal_path(path),
        {
            "domain": domain,
            "level": level,
            "checkpoint_sha256": checkpoint_sha256,
            "rollouts": rollouts,
            "seed": seed,
            "horizon": horizon,
            "decoding": asdict(decoding),
            "filters": asdict(filters),
            "state_model": state_model,
            "slots": slot_config.to_dict() if state_model == "slots" else None,
            "lookahead": asdict(lookahead) if lookahead.enabled else None,
            "ensemble": None
            if not decodes_with_ensemble
            else {
                "settings": asdict(
                    as_config(ensemble, EnsembleConfig, "ensemble") or EnsembleConfig()
                ),
                "real_sha256": file_sha256(ensemble_real_path),
            },
        },
    )
    scorer = how = None
    if needs_ensemble:
        scorer, how = fit_ensemble_on(ensemble_real_path, ensemble, progress, loaded=ensemble_data)
    next_states = scorer.next_states if fitted_states else None
    if state_model == "slots":
        log.info("fitting the slot model on %s", ensemble_real_path)
        next_states = SlotDynamics.fit(ensemble_data, slot_config).next_states
    torch.manual_seed(seed)
    started = time.perf_counter()
    legal = spec.make_quality().legal if filters.reject_illegal else None
    reference_of = NearestSeenInstruction(real.instructions) if nearest_seen else None
    imaginer = Imaginer(
        module,
        decoding,
        seed,
        spec.integer_states,
        legal,
        filters.illegal_retries,
        dynamics=next_states,
        journal=journal,
        confidence=None if filters.min_confidence is None else scorer.transition_confidence,
        min_confidence=filters.min_confidence,
        dynamics_context=scorer.context if decodes_with_ensemble else None,
        reference_of=reference_of,
        lookahead=Lookahead(
            scorer,
            lookahead,
            spec.make_quality().legal,
            action_spec.get("low", -1.0),
            action_spec.get("high", 1.0),
            plan_context=spec.plan_context,
        )
        if lookahead.enabled
        else None,
    )

    def imagine_and_select(episodes: list) -> tuple[list, FilterCounts]:
        """``best_of`` candidates of each episode, imagined and filtered."""
        candidates = [episode for episode in episodes for _ in range(filters.best_of)]
        return select(imaginer.imagine(candidates, horizon, progress=progress), filters, limits)

    kept, counts = imagine_and_select(specs)
    first_round = list(kept)
    tasks = suite.tasks(level)
    coverage = {"tasks": len(tasks), "covered_first_round": _covered(tasks, kept), "rounds": 0}
    for draw in range(1, filters.coverage_rounds + 1):
        missing = uncovered_tasks(tasks, kept)
        if not missing:
            break
        extra = suite.episodes_of(level, missing, filters.coverage_episodes, seed, draw)
        log.info("coverage round %d: %d tasks without a kept rollout", draw, len(missing))
        more_kept, more_counts = imagine_and_select(extra)
        kept, counts = kept + more_kept, counts + more_counts
        coverage["rounds"] = draw
    coverage["covered"] = _covered(tasks, kept)
    if filters.start_bins:
        kept, counts, coverage["starts"] = _fill_start_bins(
            filters, suite, level, seed, specs, first_round, kept, counts, imagine_and_select
        )
    kept, counts.over_task_cap = cap_per_task(kept, filters.max_per_task)
    seconds = time.perf_counter() - started
    has_likelihood = module.model.has_likelihood
    episodes = [
        to_episode(
            r,
            spec.episode_rewards(r.spec.task, r.states, r.actions),
            {LIKELIHOOD: likelihood_confidence(r.step_log_likelihoods)} if has_likelihood else {},
        )
        for r in kept
    ]
    if not episodes:
        journal.remove()  # the run has ended: a rerun would decode the same rollouts
        raise ValueError(f"no imagined rollout survived the filters ({counts}); nothing to write")
    hp = module.hparams
    provenance = {
        "generator": "imaginebench imagine",
        "model": hp.get("lm") if hp.get("lm_config") is None else "random-init",
        "adapter_checkpoint": str(checkpoint),
        "adapter_checkpoint_sha256": checkpoint_sha256,
        "seed": seed,
        "level": level,
        "rollouts_requested": rollouts,
        "diverged_dropped": counts.diverged,
        "filters": asdict(filters),
        "filtered": counts.to_dict(),
        "coverage": coverage,
        "horizon": horizon,
        "family_horizons": limits,
        "decoding": {
            "strategy": decoding.strategy,
            "temperature": decoding.temperature,
            "action_noise": decoding.action_noise,
            "batch_size": decoding.batch_size,
            "kv_cache": decoding.use_cache,
            "guidance": decoding.guidance,
            "guidance_reference": decoding.guidance_reference,
            "stage_tasks": decoding.stage_tasks,
        },
        "state_model": _state_model_provenance(state_model, how, slot_config),
        "lookahead": asdict(lookahead) if lookahead.enabled else None,
        "ensemble_real": ensemble_real,
        "seconds": round(seconds, 1),
    }
    if reference_of is not None:
        provenance["decoding"]["references"] = dict(reference_of.chosen)
    if has_likelihood:
        provenance["confidence"] = {
            LIKELIHOOD: {
                "method": "exp(log-likelihood of the step's action and categorical next state "
                "under the grounded LM), recorded while decoding",
                "checkpoint": str(checkpoint),
            }
        }
    dataset = RolloutDataset.from_episodes(
        episodes, domain=domain, action_spec=action_spec, provenance=provenance
    )
    if ensemble_confidence:
        dataset = with_confidence(dataset, ENSEMBLE, scorer.confidence(dataset), how)
    report = quality_report(domain, level, episodes)
    save_dataset(dataset, path, overwrite=overwrite)
    save_report_beside(path, report, provenance)
    journal.remove()
    log.info("imagined %d rollouts in %.1f s -> %s", counts.candidates, seconds, path)
    return dataset, report


#: stream numbers of the start-difficulty rounds' episodes, apart from the coverage rounds'
START_DRAWS = 1000


def _fill_start_bins(
    filters: FilterConfig,
    suite: Any,
    level: str,
    seed: int,
    first_specs: Sequence[Any],
    first_kept: Sequence[ImaginedRollout],
    kept: list[ImaginedRollout],
    counts: FilterCounts,
    imagine_and_select: Any,
) -> tuple[list[ImaginedRollout], FilterCounts, dict[str, Any]]:
    """The start-difficulty rounds (:mod:`~imaginebench.imagination.filters`, step 6): fresh
    episodes for the bins of initial potential that hold fewer kept rollouts than an equal share,
    as many as each bin's first-round keep rate asks for."""
    bins = filters.start_bins
    level_starts = [start_potential(s) for s in first_specs]
    edges = start_bin_edges(level_starts, bins)

    def per_bin(specs: Sequence[Any]) -> np.ndarray:
        return np.bincount(start_bin([start_potential(s) for s in specs], edges), minlength=bins)

    episodes = np.bincount(start_bin(level_starts, edges), minlength=bins)
    first = per_bin([r.spec for r in first_kept])
    keep_rate = np.maximum(first, 1) / np.maximum(episodes, 1)  # a bin that kept none: one
    report: dict[str, Any] = {
        "edges": edges.tolist(),
        "kept_first_round": first.tolist(),
        "rounds": 0,
    }
    for draw in range(1, filters.start_rounds + 1):
        need = start_episodes_needed(
            per_bin([r.spec for r in kept]), keep_rate, filters.start_max_episodes
        )
        if not need.any():
            break
        stream = suite.episode_stream(level, seed, START_DRAWS + draw)
        quota, extra = need.copy(), []
        for _ in range(50 * int(need.sum())):  # rejection sampling, bounded
            spec = next(stream)
            b = int(start_bin([start_potential(spec)], edges)[0])
            if quota[b] > 0:
                extra.append(spec)
                quota[b] -= 1
                if not quota.any():
                    break
        log.info(
            "start-difficulty round %d: %d fresh episodes for bins %s",
            draw,
            len(extra),
            need.tolist(),
        )
        more_kept, more_counts = imagine_and_select(extra)
        kept, counts = kept + more_kept, counts + more_counts
        report["rounds"] = draw
    report["kept"] = per_bin([r.spec for r in kept]).tolist()
    return kept, counts, report


def _state_model_provenance(
    state_model: str, how: dict[str, Any] | None, slots: SlotConfig
) -> str | dict[str, Any]:
    """What advanced the imagined states: ``lm``, or the fitted model with its settings (the
    slot model's beside the ensemble that gave its context and confidence)."""
    if state_model == "lm":
        return "lm"
    fitted = {k: v for k, v in how.items() if k != "method"}
    if state_model == "slots":
        return {"slots": {"slots": slots.to_dict(), **fitted}}
    return {"ensemble": fitted}


def _covered(tasks: Sequence[Task], kept: Sequence[ImaginedRollout]) -> int:
    """How many of the level's tasks some kept rollout imagines."""
    return len(tasks) - len(uncovered_tasks(tasks, kept))


def _real_data_path(checkpoint: str) -> Path:
    """The real dataset a grounding checkpoint was fine-tuned on (its data module's)."""
    from imaginebench.datamodules import GroundingDataModule

    hparams = torch.load(checkpoint, map_location="cpu", weights_only=True).get(
        "datamodule_hyper_parameters"
    )
    if not hparams:
        raise ValueError(
            f"{checkpoint} records no data module, so the real data's episode lengths are "
            "unknown: set horizon instead of filters.horizon_quantile"
        )
    kwargs = {k: v for k, v in hparams.items() if not k.startswith("_")}  # no "_class_path"
    return GroundingDataModule(**kwargs).resolved_real_path()


def parse_arguments(argv: list[str]) -> dict:
    """The keyword arguments of :func:`imagine_level` from a command line (configs included)."""
    from jsonargparse import ActionConfigFile, ArgumentParser

    parser = ArgumentParser(
        prog="imaginebench imagine",
        description="Imagine rollouts for a level's novel tasks with a fine-tuned grounding "
        "checkpoint, write them as an imaginary dataset and print their quality. Decoded "
        "batches are kept in <out>.partial/ until the dataset is written: rerun an interrupted "
        "command to resume it.",
    )
    parser.add_argument("-c", "--config", action=ActionConfigFile)
    parser.add_function_arguments(imagine_level)
    args = parser.parse_args(argv)
    args.pop("config", None)
    return parser.instantiate_classes(args).as_dict()


def main(argv: list[str]) -> int:
    """``imaginebench imagine -c configs/imagine_<domain>.yaml --level <level> [...]``."""
    dataset, report = imagine_level(**parse_arguments(argv))
    removed = dict(dataset.provenance["filtered"])
    redrawn = removed.pop("redrawn_actions")
    erased = removed.pop("loop_steps_erased", 0)
    print("filters removed (candidates): " + ", ".join(f"{k} {v}" for k, v in removed.items()))
    print(f"actions redrawn after an illegal or uncertain imagined state: {redrawn}")
    if erased:
        print(f"steps erased from loops: {erased}")
    covered = dataset.provenance["coverage"]
    print(
        f"tasks imagined: {covered['covered']} of the level's {covered['tasks']} "
        f"({covered['covered_first_round']} before coverage rounds; {covered['rounds']} run)"
    )
    print(format_table([report]))
    return 0
