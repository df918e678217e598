"""Natural-language wordings of the HalfCheetah tasks.

The four train tasks (run forward / backward, jump a step forward / backward) have 10 training
wordings each, the first being the original benchmark's sentence, and 10 rephrase wordings that
never occur among the training wordings of any task (checked by the tests). Each jump task gets
its own sentence (the original handed the two jump sentences to the wrong tasks). The easy and
hard tasks have four fixed wordings each, the first the original's, used at every level.
"""

from __future__ import annotations

from typing import Literal

Wording = Literal["train", "rephrase"]

TRAIN: dict[str, tuple[str, ...]] = {
    "run_forward": (
        "Run forward.",
        "Run forwards.",
        "Move forward.",
        "Go forward.",
        "Run ahead.",
        "Keep running forward.",
        "Run in the forward direction.",
        "Move ahead quickly.",
        "Travel forward.",
        "Head forward at a run.",
    ),
    "run_backward": (
        "Run backward.",
        "Run backwards.",
        "Move backward.",
        "Go backward.",
        "Run in reverse.",
        "Keep running backward.",
        "Run in the backward direction.",
        "Move back quickly.",
        "Travel backward.",
        "Head backward at a run.",
    ),
    "jump_forward": (
        "Jump a step forward.",
        "Jump forward.",
        "Jump forward by one step.",
        "Make a jump forward.",
        "Do a small jump forward.",
        "Jump a little way forward.",
        "Jump ahead.",
        "Jump a short distance forward.",
        "Perform a forward jump.",
        "Jump up and land a step further forward.",
    ),
    "jump_backward": (
        "Jump a step backward.",
        "Jump backward.",
        "Jump backward by one step.",
        "Make a jump backward.",
        "Do a small jump backward.",
        "Jump a little way backward.",
        "Jump back.",
        "Jump a short distance backward.",
        "Perform a backward jump.",
        "Jump up and land a step further back.",
    ),
}

REPHRASE: dict[str, tuple[str, ...]] = {
    "run_forward": (
        "Speed forward.",
        "Speed ahead.",
        "Race forward.",
        "Race ahead.",
        "Charge forward.",
        "Charge ahead.",
        "Bolt forward.",
        "Bolt ahead.",
        "Advance forward.",
        "Advance ahead.",
    ),
    "run_backward": (
        "Speed backward.",
        "Speed back.",
        "Race backward.",
        "Race back.",
        "Retreat backward.",
        "Retreat back.",
        "Hurry backward.",
        "Hurry back.",
        "Backpedal backward.",
        "Backpedal back.",
    ),
    "jump_forward": (
        "Jump a step forth.",
        "Leap one step ahead.",
        "Hop one step forward.",
        "Bound one step forward.",
        "Spring forward by a step.",
        "Vault one step ahead.",
        "Take a leap forward.",
        "Hop ahead by one step.",
        "Leap a step forth.",
        "Spring one step ahead.",
    ),
    "jump_backward": (
        "Jump one step backward.",
        "Skip one step back.",
        "Hop one step backward.",
        "Leap one step back.",
        "Bound a step backward.",
        "Spring back by one step.",
        "Hop back a step.",
        "Take a leap backward.",
        "Vault one step back.",
        "Spring one step backward.",
    ),
}

EASY_HARD: dict[str, tuple[str, ...]] = {
    "run_forward_fast": (
        "Move forward faster.",
        "Run forward faster than usual.",
        "Pick up the pace and run forward.",
        "Run forward at full speed.",
    ),
    "run_backward_fast": (
        "Move backward faster.",
        "Run backward faster than usual.",
        "Pick up the pace and run backward.",
        "Run backward at full speed.",
    ),
    "shuttle_forward": (
        "Move forward and slow down. Move backward.",
        "Run forward, then turn around and run back.",
        "First go forward, then come back the way you came.",
        "Go forward for a while, then reverse and move backward.",
    ),
    "shuttle_backward": (
        "Move backward and slow down. Move forward.",
        "Run backward, then turn around and run forward.",
        "First go backward, then come forward again.",
        "Go backward for a while, then reverse and move forward.",
    ),
    "jump_in_place": (
        "Jump in the original position.",
        "Jump in place.",
        "Jump up without moving away from where you started.",
        "Hop on the spot.",
    ),
}


def _check_wording(wording: str) -> None:
    if wording not in ("train", "rephrase"):
        raise ValueError(f"wording must be 'train' or 'rephrase', got {wording!r}")


def train_wordings(key: str, wording: Wording = "train") -> list[str]:
    """Wordings of a train-level task (``run_forward``, ..., ``jump_backward``)."""
    _check_wording(wording)
    table = TRAIN if wording == "train" else REPHRASE
    if key not in table:
        raise ValueError(f"unknown train task {key!r}; expected one of {', '.join(table)}")
    return list(table[key])


def fixed_wordings(key: str, wording: Wording = "train") -> list[str]:
    """Wordings of an easy or hard task (the same for both wording sets)."""
    _check_wording(wording)
    if key not in EASY_HARD:
        raise ValueError(f"unknown task {key!r}; expected one of {', '.join(EASY_HARD)}")
    return list(EASY_HARD[key])
