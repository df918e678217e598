"""Natural-language wordings of the BabyAI tasks.

Each train family (go to, open, pick up, put next to) has 40 training frames, the first being
the canonical sentence, and 10 rephrase frames that never occur among the training frames of
any family (checked by the tests). Easy and hard tasks have a few fixed wordings each, used at
every wording level. Frames use ``{c}``/``{t}`` (colour, object type) or ``{c1} {t1}`` /
``{c2} {t2}`` for the moved object and the one it goes next to.
"""

from __future__ import annotations

from typing import Literal

Wording = Literal["train", "rephrase"]

GOTO_TRAIN: tuple[str, ...] = (
    "go to the {c} {t}",
    "go over to the {c} {t}",
    "walk to the {c} {t}",
    "head to the {c} {t}",
    "move to the {c} {t}",
    "make your way to the {c} {t}",
    "navigate to the {c} {t}",
    "get to the {c} {t}",
    "reach the {c} {t}",
    "approach the {c} {t}",
    "travel to the {c} {t}",
    "proceed to the {c} {t}",
    "find the {c} {t} and go to it",
    "go and stand by the {c} {t}",
    "walk over to the {c} {t}",
    "find your way to the {c} {t}",
    "please go to the {c} {t}",
    "go toward the {c} {t}",
    "move toward the {c} {t} until you reach it",
    "your goal is the {c} {t}, go there",
    "get yourself to the {c} {t}",
    "walk up to the {c} {t}",
    "go right up to the {c} {t}",
    "head for the {c} {t}",
    "head over to the {c} {t}",
    "make for the {c} {t}",
    "move over to the {c} {t}",
    "go find the {c} {t}",
    "locate the {c} {t} and walk to it",
    "the {c} {t} is your destination",
    "your destination is the {c} {t}",
    "bring yourself to the {c} {t}",
    "go stand at the {c} {t}",
    "go where the {c} {t} is",
    "walk to where the {c} {t} is",
    "move until you are at the {c} {t}",
    "navigate your way to the {c} {t}",
    "could you go to the {c} {t}",
    "try to reach the {c} {t}",
    "get over to the {c} {t}",
)
GOTO_REPHRASE: tuple[str, ...] = (
    "pay a visit to the {c} {t}",
    "wander over to the {c} {t} and stop there",
    "end up at the {c} {t}",
    "the {c} {t} is where you should be",
    "set off toward the {c} {t} and arrive there",
    "journey to the {c} {t}",
    "stroll to the {c} {t}",
    "take yourself over to the {c} {t}",
    "arrive at the {c} {t}",
    "position yourself at the {c} {t}",
)

OPEN_TRAIN: tuple[str, ...] = (
    "open the {c} door",
    "please open the {c} door",
    "go open the {c} door",
    "swing the {c} door open",
    "get the {c} door open",
    "make the {c} door open",
    "unlatch the {c} door",
    "pull the {c} door open",
    "push the {c} door open",
    "open up the {c} door",
    "find the {c} door and open it",
    "walk to the {c} door and open it",
    "go to the {c} door and open it",
    "the {c} door should be opened",
    "the {c} door needs to be opened",
    "you need to open the {c} door",
    "your task is to open the {c} door",
    "open the door that is {c}",
    "go over to the {c} door and open it up",
    "head to the {c} door and open it",
    "make your way to the {c} door and open it",
    "try to open the {c} door",
    "could you open the {c} door",
    "get the {c} door opened",
    "have the {c} door opened",
    "throw the {c} door open",
    "crack open the {c} door",
    "unbolt the {c} door",
    "approach the {c} door and open it",
    "reach the {c} door and pull it open",
    "open the {c} door, please",
    "go and open the {c} door",
    "navigate to the {c} door and open it",
    "see to it that the {c} door is open",
    "make sure the {c} door is open",
    "ensure the {c} door is opened",
    "the goal is an open {c} door",
    "walk up to the {c} door and swing it open",
    "move to the {c} door and open it",
    "toggle the {c} door open",
)
OPEN_REPHRASE: tuple[str, ...] = (
    "unseal the {c} door",
    "set the {c} door ajar",
    "prop the {c} door open",
    "fling the {c} door wide",
    "let the {c} door stand open",
    "give the {c} door a push so that it opens",
    "part the {c} door",
    "clear the way through the {c} door",
    "the {c} door ought to be open",
    "work the {c} door until it opens",
)

PICKUP_TRAIN: tuple[str, ...] = (
    "pick up the {c} {t}",
    "pick the {c} {t} up",
    "grab the {c} {t}",
    "take the {c} {t}",
    "get the {c} {t}",
    "collect the {c} {t}",
    "fetch the {c} {t}",
    "lift the {c} {t}",
    "go pick up the {c} {t}",
    "go get the {c} {t}",
    "please pick up the {c} {t}",
    "find the {c} {t} and pick it up",
    "walk to the {c} {t} and pick it up",
    "go to the {c} {t} and grab it",
    "retrieve the {c} {t}",
    "obtain the {c} {t}",
    "pick up that {c} {t}",
    "carry the {c} {t}",
    "hold the {c} {t}",
    "take hold of the {c} {t}",
    "get hold of the {c} {t}",
    "acquire the {c} {t}",
    "go fetch the {c} {t}",
    "head to the {c} {t} and take it",
    "snatch the {c} {t}",
    "scoop up the {c} {t}",
    "gather up the {c} {t}",
    "lift up the {c} {t}",
    "you should pick up the {c} {t}",
    "your task is to pick up the {c} {t}",
    "pick up the {t} that is {c}",
    "grab the {t} that is {c}",
    "take the {c} {t} with you",
    "go and grab the {c} {t}",
    "make your way to the {c} {t} and pick it up",
    "could you pick up the {c} {t}",
    "try to pick up the {c} {t}",
    "get the {c} {t} into your hands",
    "end up holding the {c} {t}",
    "pick up the {c} {t} from the floor",
)
PICKUP_REPHRASE: tuple[str, ...] = (
    "clutch the {c} {t}",
    "seize the {c} {t}",
    "nab the {c} {t}",
    "pocket the {c} {t}",
    "claim the {c} {t} for yourself",
    "latch onto the {c} {t}",
    "raise the {c} {t} off the ground",
    "take possession of the {c} {t}",
    "bag the {c} {t}",
    "keep the {c} {t} in your grasp",
)

PUTNEXT_TRAIN: tuple[str, ...] = (
    "put the {c1} {t1} next to the {c2} {t2}",
    "place the {c1} {t1} next to the {c2} {t2}",
    "move the {c1} {t1} next to the {c2} {t2}",
    "put the {c1} {t1} beside the {c2} {t2}",
    "place the {c1} {t1} beside the {c2} {t2}",
    "set the {c1} {t1} down next to the {c2} {t2}",
    "bring the {c1} {t1} next to the {c2} {t2}",
    "carry the {c1} {t1} over to the {c2} {t2}",
    "drop the {c1} {t1} next to the {c2} {t2}",
    "put the {c1} {t1} by the {c2} {t2}",
    "place the {c1} {t1} by the {c2} {t2}",
    "leave the {c1} {t1} next to the {c2} {t2}",
    "move the {c1} {t1} beside the {c2} {t2}",
    "bring the {c1} {t1} beside the {c2} {t2}",
    "put the {c1} {t1} adjacent to the {c2} {t2}",
    "place the {c1} {t1} adjacent to the {c2} {t2}",
    "pick up the {c1} {t1} and put it next to the {c2} {t2}",
    "take the {c1} {t1} and place it beside the {c2} {t2}",
    "grab the {c1} {t1} and drop it next to the {c2} {t2}",
    "move the {c1} {t1} so it is next to the {c2} {t2}",
    "get the {c1} {t1} next to the {c2} {t2}",
    "position the {c1} {t1} next to the {c2} {t2}",
    "set the {c1} {t1} beside the {c2} {t2}",
    "put the {c1} {t1} right next to the {c2} {t2}",
    "place the {c1} {t1} right beside the {c2} {t2}",
    "the {c1} {t1} should be next to the {c2} {t2}",
    "make the {c1} {t1} touch the {c2} {t2}",
    "put the {c1} {t1} close to the {c2} {t2}",
    "move the {c1} {t1} over next to the {c2} {t2}",
    "carry the {c1} {t1} and set it next to the {c2} {t2}",
    "fetch the {c1} {t1} and put it by the {c2} {t2}",
    "bring the {c1} {t1} over beside the {c2} {t2}",
    "drop the {c1} {t1} beside the {c2} {t2}",
    "put the {c1} {t1} down by the {c2} {t2}",
    "your task is to put the {c1} {t1} next to the {c2} {t2}",
    "please put the {c1} {t1} next to the {c2} {t2}",
    "could you place the {c1} {t1} next to the {c2} {t2}",
    "get the {c1} {t1} beside the {c2} {t2}",
    "move the {c1} {t1} to a spot next to the {c2} {t2}",
    "put the {c1} {t1} in a cell next to the {c2} {t2}",
)
PUTNEXT_REPHRASE: tuple[str, ...] = (
    "relocate the {c1} {t1} alongside the {c2} {t2}",
    "park the {c1} {t1} alongside the {c2} {t2}",
    "deposit the {c1} {t1} up against the {c2} {t2}",
    "shift the {c1} {t1} over so it neighbours the {c2} {t2}",
    "the {c1} {t1} belongs beside the {c2} {t2}",
    "pair the {c1} {t1} up with the {c2} {t2}",
    "station the {c1} {t1} alongside the {c2} {t2}",
    "transport the {c1} {t1} to the side of the {c2} {t2}",
    "lay the {c1} {t1} down against the {c2} {t2}",
    "have the {c1} {t1} end up neighbouring the {c2} {t2}",
)

EASY_HARD: dict[str, tuple[str, ...]] = {
    "open_go": (
        "open the door, then go to any object",
        "first open the door and then walk onto one of the objects",
        "get the door open, then stand on the ball, the box or the key",
        "open the door and afterwards go to any item in the room",
    ),
    "open_pick": (
        "open the door, then pick up any object",
        "first open the door and then pick up one of the objects",
        "get the door open and end up holding the ball, the box or the key",
        "open the door and afterwards pick up any item in the room",
    ),
    "go_wall": (
        "go to the side of the room next to a wall",
        "walk over to any wall of the room",
        "move until you are right beside a wall",
        "leave the middle and stand against a wall",
    ),
    "go_center": (
        "go to the center of the room",
        "walk to the middle of the room",
        "move into the centre of the room",
        "leave the walls behind and stand in the middle of the room",
    ),
    "open_lock": (
        "pick up the key, then open the door",
        "the door is locked: fetch the key and unlock it",
        "use the key to open the locked door",
        "grab the key first and then open the door with it",
    ),
    "put_line": (
        "put the three items in a line",
        "line up the ball, the box and the key",
        "arrange the ball, the box and the key in a single row or column",
        "place all three objects along one straight line",
    ),
    "put_pile": (
        "gather the three items into a pile",
        "pile the ball, the box and the key up together",
        "bring the three objects together so they touch in a corner shape",
        "group the ball, the box and the key closely around one of them",
    ),
}


def _frames(train: tuple[str, ...], rephrase: tuple[str, ...], wording: str) -> tuple[str, ...]:
    if wording == "train":
        return train
    if wording == "rephrase":
        return rephrase
    raise ValueError(f"wording must be 'train' or 'rephrase', got {wording!r}")


def goto_wordings(colour: str, obj: str, wording: Wording = "train") -> list[str]:
    return [f.format(c=colour, t=obj) for f in _frames(GOTO_TRAIN, GOTO_REPHRASE, wording)]


def open_wordings(colour: str, wording: Wording = "train") -> list[str]:
    return [f.format(c=colour) for f in _frames(OPEN_TRAIN, OPEN_REPHRASE, wording)]


def pickup_wordings(colour: str, obj: str, wording: Wording = "train") -> list[str]:
    return [f.format(c=colour, t=obj) for f in _frames(PICKUP_TRAIN, PICKUP_REPHRASE, wording)]


def putnext_wordings(
    colour1: str, obj1: str, colour2: str, obj2: str, wording: Wording = "train"
) -> list[str]:
    frames = _frames(PUTNEXT_TRAIN, PUTNEXT_REPHRASE, wording)
    return [f.format(c1=colour1, t1=obj1, c2=colour2, t2=obj2) for f in frames]
