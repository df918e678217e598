"""Natural-language wordings of the Meta-World tasks: 20 per task and wording set.

Each wording is a **core** (an imperative verb phrase, five per task) placed in a **frame**
(four per wording set): 5 x 4 = 20 sentences. The ten training tasks have training cores and
frames and, for the ``rephrase`` level, their own rephrase cores in polite / preference frames
(the original's rephrase style, e.g. "The locked door bothers me; please unlock it."), so no
rephrase wording is a training wording (tested). The ``easy`` and ``hard`` tasks use training
frames with their own cores, the same for both wording sets; none of their sentences is a
training task's (tested). The first training core of reach and button-press are the original
benchmark's example sentences.
"""

from __future__ import annotations

from typing import Literal

Wording = Literal["train", "rephrase"]

TRAIN_FRAMES: tuple[str, ...] = (
    "{Core}.",
    "Use the gripper to {core}.",
    "Using the robot arm, {core}.",
    "Your task is to {core}.",
)
REPHRASE_FRAMES: tuple[str, ...] = (
    "Could you please {core}?",
    "I would really like you to {core}.",
    "It would make me happy if you would {core}.",
    "Please {core} for me.",
)

TRAIN_CORES: dict[str, tuple[str, ...]] = {
    "reach": (
        "relocate the gripper to the designated spot",
        "move the gripper to the goal position",
        "reach for the target location",
        "bring the end effector to the marked point",
        "position the hand at the goal",
    ),
    "push": (
        "push the puck to the goal",
        "slide the block across the table to the target",
        "shove the object to the marked spot",
        "nudge the puck until it reaches the goal",
        "push the object along the table to the target position",
    ),
    "pick-place": (
        "pick up the puck and place it at the goal",
        "grasp the object and put it at the target location",
        "lift the block and set it down at the marked spot",
        "pick the object up and move it to the goal position",
        "take hold of the puck and drop it off at the target",
    ),
    "button-press": (
        "firmly depress the button",
        "press the button",
        "push the button in",
        "press down on the button until it clicks",
        "push the button on the box",
    ),
    "door-unlock": (
        "unlock the door",
        "turn the lock to unlock the door",
        "open the lock on the door",
        "release the door's lock",
        "twist the lock into the unlocked position",
    ),
    "door-open": (
        "open the door",
        "pull the door open",
        "swing the door open by its handle",
        "grab the handle and open the door",
        "open the door all the way",
    ),
    "window-open": (
        "open the window",
        "slide the window open",
        "push the window sideways to open it",
        "move the window to the open position",
        "slide the window pane open",
    ),
    "faucet-open": (
        "turn the faucet on",
        "open the faucet",
        "rotate the faucet handle to turn on the water",
        "twist the tap open",
        "turn the tap handle to open it",
    ),
    "coffee-push": (
        "push the mug under the coffee machine",
        "slide the cup beneath the coffee machine's nozzle",
        "move the coffee mug to the machine",
        "push the cup into place under the coffee maker",
        "shove the mug over to the coffee machine",
    ),
    "coffee-button": (
        "press the coffee machine's button",
        "push the button on the coffee maker",
        "start the coffee machine by pressing its button",
        "hit the switch on the coffee machine",
        "press the brew button of the coffee machine",
    ),
}

REPHRASE_CORES: dict[str, tuple[str, ...]] = {
    "reach": (
        "move your hand over to the spot I picked",
        "get the end effector to the goal",
        "place your fingertips at the target point",
        "guide the arm until it arrives at the goal",
        "carry the gripper over to the chosen point",
    ),
    "push": (
        "get the puck over to the goal without lifting it",
        "drive the block to the marked location",
        "move the puck by pushing it toward the target",
        "keep the puck on the table and push it to the goal",
        "propel the object to where the goal is",
    ),
    "pick-place": (
        "carry the puck over to the goal",
        "lift the object and bring it to the target",
        "transfer the block to the goal position",
        "move the puck through the air to the target",
        "hoist the object and deposit it at the goal",
    ),
    "button-press": (
        "push that button",
        "give the button a firm press",
        "hit the button",
        "depress the button on the panel",
        "punch the button",
    ),
    "door-unlock": (
        "undo the lock on the door",
        "get the door unlocked",
        "flip the lock open",
        "disengage the door lock",
        "unfasten the lock of the door",
    ),
    "door-open": (
        "get the door open",
        "swing the door wide",
        "pull on the handle until the door is open",
        "make the door open",
        "open up the door",
    ),
    "window-open": (
        "get the window open",
        "let some air in by opening the window",
        "slide the window aside",
        "push the window open",
        "open up the window",
    ),
    "faucet-open": (
        "get the water running from the faucet",
        "turn the water on",
        "open up the tap",
        "switch the faucet on",
        "start the tap",
    ),
    "coffee-push": (
        "get the mug beneath the coffee machine",
        "put the cup under the spout of the coffee maker",
        "move the mug so that it sits under the coffee machine",
        "slide the mug over to the brewer",
        "bring the cup to the coffee machine",
    ),
    "coffee-button": (
        "switch on the coffee maker",
        "push the coffee machine's start button",
        "get the coffee machine brewing with its button",
        "turn on the brewer with the button",
        "press the button to start brewing",
    ),
}

NOVEL_CORES: dict[str, tuple[str, ...]] = {
    "reach-wall": (
        "reach the goal behind the wall",
        "move the gripper past the wall to the target",
        "get around the wall and reach the goal position",
        "bring the hand over the wall to the marked spot",
        "reach the target on the other side of the wall",
    ),
    "push-wall": (
        "push the puck around the wall to the goal",
        "slide the block past the wall to the target",
        "push the object to the goal behind the wall",
        "shove the puck around the obstructing wall to the marked spot",
        "push the puck to the target without hitting the wall",
    ),
    "pick-place-wall": (
        "pick up the puck and place it at the goal behind the wall",
        "lift the object over the wall and set it down at the target",
        "grasp the block and carry it past the wall to the goal",
        "pick the object up and move it over the wall to the marked spot",
        "take the puck over the obstructing wall and place it at the target",
    ),
    "button-press-wall": (
        "press the button behind the wall",
        "reach past the wall and push the button",
        "push the button that sits behind the wall",
        "get around the wall and press the button",
        "press the button despite the wall in the way",
    ),
    "door-lock": (
        "lock the door",
        "turn the lock to lock the door",
        "close the lock on the door",
        "secure the door with its lock",
        "twist the lock into the locked position",
    ),
    "door-close": (
        "close the door",
        "shut the door",
        "push the door closed",
        "swing the door shut",
        "close the open door",
    ),
    "window-close": (
        "close the window",
        "slide the window shut",
        "push the window closed",
        "move the window to the closed position",
        "slide the window pane closed",
    ),
    "faucet-close": (
        "turn the faucet off",
        "close the faucet",
        "rotate the faucet handle to turn off the water",
        "twist the tap closed",
        "turn the tap handle to close it",
    ),
    "make-coffee": (
        "make a cup of coffee",
        "position the coffee mug beneath the coffee machine nozzle and press the button",
        "push the mug under the coffee machine, then press its button",
        "put the cup under the coffee maker and start it",
        "brew coffee by placing the mug under the machine and pressing the button",
    ),
    "locked-door-open": (
        "unlock and then open the door",
        "unlock the door and open it",
        "open the locked door",
        "turn the lock, then pull the door open",
        "first unlock the door, then swing it open",
    ),
    "hammer": (
        "grasp the hammer and strike the nail",
        "hammer the nail in",
        "pick up the hammer and drive the nail in",
        "use the hammer to hit the nail",
        "take the hammer and pound the nail",
    ),
    "soccer": (
        "push the football into the goal",
        "kick the ball into the net",
        "score a goal with the soccer ball",
        "get the ball into the goal",
        "shoot the soccer ball into the goal",
    ),
}


def _fill(frames: tuple[str, ...], cores: tuple[str, ...]) -> list[str]:
    return [
        frame.format(core=core, Core=core[0].upper() + core[1:])
        for frame in frames
        for core in cores
    ]


def wordings(name: str, wording: Wording = "train") -> list[str]:
    """The 20 wordings of task ``name`` in wording set ``wording`` (the novel levels' tasks have
    one set, used for both)."""
    if wording not in ("train", "rephrase"):
        raise ValueError(f"wording must be 'train' or 'rephrase', got {wording!r}")
    if name in TRAIN_CORES:
        if wording == "train":
            return _fill(TRAIN_FRAMES, TRAIN_CORES[name])
        return _fill(REPHRASE_FRAMES, REPHRASE_CORES[name])
    if name in NOVEL_CORES:
        return _fill(TRAIN_FRAMES, NOVEL_CORES[name])
    raise ValueError(f"unknown Meta-World task {name!r}")
