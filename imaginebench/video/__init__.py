"""Looking at rollouts: frames of a rollout drawn by its domain's renderer, captioned with the
instruction, written as GIF or MP4 (``imaginebench render``) or logged to TensorBoard by the
evaluation callback. See ``docs/rendering.md``."""

from imaginebench.video.captions import caption_frames
from imaginebench.video.episodes import render_dataset_episode, render_rollout
from imaginebench.video.files import (
    VideoEncoderMissing,
    check_video_format,
    gif_bytes,
    write_video,
)

__all__ = [
    "VideoEncoderMissing",
    "caption_frames",
    "check_video_format",
    "gif_bytes",
    "render_dataset_episode",
    "render_rollout",
    "write_video",
]
