"""Time of one rendered CLEVR frame under the current ``MUJOCO_GL`` (docs/rendering.md).

    MUJOCO_GL=egl python benchmarks/render_speed.py
    MUJOCO_GL=osmesa python benchmarks/render_speed.py   # needs Debian's libosmesa6

Renders the CLEVR scene of one reset state at 240 x 320 with MuJoCo's shadows and reflections
on (MuJoCo's defaults) and off (what the renderers use), the median of ``--repeats`` frames.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import imaginebench  # noqa: F401  (sets MUJOCO_GL=egl if unset, before mujoco is imported)
from imaginebench.envs import make
from imaginebench.envs.clevr.physics import ClevrPhysics
from imaginebench.envs.rendering import mujoco_renderer, plain_lighting


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=20)
    args = parser.parse_args()
    state, _ = make("clevr").unwrapped.reset(seed=0)
    physics = ClevrPhysics()
    physics.set_state(state)
    renderer = mujoco_renderer(physics.model, 240, 320)
    print(f"MUJOCO_GL={os.environ['MUJOCO_GL']}")
    for name, plain in (("shadows and reflections on", False), ("off (the renderers)", True)):
        renderer.update_scene(physics.data, camera="front")
        if plain:
            plain_lighting(renderer.scene)
        renderer.render()  # warm-up
        times = []
        for _ in range(args.repeats):
            start = time.perf_counter()
            renderer.render()
            times.append(time.perf_counter() - start)
        print(f"  {name}: {1000 * statistics.median(times):.1f} ms per 240x320 frame")
    renderer.close()


if __name__ == "__main__":
    main()
