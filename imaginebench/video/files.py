"""Writing frames as an animated GIF (Pillow) or an MP4 (ffmpeg through imageio-ffmpeg)."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

from imaginebench.atomic import atomic_path

VIDEO_SUFFIXES = (".gif", ".mp4")
GIF_COLOURS = 128
PALETTE_SAMPLES = 8
MP4_INSTALL_HINT = (
    "pip install 'imaginebench[video]' (imageio-ffmpeg, whose wheel ships an ffmpeg binary); "
    "or write a .gif, which needs nothing more"
)


class VideoEncoderMissing(ImportError):
    """No ffmpeg encoder for MP4 (imageio-ffmpeg is not installed)."""


def _check_frames(frames: np.ndarray, fps: float) -> np.ndarray:
    frames = np.asarray(frames)
    if frames.ndim != 4 or frames.shape[-1] != 3 or frames.dtype != np.uint8 or not len(frames):
        raise ValueError(f"frames must be (T>=1, H, W, 3) uint8, got {frames.shape} {frames.dtype}")
    if not fps > 0:
        raise ValueError(f"fps must be positive, got {fps}")
    return frames


def shared_palette(frames: np.ndarray, colours: int = GIF_COLOURS) -> Image.Image:
    """A palette image of ``colours`` colours (octree: keeps small saturated objects, which
    median cut merges into the background greys) for all ``frames``, taken from up to
    :data:`PALETTE_SAMPLES` of them spread over the rollout."""
    picks = np.unique(np.linspace(0, len(frames) - 1, PALETTE_SAMPLES).astype(int))
    mosaic = Image.fromarray(np.concatenate(list(frames[picks]), axis=0))
    return mosaic.quantize(colours, method=Image.Quantize.FASTOCTREE, dither=Image.Dither.NONE)


def _save_gif(frames: np.ndarray, target: io.BytesIO | Path, fps: float) -> None:
    """One palette for every frame and no dithering: unchanged pixels stay unchanged, so each
    frame stores only what moved (several times smaller files than per-frame palettes)."""
    palette = shared_palette(frames)
    images = [
        Image.fromarray(frame).quantize(palette=palette, dither=Image.Dither.NONE)
        for frame in frames
    ]
    images[0].save(
        target,
        format="GIF",
        save_all=True,
        append_images=images[1:],
        duration=max(20, round(1000 / fps)),  # browsers slow frames shorter than 20 ms down
        loop=0,
        optimize=False,
    )


def gif_bytes(frames: np.ndarray, fps: float) -> bytes:
    """An animated GIF of ``frames`` ``(T, H, W, 3)`` uint8 at ``fps``, looping forever.

    Pillow merges a frame identical to the one before it into that one (its time is kept):
    captions with a step counter keep every frame distinct."""
    buffer = io.BytesIO()
    _save_gif(_check_frames(frames, fps), buffer, fps)
    return buffer.getvalue()


def _ffmpeg() -> Any:
    """The ``imageio_ffmpeg`` module with its ffmpeg binary, else :class:`VideoEncoderMissing`."""
    try:
        import imageio_ffmpeg

        imageio_ffmpeg.get_ffmpeg_exe()
    except (ImportError, RuntimeError) as err:
        raise VideoEncoderMissing(
            f"writing .mp4 needs an ffmpeg encoder: {MP4_INSTALL_HINT}"
        ) from err
    return imageio_ffmpeg


def check_video_format(path: str | Path) -> str:
    """The suffix of ``path`` if frames can be written there: ``.gif`` always, ``.mp4`` when an
    ffmpeg encoder is installed (else :class:`VideoEncoderMissing`); other suffixes are a
    ``ValueError``. Commands call it before rendering, so a bad ``--out`` fails at once."""
    suffix = Path(path).suffix.lower()
    if suffix not in VIDEO_SUFFIXES:
        raise ValueError(f"{path}: unknown video format {suffix!r}; use one of {VIDEO_SUFFIXES}")
    if suffix == ".mp4":
        _ffmpeg()
    return suffix


def write_video(frames: np.ndarray, path: str | Path, fps: float) -> Path:
    """Write ``frames`` ``(T, H, W, 3)`` uint8 to ``path`` (``.gif`` or ``.mp4``, by its suffix,
    see :func:`check_video_format`), atomically; return the path. MP4 frames (H.264) are padded
    with white to even sizes, as the codec requires."""
    path = Path(path)
    suffix = check_video_format(path)
    frames = _check_frames(frames, fps)
    if suffix == ".gif":
        with atomic_path(path) as tmp:
            _save_gif(frames, tmp, fps)
        return path
    pad_h, pad_w = frames.shape[1] % 2, frames.shape[2] % 2
    frames = np.pad(frames, ((0, 0), (0, pad_h), (0, pad_w), (0, 0)), constant_values=255)
    with atomic_path(path) as tmp:
        writer = _ffmpeg().write_frames(
            str(tmp),
            (frames.shape[2], frames.shape[1]),
            fps=fps,
            codec="libx264",
            quality=7,
            macro_block_size=1,
            output_params=["-f", "mp4"],  # the temporary name has no .mp4 suffix
        )
        writer.send(None)  # start ffmpeg
        try:
            for frame in frames:
                writer.send(np.ascontiguousarray(frame))
        finally:
            writer.close()
    return path
