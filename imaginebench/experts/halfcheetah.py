"""HalfCheetah experts: five skills learned by online SAC, composed per task.

Skills (each a task-specific tanh-Gaussian SAC actor over the 18-d state, trained by
:func:`imaginebench.experts.online_sac.train_online_sac` on its own reward, 200-step episodes):

| skill | reward per step (``v = Δx / dt``, ``h`` = clearance of the body's lowest point) |
|---|---|
| ``run_forward`` / ``run_backward`` | ``±v - 0.1 |a|^2`` (the run tasks' own reward) |
| ``jump_forward`` / ``jump_backward`` | ``10 max(h, 0) ± 0.5 v - 0.1 |a|^2`` |
| ``jump_in_place`` | ``10 max(h, 0) - |v| - 0.1 |a|^2`` |

The run tasks' reward alone never asks for a flight phase, and the jump tasks' original reward
(``±v``) is the run reward; the jump skills therefore reward the height of the lowest point,
which only a flight phase raises (rearing up keeps a foot on the floor).

Tasks map to skills: a run uses the run skill of its direction, a jump the jump skill of its
direction, jumping in place its own skill; a shuttle runs in its first direction until 3.5 m
out (0.5 m past the task's 3 m) and then runs back. The run skills run about 18 m in 99 steps;
the runs of the training tasks are **paced**: their torques are scaled by
:data:`RUN_PACE_TORQUE` (a deterministic function of the state, so the pace can be imitated),
which covers 7.3-8.1 m by step 99 (forward, 0.44) and 7.5-8.0 m (backward, 0.40) on 20 episodes
each: above the 7 m the runs need and below the 8.5 m pace of "faster", so the real data never
shows a faster run. The faster runs use the skills at full torque. The expert acts with the
deterministic (mean) action; ``epsilon`` replaces it by a uniformly random one.

Weights ship in ``imaginebench/experts/weights/halfcheetah/<skill>.pt`` (float16, about 150 kB
each) with ``MANIFEST.json`` (checksums, training budget and the command that retrains them:
``imaginebench train-expert --domain halfcheetah --skill <skill>``).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
import torch
from gymnasium.envs.mujoco.half_cheetah_v5 import HalfCheetahEnv as _GymHalfCheetah

from imaginebench.atomic import atomic_path, write_text_atomically
from imaginebench.config import as_config
from imaginebench.data.shipped import MANIFEST, file_sha256
from imaginebench.envs.base import Task
from imaginebench.envs.halfcheetah.env import advance
from imaginebench.envs.halfcheetah.physics import (
    ACTION_DIM,
    CTRL_COST_WEIGHT,
    DT,
    DX,
    STATE_DIM,
    clearance,
    set_state,
)
from imaginebench.envs.halfcheetah.suite import HalfCheetahTaskSuite
from imaginebench.envs.halfcheetah.tasks import (
    SHUTTLE_DISTANCE,
    Jump,
    JumpInPlace,
    Run,
    Shuttle,
    direction_sign,
)
from imaginebench.experts.online_sac import OnlineSACConfig, train_online_sac
from imaginebench.modules.backbone import GaussianHead, StateInstructionEncoder

WEIGHTS_DIR = Path(__file__).resolve().parent / "weights" / "halfcheetah"
JUMP_HEIGHT_WEIGHT = 10.0
JUMP_SPEED_WEIGHT = 0.5
SHUTTLE_TURN = SHUTTLE_DISTANCE + 0.5  # m out before turning back
RUN_PACE_TORQUE = {"forward": 0.44, "backward": 0.40}  # torque scale of the paced runs

Reward = Callable[[np.ndarray, np.ndarray], float]  # (action, next state) -> reward


def _ctrl(action: np.ndarray) -> float:
    return -CTRL_COST_WEIGHT * float(np.sum(np.square(action)))


def _run(sign: float) -> Reward:
    return lambda a, s: sign * float(s[DX]) / DT + _ctrl(a)


def _jump(sign: float) -> Reward:
    def reward(a: np.ndarray, s: np.ndarray) -> float:
        height = max(float(clearance(s)), 0.0)
        return JUMP_HEIGHT_WEIGHT * height + JUMP_SPEED_WEIGHT * sign * float(s[DX]) / DT + _ctrl(a)

    return reward


def _jump_in_place(a: np.ndarray, s: np.ndarray) -> float:
    height = max(float(clearance(s)), 0.0)
    return JUMP_HEIGHT_WEIGHT * height - abs(float(s[DX])) / DT + _ctrl(a)


SKILLS: dict[str, Reward] = {
    "run_forward": _run(1.0),
    "run_backward": _run(-1.0),
    "jump_forward": _jump(1.0),
    "jump_backward": _jump(-1.0),
    "jump_in_place": _jump_in_place,
}


def check_skill(skill: str) -> str:
    if skill not in SKILLS:
        raise ValueError(f"unknown HalfCheetah skill {skill!r}; expected one of {list(SKILLS)}")
    return skill


class SkillEnv:
    """HalfCheetah-v5 with the 18-d state, HalfCheetah-v5's reset distribution and a skill's
    reward (no success termination: the online SAC loop cuts 200-step episodes)."""

    state_dim, action_dim = STATE_DIM, ACTION_DIM

    def __init__(self, skill: str) -> None:
        self.reward = SKILLS[check_skill(skill)]
        self.sim = _GymHalfCheetah()
        self.suite = HalfCheetahTaskSuite()

    def reset(self, rng: np.random.Generator) -> np.ndarray:
        state = self.suite.sample_initial_state(Run("forward"), rng)
        set_state(self.sim.model, self.sim.data, state)
        return state

    def step(self, action: np.ndarray) -> tuple[np.ndarray, float]:
        state = advance(self.sim, action)
        return state, self.reward(action, state)


def skill_for(task: Task, trajectory: list[np.ndarray] | np.ndarray) -> str:
    """The skill to act with for ``task`` given the states so far."""
    if isinstance(task, Run):
        return f"run_{task.direction}"
    if isinstance(task, Jump):
        return f"jump_{task.direction}"
    if isinstance(task, JumpInPlace):
        return "jump_in_place"
    if isinstance(task, Shuttle):
        dx = np.asarray(trajectory, dtype=np.float64)[1:, DX]
        peak = float(np.max(direction_sign(task.first) * np.cumsum(dx), initial=0.0))
        if peak < SHUTTLE_TURN:
            return f"run_{task.first}"
        return "run_backward" if task.first == "forward" else "run_forward"
    raise TypeError(f"not a HalfCheetah task: {task!r}")


def torque_scale_for(task: Task) -> float:
    """Factor on the skill's torques: :data:`RUN_PACE_TORQUE` for a run at the normal pace."""
    if isinstance(task, Run) and not task.fast:
        return RUN_PACE_TORQUE[task.direction]
    return 1.0


# -- weights ----------------------------------------------------------------------------------
def save_actor(agent: Any, path: Path, meta: dict[str, Any]) -> None:
    """Save a trained agent's actor (float16) and its construction sizes."""
    state = {k: v.detach().to(torch.float16) for k, v in agent.actor.state_dict().items()}
    sizes = {
        "embedding_dim": agent.embedding_dim,
        "hidden": list(agent.hidden),
        "instruction_dim": agent.instruction_dim,
    }
    with atomic_path(path) as tmp:
        torch.save({"actor": state, "sizes": sizes, "meta": meta}, tmp)


def load_actor(path: Path) -> tuple[GaussianHead, torch.Tensor]:
    """The actor saved by :func:`save_actor` (float32) and its constant instruction input."""
    if not path.exists():
        raise FileNotFoundError(
            f"missing expert weights {path}; retrain them with `imaginebench train-expert "
            f"--domain halfcheetah --skill {path.stem}`"
        )
    blob = torch.load(path, map_location="cpu", weights_only=True)
    sizes = blob["sizes"]
    encoder = StateInstructionEncoder(
        STATE_DIM, sizes["embedding_dim"], sizes["hidden"], sizes["instruction_dim"]
    )
    actor = GaussianHead(encoder, ACTION_DIM)
    actor.load_state_dict({k: v.float() for k, v in blob["actor"].items()})
    return actor.eval().requires_grad_(False), torch.zeros(1, sizes["embedding_dim"])


@lru_cache(maxsize=None)
def _cached_actor(path: str) -> tuple[GaussianHead, torch.Tensor]:
    return load_actor(Path(path))


class HalfCheetahExpert:
    """The composed expert: ``act(env)`` for an :class:`~imaginebench.envs.halfcheetah.env.
    HalfCheetahEnv` after ``reset``."""

    def __init__(
        self, epsilon: float = 0.0, seed: int | None = None, weights_dir: str | Path | None = None
    ) -> None:
        if not 0.0 <= epsilon <= 1.0:
            raise ValueError(f"epsilon must be in [0, 1], got {epsilon}")
        self.epsilon = epsilon
        self.rng = np.random.default_rng(seed)
        self.weights_dir = Path(weights_dir) if weights_dir else WEIGHTS_DIR

    def skill_action(self, skill: str, state: np.ndarray) -> np.ndarray:
        actor, instruction = _cached_actor(str(self.weights_dir / f"{check_skill(skill)}.pt"))
        with torch.no_grad():
            action = actor(torch.as_tensor(state, dtype=torch.float32)[None], instruction)
        return action[0].numpy()

    def act(self, env: Any) -> np.ndarray:
        skill = skill_for(env.task, env.trajectory)
        action = torque_scale_for(env.task) * self.skill_action(skill, env.trajectory[-1])
        if self.rng.random() < self.epsilon:
            action = self.rng.uniform(-1.0, 1.0, ACTION_DIM)
        return action.astype(np.float32)


# -- training ---------------------------------------------------------------------------------
def train_skill(
    skill: str,
    config: OnlineSACConfig | Mapping[str, Any],
    out_dir: str | Path | None = None,
    progress: bool = True,
    log: Callable[[str], None] = print,
) -> Path:
    """Train one skill by online SAC, save its actor and update the directory's manifest."""
    config = as_config(config, OnlineSACConfig, "config")
    out = Path(out_dir) if out_dir else WEIGHTS_DIR
    start = time.perf_counter()

    def on_episode(step: int, ret: float) -> None:
        if step % 10_000 < config.horizon:
            log(f"{skill} step {step}: return {ret:.1f}")

    agent, returns = train_online_sac(SkillEnv(skill), config, progress, on_episode)
    seconds = time.perf_counter() - start
    meta = {
        "skill": skill,
        "config": asdict(config),
        "seconds": round(seconds, 1),
        "final_returns": [round(r, 1) for r in returns[-5:]],
        "command": f"imaginebench train-expert --domain halfcheetah --skill {skill} "
        f"--steps {config.total_steps} --seed {config.seed}",
    }
    path = out / f"{skill}.pt"
    save_actor(agent, path, meta)
    _update_manifest(out, path, meta)
    log(f"saved {path} ({seconds:.0f} s; last returns {meta['final_returns']})")
    return path


def _update_manifest(directory: Path, path: Path, meta: dict[str, Any]) -> None:
    manifest_path = directory / MANIFEST
    manifest = json.loads(manifest_path.read_text()) if manifest_path.exists() else {"files": {}}
    manifest["files"][path.name] = {
        "sha256": file_sha256(path),
        "bytes": path.stat().st_size,
        **meta,
    }
    write_text_atomically(manifest_path, json.dumps(manifest, indent=2, sort_keys=True) + "\n")
