"""The BabyAI task suite: tasks per level and initial-state sampling."""

from __future__ import annotations

import itertools

import numpy as np

from imaginebench.envs.babyai.tasks import (
    GOTO_TYPES,
    BabyAITask,
    GoCenter,
    GoTo,
    GoWall,
    Open,
    OpenGo,
    OpenLock,
    OpenPick,
    PickUp,
    PutLine,
    PutNext,
    PutPile,
)
from imaginebench.envs.babyai.world import (
    AGENT_ROW,
    CLOSED,
    COLOR_NAMES,
    DOOR_COL,
    DOOR_COLOR,
    DOOR_ROW,
    DOOR_STATE,
    INTERIOR,
    LOCKED,
    PICKABLE,
    SLOT,
    STATE_DIM,
)
from imaginebench.envs.base import Task, TaskSuite

SUITE_SEED = 20240611  # fixes the subsample of put-next colour pairs once and for all
PUTNEXT_PER_TYPE_PAIR = 10  # of the 36 colour pairs per ordered type pair (60 tasks in all)
_SPAN = range(INTERIOR[0], INTERIOR[1] + 1)
_CELLS = [(r, c) for r in _SPAN for c in _SPAN]
_CENTRE_CELLS = [(r, c) for r, c in _CELLS if r in (3, 4) and c in (3, 4)]
_RIM_CELLS = [(r, c) for r, c in _CELLS if r not in (3, 4) and c not in (3, 4)]


class BabyAITaskSuite(TaskSuite):
    """Tasks per level.

    * ``train`` / ``rephrase`` (108 tasks, training / unseen wordings): go to each of the 4
      object types in each of the 6 colours (24), open the door in each colour (6), pick up
      each of 3 pickable types in each colour (18), and put-next for every ordered pair of
      distinct pickable types with 10 of the 36 colour pairs each, drawn once with a fixed seed
      (60; all 216 would make put-next 80 % of the level).
    * ``easy``: open-then-go, open-then-pick, go to a wall, go to the centre.
    * ``hard``: unlock the door with the key, put the three items in a line, pile them in an L.
    """

    domain = "babyai"

    def build_levels(self) -> dict[str, list[Task]]:
        rng = np.random.default_rng(SUITE_SEED)
        train: list[Task] = [GoTo(t, c) for t in GOTO_TYPES for c in COLOR_NAMES]
        train += [Open(c) for c in COLOR_NAMES]
        train += [PickUp(t, c) for t in PICKABLE for c in COLOR_NAMES]
        colour_pairs = list(itertools.product(COLOR_NAMES, repeat=2))
        for t1, t2 in itertools.permutations(PICKABLE, 2):
            picked = rng.choice(len(colour_pairs), PUTNEXT_PER_TYPE_PAIR, replace=False)
            for i in sorted(picked):
                c1, c2 = colour_pairs[i]
                train.append(PutNext(t1, c1, t2, c2))
        easy: list[Task] = [OpenGo(), OpenPick(), GoWall(), GoCenter()]
        hard: list[Task] = [OpenLock(), PutLine(), PutPile()]
        return {"train": train, "rephrase": train, "easy": easy, "hard": hard}

    def sample_initial_state(self, task: Task, rng: np.random.Generator) -> np.ndarray:
        """Ball, box, key and agent on four distinct random interior cells, the door closed at a
        random row of the east wall, every colour random except those the task fixes; GoWall
        starts the agent in the centre, GoCenter away from it, OpenLock locks the door and
        gives it the key's colour. Layouts already solving the task are redrawn."""
        if not isinstance(task, BabyAITask):
            raise TypeError(f"not a BabyAI task: {task!r}")
        for _ in range(1000):
            state = _random_layout(task, rng)
            if not task.is_success(state[None]):
                return state
        raise RuntimeError(f"could not sample an initial state where {task.spec()} is unsolved")


def _random_layout(task: BabyAITask, rng: np.random.Generator) -> np.ndarray:
    state = np.zeros(STATE_DIM, dtype=np.int64)
    if isinstance(task, (GoWall, GoCenter)):
        starts = _CENTRE_CELLS if isinstance(task, GoWall) else _RIM_CELLS
        agent = starts[int(rng.integers(len(starts)))]
        free = [cell for cell in _CELLS if cell != agent]
        objects = [free[i] for i in rng.choice(len(free), 3, replace=False)]
    else:
        picked = [_CELLS[i] for i in rng.choice(len(_CELLS), 4, replace=False)]
        agent, objects = picked[0], picked[1:]
    for name, cell in zip(PICKABLE, objects):
        state[SLOT[name] + 1 : SLOT[name] + 3] = cell
    state[AGENT_ROW : AGENT_ROW + 2] = agent
    colours = rng.integers(len(COLOR_NAMES), size=4)  # ball, box, key, door
    state[[SLOT["ball"], SLOT["box"], SLOT["key"], DOOR_COLOR]] = colours
    state[DOOR_ROW] = rng.integers(INTERIOR[0], INTERIOR[1] + 1)
    state[DOOR_ROW + 1] = DOOR_COL
    state[DOOR_STATE] = CLOSED
    for name, colour in task.initial_colours().items():
        state[DOOR_COLOR if name == "door" else SLOT[name]] = colour
    if isinstance(task, OpenLock):
        state[DOOR_STATE] = LOCKED
        state[DOOR_COLOR] = state[SLOT["key"]]
    return state.astype(np.float32)
