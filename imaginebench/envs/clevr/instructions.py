"""Natural-language instruction wordings of the CLEVR-Robot domain.

Five coloured balls lie on a table and a robot pushes them. Directions are table-relative as seen
by the camera: ``behind`` = +y (away from the camera), ``left`` = -x, ``front`` = -y (towards the
camera), ``right`` = +x.

* :func:`relation_wordings` with ``wording="train"`` gives the 54 wordings per goal of the
  original dataset style (18 sentence frames x 3 direction phrasings, including its intentionally
  ungrammatical variants such as "in left of").
* Every other wording (``wording="rephrase"`` and the easy / hard task families) is guaranteed by
  construction and by the tests never to be a train wording of any goal.

All functions take colour / direction *names*, validate them (``ValueError``) and return a
deterministic list of distinct strings.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Literal, Sequence

COLORS: tuple[str, ...] = ("red", "blue", "green", "purple", "cyan")
DIRECTIONS: tuple[str, ...] = ("behind", "left", "front", "right")

__all__ = [
    "COLORS",
    "DIRECTIONS",
    "relation_wordings",
    "push_wordings",
    "near_wordings",
    "all_of_wordings",
    "line_wordings",
    "gather_wordings",
    "sequential_wordings",
    "train_sentence_set",
]

# --------------------------------------------------------------------------------------------
# Validation helpers
# --------------------------------------------------------------------------------------------


def _color(name: object, role: str = "ball") -> str:
    if not isinstance(name, str) or name not in COLORS:
        raise ValueError(f"unknown {role} colour {name!r}; expected one of {', '.join(COLORS)}")
    return name


def _direction(name: object) -> str:
    if not isinstance(name, str) or name not in DIRECTIONS:
        raise ValueError(f"unknown direction {name!r}; expected one of {', '.join(DIRECTIONS)}")
    return name


def _pair(a: object, b: object, roles: tuple[str, str]) -> tuple[str, str]:
    a, b = _color(a, roles[0]), _color(b, roles[1])
    if a == b:
        raise ValueError(f"the {roles[0]} and {roles[1]} balls must differ, both are {a!r}")
    return a, b


def _relation(rel: object) -> tuple[str, str, str]:
    if isinstance(rel, str) or not isinstance(rel, Sequence) or len(rel) != 3:
        raise ValueError(f"a relation must be a (moved, anchor, direction) triple, got {rel!r}")
    moved, anchor = _pair(rel[0], rel[1], ("moved", "anchor"))
    return moved, anchor, _direction(rel[2])


def _relations(rels: object, what: str) -> list[tuple[str, str, str]]:
    if isinstance(rels, str) or not isinstance(rels, Sequence):
        raise ValueError(f"{what} must be a sequence of (moved, anchor, direction) triples")
    out = [_relation(r) for r in rels]
    if not 2 <= len(out) <= 3:
        raise ValueError(f"{what} needs 2 or 3 relations, got {len(out)}")
    return out


_OPPOSITE = {"behind": "front", "front": "behind", "left": "right", "right": "left"}


def _same_goal(r: tuple[str, str, str], s: tuple[str, str, str]) -> bool:
    """True if two relations state the same goal ("A left of B" == "B right of A")."""
    return r == s or (r[0], r[1], r[2]) == (s[1], s[0], _OPPOSITE[s[2]])


# --------------------------------------------------------------------------------------------
# Relation goals: train wordings (original dataset style)
# --------------------------------------------------------------------------------------------

_TRAIN_FRAMES: tuple[str, ...] = (
    "Push the {A} ball {D} the {B} ball",
    "Can you push the {A} ball {D} the {B} ball",
    "Can you help me push the {A} ball {D} the {B} ball",
    "Is the {A} ball {D} the {B} ball",
    "Is there any {A} ball {D} the {B} ball",
    "The {A} ball moves {D} the {B} ball",
    "The {A} ball is being pushed {D} the {B} ball",
    "The {A} ball is pushed {D} the {B} ball",
    "The {A} ball was moved {D} the {B} ball",
    "Move the {A} ball {D} the {B} ball",
    "Keep the {A} ball {D} the {B} ball",
    "Can you move the {A} ball {D} the {B} ball",
    "Can you keep the {A} ball {D} the {B} ball",
    "Can you help me move the {A} ball {D} the {B} ball",
    "Can you help me keep the {A} ball {D} the {B} ball",
    "The {A} ball was pushed {D} the {B} ball",
    "The {A} ball is being moved {D} the {B} ball",
    "The {A} ball is moved {D} the {B} ball",
)

# The ungrammatical variants are deliberate: they occur in the original data.
_TRAIN_DIRECTION_PHRASES: dict[str, tuple[str, str, str]] = {
    "behind": ("behind", "to the behind of", "in behind of"),
    "left": ("to the left of", "left", "in left of"),
    "front": ("in front of", "front", "to the front of"),
    "right": ("to the right of", "right", "in right of"),
}

# --------------------------------------------------------------------------------------------
# Relation goals: rephrased wordings (never a train wording)
# --------------------------------------------------------------------------------------------

_REPHRASE_DIRECTION_PHRASES: dict[str, tuple[str, str, str]] = {
    "behind": ("on the far side of", "farther from the camera than", "behind"),
    "left": ("on the left-hand side of", "to the left side of", "left of"),
    "front": ("ahead of", "closer to the camera than", "in front of"),
    "right": ("on the right-hand side of", "to the right side of", "right of"),
}


def _motion(phrase: str) -> str:
    """Turn a location phrase into a destination after a motion verb ("on the" -> "to the")."""
    return "to the " + phrase[len("on the ") :] if phrase.startswith("on the ") else phrase


# (template, direction phrase index, motion verb?); {A} moved, {B} anchor, {D} direction.
_REPHRASE_FRAMES: tuple[tuple[str, int, bool], ...] = (
    # synonyms for the ball and the verb
    ("Push the {A} sphere {D} the {B} sphere", 0, True),
    ("Roll the {A} orb {D} the {B} orb", 1, True),
    ("Slide the {A} ball so that it ends up {D} the {B} ball", 0, False),
    ("Reposition the {A} sphere {D} the {B} ball", 1, True),
    ("Take the {A} ball and place it {D} the {B} ball", 2, False),
    ("Steer the {A} ball over to a spot {D} the {B} ball", 0, False),
    ("Get the {A} ball into position {D} the {B} ball", 1, False),
    ("Please relocate the {A} ball {D} the {B} ball", 2, True),
    # imperatives with adverbs
    ("Gently nudge the {A} ball {D} the {B} one", 2, True),
    ("Carefully shove the {A} sphere until it sits {D} the {B} sphere", 1, False),
    ("Quickly get the {A} ball {D} the {B} ball", 0, True),
    ("Nudge the {A} ball a little at a time until it is {D} the {B} ball", 2, False),
    # indirect requests
    ("I'd like the {A} sphere to end up {D} the {B} one", 0, False),
    ("It would be great if the {A} ball were {D} the {B} ball", 1, False),
    ("I need the {A} ball to be {D} the {B} ball", 2, False),
    ("My goal is to have the {A} orb {D} the {B} orb", 0, False),
    ("The {A} ball should be sitting {D} the {B} ball", 1, False),
    ("Ideally, the {A} sphere would rest {D} the {B} sphere", 2, False),
    ("Do me a favour and move the {A} sphere {D} the {B} sphere", 1, True),
    # anchor-first phrasings
    ("Leave the {B} ball in place and bring the {A} sphere {D} it", 2, True),
    ("Using the {B} ball as a reference point, move the {A} ball {D} it", 0, True),
    # questions
    ("Could you make it so that the {A} ball sits {D} the {B} ball?", 1, False),
    ("Would you mind putting the {A} ball {D} the {B} ball?", 2, False),
    ("How about moving the {A} sphere {D} the {B} sphere?", 0, True),
    ("Are you able to get the {A} ball {D} the {B} ball?", 1, True),
    ("Is it possible to roll the {A} ball {D} the {B} ball?", 2, True),
    # emotional
    ("I can't stand the {A} ball not being {D} the {B} ball", 2, False),
    ("It would make me so happy to see the {A} ball {D} the {B} ball", 0, False),
    ("Ugh, the {A} ball really belongs {D} the {B} ball, please fix that", 1, False),
    ("I'd be thrilled if the {A} orb ended up {D} the {B} orb", 2, False),
    ("Please, I really want the {A} ball {D} the {B} ball", 0, False),
    ("Honestly, it bugs me that the {A} ball isn't {D} the {B} ball yet", 1, False),
)


def relation_wordings(
    moved: str,
    anchor: str,
    direction: str,
    wording: Literal["train", "rephrase"] = "train",
) -> list[str]:
    """Wordings of "move ball ``moved`` to ``direction`` of ball ``anchor``".

    ``wording="train"`` gives the 54 original-style wordings; ``"rephrase"`` gives wordings that
    are never a train wording of any goal.
    """
    moved, anchor = _pair(moved, anchor, ("moved", "anchor"))
    direction = _direction(direction)
    if wording == "train":
        return [
            frame.format(A=moved, B=anchor, D=phrase)
            for frame in _TRAIN_FRAMES
            for phrase in _TRAIN_DIRECTION_PHRASES[direction]
        ]
    if wording == "rephrase":
        phrases = _REPHRASE_DIRECTION_PHRASES[direction]
        return [
            frame.format(A=moved, B=anchor, D=_motion(phrases[k]) if motion else phrases[k])
            for frame, k, motion in _REPHRASE_FRAMES
        ]
    raise ValueError(f"unknown wording {wording!r}; expected 'train' or 'rephrase'")


@lru_cache(maxsize=1)
def train_sentence_set() -> frozenset[str]:
    """All train wordings over the 20 ordered ball pairs x 4 directions (4320 sentences)."""
    return frozenset(
        s
        for moved in COLORS
        for anchor in COLORS
        if moved != anchor
        for direction in DIRECTIONS
        for s in relation_wordings(moved, anchor, direction, "train")
    )


# --------------------------------------------------------------------------------------------
# Easy tasks: push one ball, bring two balls together
# --------------------------------------------------------------------------------------------

# Two table-relative adverbial phrasings per direction (no "forward": it is ambiguous here).
_PUSH_PHRASES: dict[str, tuple[str, str]] = {
    "behind": ("toward the back", "away from the camera"),
    "left": ("to the left", "leftward"),
    "front": ("toward the front", "toward the camera"),
    "right": ("to the right", "rightward"),
}

_PUSH_FRAMES: tuple[tuple[str, int], ...] = (
    ("Push the {A} ball {P}", 0),
    ("Roll the {A} ball {P} a bit", 0),
    ("Slide the {A} ball {P}", 1),
    ("Nudge the {A} ball {P}", 0),
    ("Move the {A} ball some distance {P}", 1),
    ("Can you push the {A} ball {P}?", 1),
    ("Give the {A} ball a push {P}", 0),
    ("Shove the {A} ball {P} a little", 1),
    ("I want the {A} ball moved {P}", 0),
    ("Please roll the {A} ball {P}", 1),
    ("Get the {A} ball to travel {P}", 0),
    ("Send the {A} ball rolling {P}", 1),
)


def push_wordings(ball: str, direction: str) -> list[str]:
    """Wordings of "push ball ``ball`` some distance towards ``direction``"."""
    ball, direction = _color(ball), _direction(direction)
    phrases = _PUSH_PHRASES[direction]
    return [frame.format(A=ball, P=phrases[k]) for frame, k in _PUSH_FRAMES]


_NEAR_FRAMES: tuple[str, ...] = (
    "Move the {A} ball next to the {B} ball",
    "Push the {A} ball close to the {B} ball",
    "Bring the {A} ball over to the {B} ball",
    "Put the {A} ball beside the {B} ball",
    "Can you get the {A} ball near the {B} ball?",
    "Roll the {A} ball up alongside the {B} ball",
    "Place the {A} ball right by the {B} ball",
    "I'd like the {A} ball to end up near the {B} ball",
    "Nudge the {A} ball until it sits next to the {B} ball",
    "Push the {A} ball toward the {B} ball until the two are close together",
    "Make the {A} ball a neighbour of the {B} ball",
    "The {A} ball should end up close to the {B} ball, on any side",
)


def near_wordings(a: str, b: str) -> list[str]:
    """Wordings of "bring ball ``a`` next to ball ``b`` (on any side)"."""
    a, b = _pair(a, b, ("moved", "target"))
    return [frame.format(A=a, B=b) for frame in _NEAR_FRAMES]


# --------------------------------------------------------------------------------------------
# Hard tasks: conjunctions and sequences of relations
# --------------------------------------------------------------------------------------------

# Clause-level direction phrasings: a plain one and an alternative one.
_CLAUSE_PHRASES: dict[str, tuple[str, str]] = {
    "behind": ("behind", "on the far side of"),
    "left": ("to the left of", "on the left-hand side of"),
    "front": ("in front of", "closer to the camera than"),
    "right": ("to the right of", "on the right-hand side of"),
}


def _np(rel: tuple[str, str, str], k: int = 0, motion: bool = False) -> str:
    """Noun phrase "the A ball <direction> the B ball" (a destination after a verb if motion)."""
    moved, anchor, direction = rel
    phrase = _CLAUSE_PHRASES[direction][k]
    return f"the {moved} ball {_motion(phrase) if motion else phrase} the {anchor} ball"


def _st(rel: tuple[str, str, str], k: int = 0) -> str:
    """Statement "the A ball is <direction> the B ball"."""
    moved, anchor, direction = rel
    return f"the {moved} ball is {_CLAUSE_PHRASES[direction][k]} the {anchor} ball"


def _join(items: Sequence[str]) -> str:
    """Join as "x and y" / "x, y and z"."""
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} and {items[-1]}"


def all_of_wordings(relations: Sequence[tuple[str, str, str]]) -> list[str]:
    """Wordings of "make 2 or 3 relations ``(moved, anchor, direction)`` hold at the same time".

    Each unordered pair of balls may appear in at most one relation: a second relation on the same
    pair would be either redundant or impossible (the relations' sectors are disjoint).
    """
    rels = _relations(relations, "all_of")
    pairs = [frozenset(r[:2]) for r in rels]
    if len(set(pairs)) != len(pairs):
        raise ValueError(
            f"all_of relations must use different pairs of balls (got {rels!r}); relations on one "
            "pair are redundant or contradictory"
        )
    nps = [_np(r) for r in rels]
    alt = [_np(r, 1) for r in rels]
    alt_motion = [_np(r, 1, motion=True) for r in rels]
    sts = [_st(r) for r in rels]
    alt_sts = [_st(r, 1) for r in rels]
    return [
        f"Move {_join(nps)}",
        "Make sure " + _join([f"that {s}" for s in sts]),
        f"Push {nps[0]} while also pushing {_join(nps[1:])}",
        f"Arrange the balls so that {_join(alt_sts)}",
        f"I want {_join(nps)} at the same time",
        f"Get {alt_motion[0]} and, at the same time, {_join(alt_motion[1:])}",
        f"Can you put {_join(nps)}?",
        f"All of these must hold together: {_join(sts)}",
        "The goal is " + _join([f"for {n.replace(' ball ', ' ball to be ', 1)}" for n in nps]),
        f"Reach a state where {_join(sts)}",
        f"Position {nps[0]} as well as {_join(nps[1:])}",
        f"Simultaneously have {_join(alt)}",
    ]


# (first stage, middle stage, last of three stages, ending); {c} is the stage's noun phrase.
_SEQUENTIAL_FRAMES: tuple[tuple[str, str, str, str], ...] = (
    ("First move {c}", ", then push {c}", ", and finally push {c}", ""),
    ("Start by pushing {c}", "; after that, push {c}", "; finally, push {c}", ""),
    ("Move {c} first", ", and only then move {c}", ", and after that move {c}", ""),
    ("Step one: move {c}", "; step two: move {c}", "; step three: move {c}", ""),
    ("Can you first push {c}", " and then push {c}", " and lastly push {c}", "?"),
    ("Do this in order: move {c}", ", next move {c}", ", last move {c}", ""),
    ("Begin by moving {c}", "; once that is done, move {c}", "; after that, move {c}", ""),
    ("One after the other: get {c}", ", then get {c}", ", then get {c}", ""),
    ("Before anything else, push {c}", ". Next, push {c}", ". Finally, push {c}", ""),
    ("I'd like you to move {c} first", " and then move {c}", " and at the end move {c}", ""),
    ("Sequence of goals: {c}", ", then {c}", ", then {c}", ""),
    ("To begin, roll {c}", "; afterwards, roll {c}", "; to finish, roll {c}", ""),
)


def sequential_wordings(stages: Sequence[tuple[str, str, str]]) -> list[str]:
    """Wordings of "achieve 2 or 3 relations ``(moved, anchor, direction)`` one after another".

    Consecutive stages must state different goals (otherwise the later one is already reached).
    """
    rels = _relations(stages, "sequential")
    for r, s in zip(rels, rels[1:]):
        if _same_goal(r, s):
            raise ValueError(f"consecutive sequential stages state the same goal: {r!r}, {s!r}")
    out = []
    for k, (first, middle, last, end) in enumerate(_SEQUENTIAL_FRAMES):
        nps = [_np(r, k % 2, motion=True) for r in rels]
        parts = [first.format(c=nps[0]), middle.format(c=nps[1])]
        if len(nps) == 3:
            parts.append(last.format(c=nps[2]))
        out.append("".join(parts) + end)
    return out


# --------------------------------------------------------------------------------------------
# Hard tasks: lines and gathering
# --------------------------------------------------------------------------------------------


def line_wordings(balls: Sequence[str]) -> list[str]:
    """Wordings of "arrange ``balls`` (3 to 5) in a line from left to right in this order"."""
    if isinstance(balls, str) or not isinstance(balls, Sequence):
        raise ValueError(f"balls must be a sequence of colour names, got {balls!r}")
    names = [_color(b) for b in balls]
    if not 3 <= len(names) <= len(COLORS):
        raise ValueError(f"a line needs 3 to {len(COLORS)} balls, got {len(names)}")
    if len(set(names)) != len(names):
        raise ValueError(f"a line needs distinct balls, got {names!r}")
    listed = _join(names)  # "red, blue and green"
    comma = ", ".join(names)  # "red, blue, green"
    balls_np = _join([f"the {c} ball" for c in names])  # "the red ball, the blue ball and ..."
    then = ", then ".join(names)  # "red, then blue, then green"
    middle = _join([f"the {c} ball" for c in names[1:-1]])
    out = [
        f"Line up the {listed} balls from left to right",
        f"Arrange the balls in a row from left to right: {then}",
        f"Put the {listed} balls in a line, left to right",
        f"From left to right, place {balls_np} in a line",
        f"Make a left-to-right line of the {listed} balls",
        f"Arrange the {listed} balls in a straight line in that order from left to right",
        f"Can you line up {balls_np} from left to right?",
        f"I'd like the {listed} balls lined up left to right in that order",
        f"Set up a line of balls that reads {comma} from left to right",
        f"Put the {names[0]} ball on the left and the {names[-1]} ball on the right, with "
        f"{middle} in between, all in one line and in that order",
        f"Sort the {listed} balls into a line going from left to right",
        f"Push the {listed} balls into a horizontal row, from left to right",
    ]
    if tuple(names) == COLORS:
        out += [
            "Arrange all the balls in a line from left to right in colour order: " + comma,
            "Line up every ball in colour order from left to right (" + comma + ")",
            "Put all five balls in a row, left to right, in the colour order " + comma,
        ]
    return out


_GATHER_FRAMES: tuple[str, ...] = (
    "Gather the balls around the {C} ball",
    "Make a tight cluster around the {C} ball",
    "Bring all the other balls close to the {C} ball",
    "Push every other ball next to the {C} ball",
    "Collect the remaining balls around the {C} ball",
    "Group all the balls together around the {C} ball",
    "Surround the {C} ball with the other balls",
    "Can you huddle the other four balls around the {C} ball?",
    "I want the {C} ball at the centre of a tight group of all the balls",
    "Move the other balls in so that they all sit near the {C} ball",
    "Cluster the rest of the balls around the {C} ball",
    "Round up all the other balls next to the {C} ball",
)


def gather_wordings(center: str) -> list[str]:
    """Wordings of "gather all other balls around ball ``center``"."""
    center = _color(center, "centre")
    return [frame.format(C=center) for frame in _GATHER_FRAMES]
