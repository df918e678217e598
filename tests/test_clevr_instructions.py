"""Tests of the CLEVR-Robot instruction wordings."""

from __future__ import annotations

import itertools
import random
import re
from typing import Callable, Iterable

import pytest

from imaginebench.envs.clevr.instructions import (
    COLORS,
    DIRECTIONS,
    all_of_wordings,
    gather_wordings,
    line_wordings,
    near_wordings,
    push_wordings,
    relation_wordings,
    sequential_wordings,
    train_sentence_set,
)

_OPPOSITE = {"behind": "front", "front": "behind", "left": "right", "right": "left"}
PAIRS = [(a, b) for a in COLORS for b in COLORS if a != b]
GOALS = [(a, b, d) for a, b in PAIRS for d in DIRECTIONS]
TRAIN = train_sentence_set()


def _mentioned(sentence: str) -> set[str]:
    """Colour names occurring as whole words (so "ordered" does not count as "red")."""
    return {c for c in COLORS if re.search(rf"\b{c}\b", sentence)}


def _check_outputs(
    fn: Callable[..., list[str]], args_list: Iterable[tuple], min_count: int = 10
) -> dict[str, tuple]:
    """Shared checks over a grid of arguments; returns sentence -> arguments that produced it."""
    owner: dict[str, tuple] = {}
    for args in args_list:
        out = fn(*args)
        assert out == fn(*args), "not deterministic"
        assert len(out) >= min_count, (args, len(out))
        assert len(set(out)) == len(out), f"duplicates for {args}"
        colours = {c for c in _flatten(args) if c in COLORS}
        for s in out:
            assert s == s.strip() and "  " not in s and s, repr(s)
            assert s not in TRAIN, f"{s!r} is a train wording"
            assert _mentioned(s) == colours, (s, args)
            assert owner.setdefault(s, args) == args, f"{s!r} from {owner[s]} and {args}"
    return owner


def _flatten(x: object) -> list[str]:
    if isinstance(x, str):
        return [x]
    return [y for item in x for y in _flatten(item)]  # type: ignore[union-attr]


# ----------------------------------------------------------------------------- train / rephrase


def test_train_wordings_per_goal() -> None:
    for moved, anchor, direction in GOALS:
        out = relation_wordings(moved, anchor, direction)
        assert out == relation_wordings(moved, anchor, direction, wording="train")
        assert len(out) == 54 and len(set(out)) == 54
        for s in out:
            assert _mentioned(s) == {moved, anchor}
            assert s == s.strip() and not s.endswith(".")
            assert s.index(f" {moved} ball ") < s.index(f" {anchor} ball")


def test_train_sentence_set() -> None:
    assert len(TRAIN) == 4320
    assert train_sentence_set() is TRAIN  # cached
    assert "Push the red ball in left of the blue ball" in TRAIN
    assert "Is there any green ball to the behind of the cyan ball" in TRAIN
    assert "Can you help me keep the purple ball front the red ball" in TRAIN


def test_rephrase_wordings() -> None:
    owner = _check_outputs(
        lambda m, a, d: relation_wordings(m, a, d, wording="rephrase"), GOALS, min_count=24
    )
    assert len(owner) >= 24 * len(GOALS)


def test_unknown_wording_set() -> None:
    with pytest.raises(ValueError, match="wording"):
        relation_wordings("red", "blue", "left", wording="test")  # type: ignore[arg-type]


# ----------------------------------------------------------------------------- easy tasks


def test_push_wordings() -> None:
    _check_outputs(push_wordings, [(c, d) for c in COLORS for d in DIRECTIONS])
    assert "Push the red ball to the left" in push_wordings("red", "left")


def test_near_wordings() -> None:
    _check_outputs(near_wordings, PAIRS)
    assert "Move the red ball next to the blue ball" in near_wordings("red", "blue")


# ----------------------------------------------------------------------------- hard tasks


def _valid_all_of(rels: tuple) -> bool:
    pairs = [frozenset(r[:2]) for r in rels]
    return len(set(pairs)) == len(pairs)


def _valid_sequential(stages: tuple) -> bool:
    same = lambda r, s: r == s or (r[1], r[0], _OPPOSITE[r[2]]) == s  # noqa: E731
    return not any(same(r, s) for r, s in zip(stages, stages[1:]))


def _hard_relation_grids() -> tuple[list[tuple], list[tuple]]:
    """Every ordered pair of goals plus a seeded sample of triples."""
    pairs = [(r, s) for r, s in itertools.permutations(GOALS, 2)]
    rng = random.Random(0)
    triples = [tuple(rng.sample(GOALS, 3)) for _ in range(400)]
    return pairs, triples


def test_all_of_wordings() -> None:
    pairs, triples = _hard_relation_grids()
    args = [(list(r),) for r in pairs + triples if _valid_all_of(r)]
    assert len(args) > 5000
    _check_outputs(all_of_wordings, args)
    # Relations on the same pair of balls are redundant or contradictory.
    for rels in [
        [("red", "blue", "left"), ("red", "blue", "left")],
        [("red", "blue", "left"), ("blue", "red", "right")],
        [("red", "blue", "left"), ("red", "blue", "behind")],
    ]:
        with pytest.raises(ValueError, match="pair"):
            all_of_wordings(rels)


def test_sequential_wordings() -> None:
    pairs, triples = _hard_relation_grids()
    triples += [(r, s, r) for r, s in pairs[:200]]  # returning to an earlier goal is allowed
    args = [(list(r),) for r in pairs + triples if _valid_sequential(r)]
    assert len(args) > 6000
    _check_outputs(sequential_wordings, args)
    for stages in [
        [("red", "blue", "left"), ("red", "blue", "left")],
        [("green", "cyan", "front"), ("cyan", "green", "behind")],
    ]:
        with pytest.raises(ValueError, match="same goal"):
            sequential_wordings(stages)


def test_line_wordings() -> None:
    args = [(list(p),) for n in (3, 4, 5) for p in itertools.permutations(COLORS, n)]
    _check_outputs(line_wordings, args)
    ordered = line_wordings(list(COLORS))
    assert any("colour order" in s for s in ordered)
    shuffled = line_wordings(["blue", "red", "green", "purple", "cyan"])
    assert not any("colour order" in s for s in shuffled)
    assert line_wordings(tuple(COLORS)) == ordered


def test_gather_wordings() -> None:
    _check_outputs(gather_wordings, [(c,) for c in COLORS])
    assert "Gather the balls around the green ball" in gather_wordings("green")


def test_functions_do_not_share_sentences() -> None:
    pairs, triples = _hard_relation_grids()
    families: list[set[str]] = [
        {s for g in GOALS for s in relation_wordings(*g, wording="rephrase")},
        {s for c in COLORS for d in DIRECTIONS for s in push_wordings(c, d)},
        {s for p in PAIRS for s in near_wordings(*p)},
        {s for r in pairs[:500] + triples if _valid_all_of(r) for s in all_of_wordings(r)},
        {s for r in pairs[:500] + triples if _valid_sequential(r) for s in sequential_wordings(r)},
        {s for n in (3, 4, 5) for p in itertools.permutations(COLORS, n) for s in line_wordings(p)},
        {s for c in COLORS for s in gather_wordings(c)},
    ]
    for x, y in itertools.combinations(families, 2):
        assert not x & y


# ----------------------------------------------------------------------------- bad inputs


@pytest.mark.parametrize(
    "call",
    [
        lambda: relation_wordings("pink", "blue", "left"),
        lambda: relation_wordings("red", "Blue", "left"),
        lambda: relation_wordings("red", "blue", "up"),
        lambda: relation_wordings("red", "blue", 1),  # type: ignore[arg-type]
        lambda: relation_wordings("red", "red", "left"),
        lambda: relation_wordings("red", "red", "left", wording="rephrase"),
        lambda: push_wordings("yellow", "left"),
        lambda: push_wordings("red", "down"),
        lambda: near_wordings("red", "red"),
        lambda: near_wordings("red", "grey"),
        lambda: all_of_wordings([("red", "blue", "left")]),
        lambda: all_of_wordings([]),
        lambda: all_of_wordings([("red", "blue", "left")] * 2 + [("green", "cyan", "front")] * 2),
        lambda: all_of_wordings([("red", "blue", "left"), ("green", "green", "front")]),
        lambda: all_of_wordings([("red", "blue", "left"), ("green", "cyan", "above")]),
        lambda: all_of_wordings([("red", "blue", "left"), ("green", "cyan")]),
        lambda: all_of_wordings("red blue left"),  # type: ignore[arg-type]
        lambda: sequential_wordings([("red", "blue", "left")]),
        lambda: sequential_wordings(
            [
                ("red", "blue", "left"),
                ("green", "cyan", "front"),
                ("red", "cyan", "left"),
                ("blue", "cyan", "left"),
            ]
        ),
        lambda: sequential_wordings([("red", "blue", "left"), ("magenta", "cyan", "front")]),
        lambda: line_wordings(["red", "blue"]),
        lambda: line_wordings(["red", "blue", "red"]),
        lambda: line_wordings(["red", "blue", "orange"]),
        lambda: line_wordings(list(COLORS) + ["red"]),
        lambda: line_wordings("red"),
        lambda: gather_wordings("black"),
        lambda: gather_wordings(2),  # type: ignore[arg-type]
    ],
)
def test_bad_inputs_raise(call: Callable[[], list[str]]) -> None:
    with pytest.raises(ValueError):
        call()
