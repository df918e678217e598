"""The LIBERO tasks' wordings: the original benchmark's sentences, verbatim.

They are kept word for word (object names with their underscores, e.g. ``alphabet_soup``)
because the original data files store them and the original's instruction encodings are keyed
by them: an imported episode's task is found from its sentence
(:func:`task_of_instruction`). There are 91 distinct sentences:

* ``train`` wordings of the pick and place tasks: one sentence each (the sentence the original
  encodes; an earlier revision of the original listed 20 per task, only the first of which has
  an encoding);
* ``rephrase`` wordings of the same six tasks: ten unseen sentences each;
* every ``easy`` and ``hard`` task: one sentence, used for both wording sets.
"""

from __future__ import annotations

from functools import cache
from typing import Literal

Wording = Literal["train", "rephrase"]

PICK_TRAIN = ("Employ the gripper to seize the {a}.",)
PLACE_TRAIN = ("Transfer the {a} to the basket.",)
PICK_REPHRASE = (
    "Employ the gripper tool to clasp the {a}.",
    "Utilize the gripping mechanism to hold the {a}.",
    "Activate the gripper system to seize the {a}.",
    "Engage the robotic gripper to grasp the {a}.",
    "Deploy the gripping apparatus to capture the {a}.",
    "Leverage the gripper mechanism to hold the {a}.",
    "Use the robotic gripping system to clutch the {a}.",
    "Apply the mechanical gripper to secure the {a}.",
    "Operate the gripper device to clasp the {a}.",
    "Activate the robotic gripper to grasp the {a}.",
)
PLACE_REPHRASE = (
    "Transport the {a} to the basket.",
    "Insert the {a} into the basket.",
    "Drop off the {a} in the basket.",
    "Settle the {a} into the basket.",
    "Arrange the {a} into the basket.",
    "Guide the {a} into the basket.",
    "Park the {a} in the basket.",
    "Fit the {a} inside the basket.",
    "Dispatch the {a} to the basket.",
    "Unload the {a} into the basket.",
)
# kind -> its one sentence (``{a}``: the first object, ``{b}``: the second)
NOVEL: dict[str, str] = {
    "pick-and-place": "Employ the gripper to seize the {a} and transfer the {a} to the basket.",
    "pick-to": "Employ the gripper to seize the {a} and transfer the {a} to the {b}.",
    "reach": "Employ the gripper to get close to the {a}.",
    "sequential": "Employ the gripper to seize the {a} and transfer the {a} to the basket. "
    "Then employ the gripper to seize the {b} and transfer the {b} to the basket.",
    "aside": "Employ the gripper to seize the {a} and transfer the {a} to the other side.",
    "all": "Employ the gripper to seize something and transfer it to the basket one by one "
    "until the alphabet_soup, cream_cheese and salad_dressing are all in the basket.",
    "pick-out-of": "The basket is on fire, employ the gripper to seize the {a} in the basket "
    "and transfer the {a} out of the basket.",
}
TRAINED: dict[str, dict[str, tuple[str, ...]]] = {
    "pick": {"train": PICK_TRAIN, "rephrase": PICK_REPHRASE},
    "place": {"train": PLACE_TRAIN, "rephrase": PLACE_REPHRASE},
}


def wordings(kind: str, objects: tuple[str, ...], wording: Wording = "train") -> list[str]:
    """The sentences of the task ``kind`` on ``objects`` in wording set ``wording`` (the
    ``easy`` and ``hard`` kinds have one sentence, used for both sets)."""
    if wording not in ("train", "rephrase"):
        raise ValueError(f"wording must be 'train' or 'rephrase', got {wording!r}")
    names = dict(zip("ab", objects))
    if kind in TRAINED:
        return [t.format(**names) for t in TRAINED[kind][wording]]
    if kind in NOVEL:
        return [NOVEL[kind].format(**names)]
    raise ValueError(f"unknown LIBERO task kind {kind!r}")


@cache
def instruction_table() -> dict[str, str]:
    """Every sentence of every task (both wording sets) -> the task's name."""
    from imaginebench.envs.libero.tasks import ALL_TASKS

    table: dict[str, str] = {}
    for task in ALL_TASKS:
        for wording in ("train", "rephrase"):
            for sentence in task.instructions(wording):
                table[sentence] = task.name
    return table


def task_of_instruction(sentence: str) -> str:
    """The name of the task a sentence asks for (surrounding whitespace ignored), or a clear
    error for a sentence that is none of the 91."""
    name = instruction_table().get(sentence.strip())
    if name is None:
        raise ValueError(f"not a LIBERO instruction: {sentence!r}")
    return name
