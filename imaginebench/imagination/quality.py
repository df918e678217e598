"""Quality of imaginary rollouts (the measures of ImagineBench's Table 2).

* **consistency** — fraction of rollouts that satisfy their own instruction's success function
  at some step;
* **transition correctness** — fraction of steps whose state change is physically right for the
  action taken (the domain's judge, e.g. replaying the step in the simulator);
* **legality** — fraction of states that are physically possible (the domain's judge);
* **replayed success** — fraction of rollouts whose actions, executed in the simulator from
  the rollout's (real) initial state, accomplish the instruction: what an imitation learner
  could at best get from the actions, whatever the imagined states say.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Iterator, Sequence

import numpy as np

from imaginebench.atomic import write_text_atomically
from imaginebench.data.dataset import Episode
from imaginebench.envs import get_domain, make
from imaginebench.envs.base import EpisodeSpec, Task


@dataclass
class QualityReport:
    """Quality measures of one set of rollouts (fractions in [0, 1])."""

    level: str
    rollouts: int
    consistency: float
    transition_correctness: float
    legality: float
    mean_length: float
    replayed_success: float

    def to_dict(self) -> dict:
        return asdict(self)


def quality_report(domain: str, level: str, episodes: Sequence[Episode]) -> QualityReport:
    """Judge ``episodes`` (imagined or real) of ``domain`` with its success functions and
    physics."""
    if not episodes:
        raise ValueError("quality_report needs at least one episode")
    judge = get_domain(domain).make_quality()
    consistent, correct, legal = [], [], []
    for ep in episodes:
        task = Task.from_spec(ep.task_spec)
        consistent.append(bool(task.success(ep.states)[1:].any()))
        correct.append(judge.correct_transitions(ep.states, ep.actions))
        legal.append(judge.legal(ep.states))
    return QualityReport(
        level=level,
        rollouts=len(episodes),
        consistency=float(np.mean(consistent)),
        transition_correctness=float(np.concatenate(correct).mean()),
        legality=float(np.concatenate(legal).mean()),
        mean_length=float(np.mean([len(ep) for ep in episodes])),
        replayed_success=float(replayed_success(domain, episodes).mean()),
    )


def replay(domain: str, episodes: Sequence[Episode]) -> Iterator[tuple[np.ndarray, bool]]:
    """Per episode, its actions executed in the simulator from its first state until the
    instruction is accomplished (or they run out, or the episode terminates): the ``(t + 1, D)``
    states visited, the first included, and whether the instruction was accomplished."""
    envs: dict[str, Any] = {}
    try:
        for ep in episodes:
            if ep.level not in envs:  # no time limit: the episode's own actions set the length
                envs[ep.level] = make(domain, ep.level, max_episode_steps=10**9).unwrapped
            env = envs[ep.level]
            spec = EpisodeSpec(Task.from_spec(ep.task_spec), ep.instruction, ep.states[0], ep.level)
            env.reset(options={"episode": spec})
            states, success = [np.asarray(ep.states[0], np.float32)], False
            for action in ep.actions:
                obs, _, terminated, _, info = env.step(action)
                states.append(np.asarray(obs, np.float32))
                success = bool(info["is_success"])
                if success or terminated:
                    break
            yield np.stack(states), success
    finally:
        for env in envs.values():
            env.close()


def replayed_success(domain: str, episodes: Sequence[Episode]) -> np.ndarray:
    """``(N,)`` bool: executing each episode's actions in the simulator from its first state
    accomplishes its instruction at some step."""
    return np.array([success for _, success in replay(domain, episodes)], dtype=bool)


def format_table(reports: Sequence[QualityReport]) -> str:
    """A Markdown table of reports (percentages)."""
    lines = [
        "| level | rollouts | consistency | transition correctness | legality | "
        "replayed success | mean length |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in reports:
        lines.append(
            f"| {r.level} | {r.rollouts} | {100 * r.consistency:.1f} % | "
            f"{100 * r.transition_correctness:.1f} % | {100 * r.legality:.1f} % | "
            f"{100 * r.replayed_success:.1f} % | {r.mean_length:.1f} |"
        )
    return "\n".join(lines)


def save_reports(reports: Sequence[QualityReport], path: str) -> None:
    with open(path, "w") as f:
        json.dump([r.to_dict() for r in reports], f, indent=2)


def save_report_beside(dataset_path: str | Path, report: QualityReport, provenance: Any) -> Path:
    """Write ``{"quality": ..., "provenance": ...}`` atomically to the dataset file's
    ``<stem>.quality.json``; return that path."""
    path = Path(dataset_path).with_suffix(".quality.json")
    body = {"quality": report.to_dict(), "provenance": provenance}
    write_text_atomically(path, json.dumps(body, indent=2) + "\n")
    return path
