"""Captions under frames: the instruction (wrapped) and one line of per-frame notes."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from PIL import Image, ImageDraw, ImageFont

CAPTION_BACKGROUND = (255, 255, 255)
TITLE_COLOUR = (0, 0, 0)
NOTE_COLOUR = (90, 90, 90)
MIN_FONT_SIZE = 9


def wrap(text: str, font: ImageFont.FreeTypeFont, width: float) -> list[str]:
    """``text`` split at spaces into lines no wider than ``width`` pixels (a longer word keeps
    a line of its own)."""
    lines: list[str] = []
    for word in text.split():
        if lines and font.getlength(f"{lines[-1]} {word}") <= width:
            lines[-1] = f"{lines[-1]} {word}"
        else:
            lines.append(word)
    return lines or [""]


def caption_frames(frames: np.ndarray, title: str, notes: Sequence[str] = ()) -> np.ndarray:
    """Frames ``(T, H, W, 3)`` uint8 with a white band below each: ``title`` wrapped to the
    frame's width on every frame, then ``notes[t]`` (if given, wrapped too) in grey on frame
    ``t``.

    Every frame gets the same band height, so the result is ``(T, H + band, W, 3)``.
    """
    frames = np.asarray(frames)
    if frames.ndim != 4 or frames.shape[-1] != 3 or frames.dtype != np.uint8:
        raise ValueError(f"frames must be (T, H, W, 3) uint8, got {frames.shape} {frames.dtype}")
    if notes and len(notes) != len(frames):
        raise ValueError(f"{len(notes)} notes for {len(frames)} frames")
    width = frames.shape[2]
    size = max(MIN_FONT_SIZE, width // 26)
    font = ImageFont.load_default(size=size)
    margin, line = size // 2, int(size * 1.3)
    lines = wrap(title, font, width - 2 * margin)
    note_lines = [wrap(note, font, width - 2 * margin) for note in notes]
    band = margin * 2 + line * (len(lines) + max(map(len, note_lines), default=0))
    out = np.empty((len(frames), frames.shape[1] + band, width, 3), dtype=np.uint8)
    for t, frame in enumerate(frames):
        canvas = Image.new("RGB", (width, frames.shape[1] + band), CAPTION_BACKGROUND)
        canvas.paste(Image.fromarray(frame), (0, 0))
        draw = ImageDraw.Draw(canvas)
        y = frames.shape[1] + margin
        for text in lines:
            draw.text((margin, y), text, fill=TITLE_COLOUR, font=font)
            y += line
        for text in note_lines[t] if notes else ():
            draw.text((margin, y), text, fill=NOTE_COLOUR, font=font)
            y += line
        out[t] = np.asarray(canvas)
    return out
