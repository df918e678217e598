"""Where an imagined rollout and its replay in the simulator part (continuous domains).

For every ``--every``-th episode of an imagined file: reset the simulator to the episode's task
and first state, execute its actions, and print the distance between the imagined and the
simulated hand (the state's first three entries) after 5 steps and at the end, and how far the
first entity slot moved in each (Meta-World: the task's object, entries 7-9). Then, for one
episode, the first 8 steps' hand moves side by side. Behind docs/metaworld.md's imagination
paragraphs.

    python benchmarks/imagined_replay_divergence.py --file imaginary_rephrase.h5 --domain metaworld
"""

from __future__ import annotations

import argparse

import numpy as np

from imaginebench.data.format import load_dataset
from imaginebench.envs import make
from imaginebench.envs.base import EpisodeSpec, Task

#: the first entity slot's position (Meta-World's ``target_object``, after the gripper's 4 and
#: the goal's 3 entries)
OBJECT = slice(7, 10)


def replay(env, episode) -> np.ndarray:
    """The simulator's states under the episode's actions from its first state."""
    task = Task.from_spec(episode.task_spec)
    env.reset(
        options={
            "episode": EpisodeSpec(task, episode.instruction, episode.states[0], episode.level)
        }
    )
    states = [episode.states[0]]
    for action in episode.actions:
        observation, *_ = env.step(action)
        states.append(observation)
    return np.asarray(states)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--file", required=True)
    parser.add_argument("--domain", default="metaworld")
    parser.add_argument("--every", type=int, default=11)
    parser.add_argument("--show", type=int, default=33, help="episode whose first steps to print")
    args = parser.parse_args()
    data = load_dataset(args.file)
    env = make(args.domain, data.episode(0).level, max_episode_steps=10**9).unwrapped
    for i in range(0, len(data), args.every):
        ep = data.episode(i)
        sim = replay(env, ep)
        hand = np.linalg.norm(sim[:, :3] - ep.states[:, :3], axis=1) * 100
        moved = [np.linalg.norm(x[-1, OBJECT] - x[0, OBJECT]) * 100 for x in (ep.states, sim)]
        print(
            f"{i:4d} {Task.from_spec(ep.task_spec).spec()[:50]:50s} T={len(ep):3d} hand apart "
            f"{hand[min(5, len(ep))]:.1f} cm after 5 steps, {hand[-1]:.1f} cm at the end; "
            f"object moved {moved[0]:.1f} cm imagined, {moved[1]:.1f} cm simulated"
        )
    ep = data.episode(min(args.show, len(data) - 1))
    sim = replay(env, ep)
    for t in range(min(8, len(ep))):
        print(
            f"step {t}: action {ep.actions[t].round(2)}, hand move (mm) imagined "
            f"{((ep.states[t + 1, :3] - ep.states[t, :3]) * 1000).round(1)}, simulated "
            f"{((sim[t + 1, :3] - sim[t, :3]) * 1000).round(1)}"
        )
    env.close()


if __name__ == "__main__":
    main()
