"""Rendered rollouts in TensorBoard: animated GIFs in the image dashboard (what
``SummaryWriter.add_video`` writes, without its moviepy dependency)."""

from __future__ import annotations

from typing import Any

import numpy as np
from tensorboard.compat.proto.summary_pb2 import Summary

from imaginebench.video.files import gif_bytes


def log_video(writer: Any, tag: str, frames: np.ndarray, fps: float, step: int) -> None:
    """Add ``frames`` ``(T, H, W, 3)`` uint8 as an animated GIF under ``tag`` at ``step`` to a
    ``SummaryWriter`` (``TensorBoardLogger.experiment``; torch's or tensorboardX's)."""
    image = Summary.Image(
        height=int(frames.shape[1]),
        width=int(frames.shape[2]),
        colorspace=3,
        encoded_image_string=gif_bytes(frames, fps),
    )
    summary = Summary(value=[Summary.Value(tag=tag, image=image)])
    writer._get_file_writer().add_summary(summary, step)  # as add_video itself does
