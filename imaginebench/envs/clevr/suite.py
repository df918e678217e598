"""The CLEVR-Robot task suite: which tasks belong to each level, and initial-state sampling."""

from __future__ import annotations

import itertools

import numpy as np

from imaginebench.envs.base import Task, TaskSuite
from imaginebench.envs.clevr.physics import NUM_BALLS, X_RANGE, Y_RANGE
from imaginebench.envs.clevr.tasks import (
    AllOf,
    Gather,
    Line,
    Near,
    Push,
    Relation,
    Sequential,
    compatible_relations,
)

# Initial positions: uniform inside the walls (upper y bound of the original: 0.5), centres at
# least this far apart (a clear gap between balls).
INIT_Y_MAX = 0.5
MIN_CENTER_DISTANCE = 0.36
SUITE_SEED = 20240527  # fixes the sampled hard-level compositions once and for all


def _all_relations() -> list[Relation]:
    return [
        Relation(m, a, d) for m, a in itertools.permutations(range(NUM_BALLS), 2) for d in range(4)
    ]


def _sample_compositions(rng: np.random.Generator, k: int, n: int) -> list[tuple[Relation, ...]]:
    pool = _all_relations()
    out: list[tuple[Relation, ...]] = []
    seen: set[frozenset[Relation]] = set()
    while len(out) < n:
        rel = tuple(pool[i] for i in rng.choice(len(pool), size=k, replace=False))
        if compatible_relations(rel) and frozenset(rel) not in seen:
            seen.add(frozenset(rel))
            out.append(rel)
    return out


class ClevrTaskSuite(TaskSuite):
    """Tasks per level.

    * ``train`` / ``rephrase``: the 80 relation goals (20 ordered ball pairs x 4 directions),
      with training wordings / unseen wordings.
    * ``easy``: 20 single-ball pushes (5 balls x 4 directions) and 10 "next to" pairs.
    * ``hard``: 24 two-relation and 12 three-relation conjunctions, 12 sequential two-stage
      goals, 8 three-ball and 4 four-ball lines plus the five-ball colour-order line, and
      gathering around each of the 5 balls.
    """

    domain = "clevr"

    def build_levels(self) -> dict[str, list[Task]]:
        rng = np.random.default_rng(SUITE_SEED)
        relations = _all_relations()
        easy: list[Task] = [Push(b, d) for b in range(NUM_BALLS) for d in range(4)]
        easy += [Near(a, b) for a, b in itertools.combinations(range(NUM_BALLS), 2)]
        hard: list[Task] = [AllOf(r) for r in _sample_compositions(rng, 2, 24)]
        hard += [AllOf(r) for r in _sample_compositions(rng, 3, 12)]
        hard += [Sequential(r) for r in _sample_compositions(rng, 2, 12)]
        perms3 = list(itertools.permutations(range(NUM_BALLS), 3))
        hard += [Line(perms3[i]) for i in rng.choice(len(perms3), 8, replace=False)]
        perms4 = list(itertools.permutations(range(NUM_BALLS), 4))
        hard += [Line(perms4[i]) for i in rng.choice(len(perms4), 4, replace=False)]
        hard.append(Line(tuple(range(NUM_BALLS))))
        hard += [Gather(c) for c in range(NUM_BALLS)]
        return {"train": relations, "rephrase": relations, "easy": easy, "hard": hard}

    def sample_initial_state(self, task: Task, rng: np.random.Generator) -> np.ndarray:
        for _ in range(1000):
            state = sample_ball_positions(rng)
            if not task.is_success(state[None]) and _has_room(task, state):
                return state
        raise RuntimeError(f"could not sample an initial state where {task.spec()} is unsolved")


def _has_room(task: Task, state: np.ndarray) -> bool:
    """A push task needs space between its ball and the wall it is pushed towards."""
    if not isinstance(task, Push):
        return True
    x, y = state[2 * task.ball : 2 * task.ball + 2]
    lo, hi = (X_RANGE, Y_RANGE)[task.direction % 2 == 0]
    coordinate = (x, y)[task.direction % 2 == 0]
    room = hi - coordinate if task.direction in (0, 3) else coordinate - lo
    return room >= 0.25


def sample_ball_positions(rng: np.random.Generator) -> np.ndarray:
    """Place the balls one by one, uniformly inside the walls, with a clear gap between them."""
    placed: list[np.ndarray] = []
    tries = 0
    while len(placed) < NUM_BALLS:
        tries += 1
        if tries > 500:  # a dead end (no room left): start over
            placed, tries = [], 0
        p = np.array([rng.uniform(*X_RANGE), rng.uniform(Y_RANGE[0], INIT_Y_MAX)])
        if all(np.linalg.norm(p - q) >= MIN_CENTER_DISTANCE for q in placed):
            placed.append(p)
    return np.concatenate(placed).astype(np.float32)
