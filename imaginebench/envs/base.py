"""Domain-independent pieces shared by every environment: levels, tasks and task suites.

A :class:`Task` judges success from the environment's *state vectors only* (never from actions or
simulator internals), so the same code scores simulator rollouts and LLM-imagined rollouts.
"""

from __future__ import annotations

import importlib
import json
from abc import ABC, abstractmethod
from dataclasses import dataclass
from functools import cached_property
from typing import Any, ClassVar, Iterator, Literal, Sequence

import gymnasium as gym
import numpy as np

Level = Literal["train", "rephrase", "easy", "hard"]
LEVELS: tuple[Level, ...] = ("train", "rephrase", "easy", "hard")
Wording = Literal["train", "rephrase"]
# Modules defining Task families (imported on demand by Task.from_spec).
TASK_MODULES: tuple[str, ...] = (
    "imaginebench.envs.clevr.tasks",
    "imaginebench.envs.babyai.tasks",
    "imaginebench.envs.halfcheetah.tasks",
    "imaginebench.envs.metaworld.tasks",
    "imaginebench.envs.libero.tasks",
)
SPLITS = ("data", "eval")


def action_spec_of(space: Any) -> dict[str, Any]:
    """The dataset/module description of a gymnasium action space."""
    if hasattr(space, "n"):
        return {"type": "discrete", "n": int(space.n)}
    return {
        "type": "continuous",
        "shape": list(space.shape),
        "low": float(np.min(space.low)),
        "high": float(np.max(space.high)),
    }


def check_level(level: str) -> Level:
    """Return ``level`` unchanged if it is one of :data:`LEVELS`, else raise a clear error."""
    if level not in LEVELS:
        raise ValueError(f"unknown level {level!r}; expected one of {', '.join(LEVELS)}")
    return level  # type: ignore[return-value]


def check_state_array(states: Any, state_dim: int, domain: str) -> np.ndarray:
    """``states`` ``(..., state_dim)`` as float64, else a clear error naming ``domain``."""
    arr = np.asarray(states, dtype=np.float64)
    if arr.ndim == 0 or arr.shape[-1] != state_dim:
        raise ValueError(f"{domain} states must have {state_dim} entries, got shape {arr.shape}")
    return arr


def check_rollout_actions(states: np.ndarray, actions: Any, action_dim: int) -> np.ndarray:
    """``actions`` ``(..., T, action_dim)`` of the rollout ``states`` ``(..., T + 1, D)`` as
    float64, else a clear error."""
    a = np.asarray(actions, dtype=np.float64)
    if states.ndim < 2 or a.shape != states.shape[:-2] + (states.shape[-2] - 1, action_dim):
        raise ValueError(
            f"actions must have shape (..., T, {action_dim}) for states (..., T + 1, "
            f"{states.shape[-1]}); got actions {a.shape} and states {states.shape}"
        )
    return a


class Task(ABC):
    """A task family instance: parameters, instruction wordings and a state-only success test.

    Subclasses are frozen dataclasses whose fields are the task parameters, registered by
    ``family`` so that :meth:`from_spec` can rebuild any task from :meth:`spec`.
    """

    family: ClassVar[str]
    _registry: ClassVar[dict[str, type["Task"]]] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "family" in cls.__dict__:
            Task._registry[cls.family] = cls

    @abstractmethod
    def success(self, states: np.ndarray) -> np.ndarray:
        """Judge a trajectory of states.

        Args:
            states: ``(..., T, state_dim)`` states from the episode start (index 0 = initial state).

        Returns:
            ``(..., T)`` bool array; entry ``t`` is True when the task counts as accomplished at
            step ``t`` given the history up to ``t``.
        """

    @abstractmethod
    def progress(self, states: np.ndarray) -> np.ndarray:
        """A shaped potential per step, ``(..., T)`` floats, higher is closer to success."""

    def observed(self, states: np.ndarray) -> np.ndarray:
        """The last of ``(T, state_dim)`` states as the environment shows it after that history.

        The task's observation rules, read from the states alone, so that an imagined rollout
        shows what the environment would (e.g. a two-stage task whose target switches to its
        second goal once the first is reached). By default the last state unchanged."""
        return np.asarray(states)[-1]

    def as_stage_task(self, states: np.ndarray, instruction: str) -> tuple[str, np.ndarray]:
        """The words and the ``(state_dim,)`` bool entries in view of the task of the current
        stage of a ``(T, state_dim)`` history.

        A composition of tasks the real data hold can present each stage as the training task
        it is (that task's words; the other stages' entities out of view), so that imagination
        (``decoding.stage_tasks``) shows the grounding and the state model what they were
        taught. By default ``instruction`` and every entry."""
        return instruction, np.ones(np.shape(states)[-1], dtype=bool)

    @abstractmethod
    def instructions(self, wording: Wording = "train") -> list[str]:
        """All natural-language wordings of this task for a wording set."""

    @abstractmethod
    def to_params(self) -> dict[str, Any]:
        """JSON-serialisable parameters that rebuild this task with :meth:`from_params`."""

    @classmethod
    @abstractmethod
    def from_params(cls, params: dict[str, Any]) -> "Task":
        """Inverse of :meth:`to_params`."""

    def is_success(self, states: np.ndarray) -> bool:
        """True if the trajectory ``(T, state_dim)`` has accomplished the task at its last step."""
        return bool(self.success(np.asarray(states))[..., -1])

    def spec(self) -> str:
        """Canonical JSON string identifying this task (stored in dataset files)."""
        return json.dumps({"family": self.family, **self.to_params()}, sort_keys=True)

    @staticmethod
    def from_spec(spec: str | dict[str, Any]) -> "Task":
        """Rebuild a task from :meth:`spec` output (string or already-parsed dict)."""
        params = dict(json.loads(spec) if isinstance(spec, str) else spec)
        family = params.pop("family", None)
        if family not in Task._registry:
            for module in TASK_MODULES:  # task families register themselves on import
                importlib.import_module(module)
        if family not in Task._registry:
            raise ValueError(
                f"unknown task family {family!r}; known: {', '.join(sorted(Task._registry))}"
            )
        return Task._registry[family].from_params(params)


@dataclass(frozen=True)
class EpisodeSpec:
    """Everything needed to start one episode reproducibly."""

    task: Task
    instruction: str
    initial_state: np.ndarray
    level: Level


class TaskSuite(ABC):
    """The tasks of one domain per level, and deterministic episode sampling."""

    domain: ClassVar[str]

    @abstractmethod
    def build_levels(self) -> dict[str, list[Task]]:
        """Every level's fixed list of tasks (called once per suite, then cached)."""

    @cached_property
    def _levels(self) -> dict[str, list[Task]]:
        return self.build_levels()

    def tasks(self, level: Level) -> Sequence[Task]:
        """The fixed list of tasks of ``level``."""
        return self._levels[check_level(level)]

    def wording(self, level: Level) -> Wording:
        """Which wording set instructions of ``level`` are drawn from: the unseen wordings at
        ``rephrase``, the training wordings everywhere else."""
        return "rephrase" if level == "rephrase" else "train"

    @abstractmethod
    def sample_initial_state(self, task: Task, rng: np.random.Generator) -> np.ndarray:
        """An initial state for ``task`` in which it is not yet accomplished."""

    def sample_episode(self, level: Level, rng: np.random.Generator) -> EpisodeSpec:
        """Draw a (task, instruction, initial state) triple from ``rng``."""
        check_level(level)
        tasks = self.tasks(level)
        task = tasks[int(rng.integers(len(tasks)))]
        wordings = task.instructions(self.wording(level))
        instruction = wordings[int(rng.integers(len(wordings)))]
        return EpisodeSpec(task, instruction, self.sample_initial_state(task, rng), level)

    def plan_episode(
        self, level: Level, options: dict[str, Any], rng: np.random.Generator
    ) -> EpisodeSpec:
        """The episode an env's ``reset(options=...)`` starts: ``options["episode"]`` whole, or
        built from any of ``"task"`` (a :class:`Task` or its spec), ``"instruction"`` and
        ``"initial_state"``, the rest drawn from ``rng`` (a task's wording of ``level``, an
        initial state where the task is not yet accomplished)."""
        if options.get("episode") is not None:
            return options["episode"]
        task = options.get("task")
        if task is None:
            drawn = self.sample_episode(level, rng)
            task, instruction, initial = drawn.task, drawn.instruction, drawn.initial_state
        else:
            task = Task.from_spec(task) if isinstance(task, (str, dict)) else task
            wordings = task.instructions(self.wording(level))
            instruction = wordings[int(rng.integers(len(wordings)))]
            initial = None
        if options.get("instruction") is not None:
            instruction = options["instruction"]
        if options.get("initial_state") is not None:
            initial = options["initial_state"]
        if initial is None:
            initial = self.sample_initial_state(task, rng)
        return EpisodeSpec(task, instruction, np.asarray(initial), level)

    def episodes(
        self, level: Level, n: int, seed: int, split: Literal["data", "eval"] = "eval"
    ) -> list[EpisodeSpec]:
        """A fixed, seeded list of ``n`` episodes (the same for every algorithm and run).

        ``split`` separates the streams: data collection draws from ``"data"``, evaluation from
        ``"eval"``, so no evaluation episode repeats a training episode's start for any seeds.
        """
        if split not in SPLITS:
            raise ValueError(f"split must be one of {SPLITS}, got {split!r}")
        rng = np.random.default_rng([seed, LEVELS.index(check_level(level)), SPLITS.index(split)])
        return [self.sample_episode(level, rng) for _ in range(n)]

    def episodes_of(
        self, level: Level, tasks: Sequence[Task], n_each: int, seed: int, draw: int
    ) -> list[EpisodeSpec]:
        """``n_each`` episodes of each of ``tasks`` (a wording of ``level`` and an initial state
        drawn for each), from a stream of the data split numbered ``draw >= 1``, apart from
        :meth:`episodes`' (``draw`` 0) and from every other draw's."""
        rng = self._data_stream(level, seed, draw)
        return [
            self.plan_episode(level, {"task": task}, rng) for task in tasks for _ in range(n_each)
        ]

    def episode_stream(self, level: Level, seed: int, draw: int) -> Iterator[EpisodeSpec]:
        """Endless episodes of ``level`` (any task) from the data split's stream numbered
        ``draw >= 1`` (the numbering :meth:`episodes_of` uses: give the two different ones)."""
        rng = self._data_stream(level, seed, draw)
        while True:
            yield self.sample_episode(level, rng)

    @staticmethod
    def _data_stream(level: Level, seed: int, draw: int) -> np.random.Generator:
        if draw < 1:
            raise ValueError(f"draw must be >= 1 (0 is the stream of episodes()), got {draw}")
        return np.random.default_rng(
            [seed, LEVELS.index(check_level(level)), SPLITS.index("data"), draw]
        )


class InstructionEnv(gym.Env):
    """Base of the domains' gymnasium envs: the observation is the raw state, the instruction
    travels in ``info``. Subclasses set ``level``, ``suite``, ``task`` and ``instruction`` and
    report every step's ``info`` through :meth:`_info`."""

    level: Level
    suite: TaskSuite
    task: Task | None
    instruction: str

    def _info(self, success: bool) -> dict[str, Any]:
        """``instruction``, ``task`` (its spec), ``level`` and ``is_success``."""
        if self.task is None:
            raise RuntimeError("call reset() before step()")
        return {
            "instruction": self.instruction,
            "task": self.task.spec(),
            "level": self.level,
            "is_success": success,
        }
