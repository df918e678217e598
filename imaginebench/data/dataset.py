"""In-memory rollout datasets: :class:`Episode` and the packed :class:`RolloutDataset`.

A dataset holds whole episodes of ``(state, action, reward)`` produced either by a real simulator
(``source="real"``) or imagined by a language model (``source="imaginary"``), each conditioned on a
natural-language instruction and a task. Episodes are packed into flat arrays; a single episode can
be materialised as an :class:`Episode`. The on-disk layout is in ``docs/dataset_format.md``.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from dataclasses import dataclass, field
from typing import Any, Iterable, Sequence

import numpy as np

from imaginebench.data.schema import INT_KINDS, LEVELS, SOURCES, normalise_action_spec

log = logging.getLogger(__name__)


@dataclass(eq=False)
class Episode:
    """One episode of ``T >= 1`` transitions.

    Attributes:
        states: ``(T + 1, D)`` float32, including the state reached after the last action.
        actions: ``(T,)`` int64 (discrete) or ``(T, *shape)`` float32 (continuous).
        rewards: ``(T,)`` float32.
        terminated: the episode ended in a terminal state (e.g. the task was accomplished).
        truncated: the episode was cut by a time limit.
        instruction: natural-language instruction the episode is conditioned on.
        task_spec: canonical JSON string identifying the task (``Task.spec()``).
        level: one of :data:`LEVELS`.
        source: one of :data:`SOURCES`.
        success: whether the task counts as accomplished.
        confidence: per confidence source, ``(T,)`` float in ``[0, 1]``: how far each
            transition may be trusted (imaginary data; ``docs/confidence.md``). Optional.
    """

    states: np.ndarray
    actions: np.ndarray
    rewards: np.ndarray
    terminated: bool
    truncated: bool
    instruction: str
    task_spec: str
    level: str
    source: str
    success: bool
    confidence: dict[str, np.ndarray] = field(default_factory=dict)

    def __len__(self) -> int:
        """Number of transitions ``T``."""
        return int(np.shape(self.rewards)[0])


@dataclass(eq=False)
class RolloutDataset:
    """``E`` episodes with ``N`` transitions in total, packed into flat arrays.

    Episode ``i`` owns transitions ``[off[i], off[i+1])`` and states
    ``[off[i] + i, off[i+1] + i + 1)``
    where ``off = episode_offsets``; each episode stores one state more than it has transitions.
    ``confidence`` maps confidence source names to ``(N,)`` float arrays in ``[0, 1]`` (optional;
    ``docs/confidence.md``). See ``docs/dataset_format.md`` for shapes and dtypes.
    """

    states: np.ndarray
    actions: np.ndarray
    rewards: np.ndarray
    terminals: np.ndarray
    truncations: np.ndarray
    episode_offsets: np.ndarray
    instructions: list[str]
    tasks: list[str]
    episode_instruction: np.ndarray
    episode_task: np.ndarray
    episode_level: np.ndarray
    episode_source: np.ndarray
    episode_success: np.ndarray
    domain: str
    action_spec: dict[str, Any]
    provenance: dict[str, Any] = field(default_factory=dict)
    #: Episodes removed by ``load_dataset(..., nonfinite="drop")`` (not stored in files).
    dropped_nonfinite: int = 0
    confidence: dict[str, np.ndarray] = field(default_factory=dict)

    # ---------------------------------------------------------------------------- construction

    @classmethod
    def from_episodes(
        cls,
        episodes: Iterable[Episode],
        *,
        domain: str,
        action_spec: dict[str, Any],
        provenance: dict[str, Any] | None = None,
    ) -> "RolloutDataset":
        """Pack a non-empty sequence of episodes (string tables are built in first-seen order).
        Every episode must carry the same confidence sources."""
        episodes = list(episodes)
        if not episodes:
            raise ValueError("from_episodes needs at least one episode (the state dim is unknown)")
        sources = sorted(episodes[0].confidence)
        spec = normalise_action_spec(action_spec, "action_spec")
        discrete = spec["type"] == "discrete"
        act_shape = () if discrete else tuple(spec["shape"])
        state_dim: int | None = None
        instr_ids: dict[str, int] = {}
        task_ids: dict[str, int] = {}
        states, actions, rewards, lengths = [], [], [], []
        ep_instr: list[int] = []
        ep_task: list[int] = []
        ep_level: list[int] = []
        ep_source: list[int] = []
        ep_success: list[bool] = []
        ep_term: list[bool] = []
        ep_trunc: list[bool] = []
        for i, ep in enumerate(episodes):
            where = f"episode {i}"
            s = np.asarray(ep.states)
            r = np.asarray(ep.rewards)
            a = np.asarray(ep.actions)
            if r.ndim != 1 or r.shape[0] < 1:
                raise ValueError(
                    f"{where}: rewards must have shape (T,) with T >= 1, got {r.shape}"
                )
            t = r.shape[0]
            if s.ndim != 2 or s.shape[0] != t + 1 or s.shape[1] < 1:
                raise ValueError(
                    f"{where}: states must have shape (T + 1, D) = ({t + 1}, D), got {s.shape}"
                )
            if state_dim is None:
                state_dim = s.shape[1]
            elif s.shape[1] != state_dim:
                raise ValueError(
                    f"{where}: state dim {s.shape[1]} differs from episode 0's {state_dim}"
                )
            if a.shape != (t, *act_shape):
                raise ValueError(
                    f"{where}: actions must have shape {(t, *act_shape)} for a "
                    f"{spec['type']} action spec, got {a.shape}"
                )
            if discrete and a.dtype.kind not in INT_KINDS:
                raise ValueError(f"{where}: discrete actions must be integers, got dtype {a.dtype}")
            if not discrete and a.dtype.kind not in "fiu":
                raise ValueError(f"{where}: continuous actions must be numeric, got {a.dtype}")
            if ep.level not in LEVELS:
                raise ValueError(f"{where}: unknown level {ep.level!r}; expected one of {LEVELS}")
            if ep.source not in SOURCES:
                raise ValueError(
                    f"{where}: unknown source {ep.source!r}; expected one of {SOURCES}"
                )
            if not isinstance(ep.instruction, str) or not isinstance(ep.task_spec, str):
                raise ValueError(f"{where}: instruction and task_spec must be str")
            if sorted(ep.confidence) != sources:
                raise ValueError(
                    f"{where}: confidence sources {sorted(ep.confidence)} differ from episode "
                    f"0's {sources}"
                )
            for name, values in ep.confidence.items():
                if np.shape(values) != (t,):
                    raise ValueError(
                        f"{where}: confidence {name!r} must have shape ({t},), "
                        f"got {np.shape(values)}"
                    )
            states.append(s.astype(np.float32, copy=False))
            actions.append(a.astype(np.int64 if discrete else np.float32, copy=False))
            rewards.append(r.astype(np.float32, copy=False))
            lengths.append(t)
            ep_instr.append(instr_ids.setdefault(ep.instruction, len(instr_ids)))
            ep_task.append(task_ids.setdefault(ep.task_spec, len(task_ids)))
            ep_level.append(LEVELS.index(ep.level))
            ep_source.append(SOURCES.index(ep.source))
            ep_success.append(bool(ep.success))
            ep_term.append(bool(ep.terminated))
            ep_trunc.append(bool(ep.truncated))
        offsets = np.zeros(len(episodes) + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        n = int(offsets[-1])
        terminals = np.zeros(n, dtype=bool)
        truncations = np.zeros(n, dtype=bool)
        last = offsets[1:] - 1
        terminals[last] = ep_term
        truncations[last] = ep_trunc
        return cls(
            states=np.concatenate(states),
            actions=np.concatenate(actions),
            rewards=np.concatenate(rewards),
            terminals=terminals,
            truncations=truncations,
            episode_offsets=offsets,
            instructions=list(instr_ids),
            tasks=list(task_ids),
            episode_instruction=np.asarray(ep_instr, dtype=np.int32),
            episode_task=np.asarray(ep_task, dtype=np.int32),
            episode_level=np.asarray(ep_level, dtype=np.uint8),
            episode_source=np.asarray(ep_source, dtype=np.uint8),
            episode_success=np.asarray(ep_success, dtype=bool),
            domain=domain,
            action_spec=spec,
            provenance=dict(provenance or {}),
            confidence={
                name: np.concatenate([np.asarray(ep.confidence[name]) for ep in episodes])
                for name in sources
            },
        )

    @classmethod
    def concatenate(
        cls, datasets: Sequence["RolloutDataset"], *, provenance: dict[str, Any] | None = None
    ) -> "RolloutDataset":
        """Join datasets of the same domain, action spec and state dim, merging the string tables.

        ``provenance`` defaults to the common provenance if all inputs share it, else to
        ``{"concatenated_from": [p0, p1, ...]}``. Only the confidence sources every input has
        are kept.
        """
        datasets = list(datasets)
        if not datasets:
            raise ValueError("concatenate needs at least one dataset")
        first = datasets[0]
        spec = normalise_action_spec(first.action_spec, "action_spec")
        for k, d in enumerate(datasets[1:], start=1):
            if d.domain != first.domain:
                raise ValueError(
                    f"cannot concatenate: dataset {k} has domain {d.domain!r}, "
                    f"dataset 0 has {first.domain!r}"
                )
            other = normalise_action_spec(d.action_spec, "action_spec")
            if other != spec:
                raise ValueError(
                    f"cannot concatenate: dataset {k} has action spec {other}, dataset 0 has {spec}"
                )
            if d.state_dim != first.state_dim:
                raise ValueError(
                    f"cannot concatenate: dataset {k} has state dim {d.state_dim}, "
                    f"dataset 0 has {first.state_dim}"
                )
        instr_ids: dict[str, int] = {}
        task_ids: dict[str, int] = {}
        ep_instr, ep_task, offsets = [], [], [np.zeros(1, dtype=np.int64)]
        shift = 0
        for d in datasets:
            lut_i = np.asarray(
                [instr_ids.setdefault(s, len(instr_ids)) for s in d.instructions], dtype=np.int32
            )
            lut_t = np.asarray(
                [task_ids.setdefault(s, len(task_ids)) for s in d.tasks], dtype=np.int32
            )
            ep_instr.append(lut_i[np.asarray(d.episode_instruction, dtype=np.int64)])
            ep_task.append(lut_t[np.asarray(d.episode_task, dtype=np.int64)])
            offsets.append(np.asarray(d.episode_offsets[1:], dtype=np.int64) + shift)
            shift += d.num_transitions
        if provenance is None:
            provs = [d.provenance for d in datasets]
            same = all(_canonical_json(p) == _canonical_json(provs[0]) for p in provs)
            provenance = dict(provs[0]) if same else {"concatenated_from": provs}

        def cat(name: str) -> np.ndarray:
            return np.concatenate([np.asarray(getattr(d, name)) for d in datasets])

        return cls(
            states=cat("states"),
            actions=cat("actions"),
            rewards=cat("rewards"),
            terminals=cat("terminals"),
            truncations=cat("truncations"),
            episode_offsets=np.concatenate(offsets),
            instructions=list(instr_ids),
            tasks=list(task_ids),
            episode_instruction=np.concatenate(ep_instr).astype(np.int32),
            episode_task=np.concatenate(ep_task).astype(np.int32),
            episode_level=cat("episode_level"),
            episode_source=cat("episode_source"),
            episode_success=cat("episode_success"),
            domain=first.domain,
            action_spec=spec,
            provenance=dict(provenance),
            dropped_nonfinite=sum(d.dropped_nonfinite for d in datasets),
            confidence={
                name: np.concatenate([np.asarray(d.confidence[name]) for d in datasets])
                for name in sorted(set.intersection(*(set(d.confidence) for d in datasets)))
            },
        )

    # ---------------------------------------------------------------------------- accessors

    def __len__(self) -> int:
        """Number of episodes ``E``."""
        return int(np.shape(self.episode_offsets)[0]) - 1

    @property
    def num_transitions(self) -> int:
        """Number of transitions ``N`` (summed over episodes)."""
        return int(np.shape(self.rewards)[0])

    @property
    def state_dim(self) -> int:
        """State vector size ``D``."""
        return int(np.shape(self.states)[1])

    @property
    def is_discrete(self) -> bool:
        """True for a discrete action spec."""
        return self.action_spec.get("type") == "discrete"

    def only_level(self) -> str:
        """The one level every episode belongs to (an imaginary file holds one); ``ValueError``
        naming the levels if there are several."""
        levels = sorted({LEVELS[i] for i in np.unique(np.asarray(self.episode_level))})
        if len(levels) != 1:
            raise ValueError(f"episodes of levels {levels}; one level expected")
        return levels[0]

    def episode_lengths(self) -> np.ndarray:
        """``(E,)`` int64 number of transitions per episode."""
        return np.diff(np.asarray(self.episode_offsets, dtype=np.int64))

    def transition_episodes(self) -> np.ndarray:
        """``(N,)`` int64 episode index of every transition."""
        return np.repeat(np.arange(len(self), dtype=np.int64), self.episode_lengths())

    def distinct_episodes(self) -> np.ndarray:
        """``(K,)`` int64 sorted indices of one copy of each distinct rollout: a rollout stored
        once per wording (``collect --paraphrases``) has the same first state in every copy, and
        only its first copy is listed."""
        firsts = np.asarray(self.states)[
            np.asarray(self.episode_offsets[:-1]) + np.arange(len(self))
        ]
        return np.sort(np.unique(firsts, axis=0, return_index=True)[1]).astype(np.int64)

    def transition_indices(self) -> tuple[np.ndarray, np.ndarray]:
        """``(state_idx, next_state_idx)``: rows of :attr:`states` before/after each transition."""
        state_idx = np.arange(self.num_transitions, dtype=np.int64) + self.transition_episodes()
        return state_idx, state_idx + 1

    def episode(self, i: int) -> Episode:
        """Materialise episode ``i`` (negative indices count from the end); arrays are copies."""
        e = len(self)
        if not -e <= i < e:
            raise IndexError(f"episode index {i} out of range for {e} episodes")
        i = int(i) % e
        t0, t1 = int(self.episode_offsets[i]), int(self.episode_offsets[i + 1])
        return Episode(
            states=np.array(self.states[t0 + i : t1 + i + 1]),
            actions=np.array(self.actions[t0:t1]),
            rewards=np.array(self.rewards[t0:t1]),
            terminated=bool(self.terminals[t1 - 1]),
            truncated=bool(self.truncations[t1 - 1]),
            instruction=self.instructions[int(self.episode_instruction[i])],
            task_spec=self.tasks[int(self.episode_task[i])],
            level=LEVELS[int(self.episode_level[i])],
            source=SOURCES[int(self.episode_source[i])],
            success=bool(self.episode_success[i]),
            confidence={name: np.array(c[t0:t1]) for name, c in self.confidence.items()},
        )

    def __iter__(self):
        for i in range(len(self)):
            yield self.episode(i)

    def select(self, episode_mask: np.ndarray | Sequence[int] | Sequence[bool]) -> "RolloutDataset":
        """Keep a subset of episodes.

        ``episode_mask`` is an ``(E,)`` bool mask or a sequence of episode indices (kept in the
        given order).  String tables are re-packed to the entries still referenced.
        """
        sel = np.asarray(episode_mask)
        e = len(self)
        if sel.dtype == bool:
            if sel.shape != (e,):
                raise ValueError(f"episode mask must have shape ({e},), got {sel.shape}")
            idx = np.flatnonzero(sel)
        else:
            if sel.size and sel.dtype.kind not in INT_KINDS:
                raise ValueError(f"select needs a bool mask or integer indices, got {sel.dtype}")
            idx = sel.astype(np.int64).reshape(-1)
            if idx.size and (idx.min() < -e or idx.max() >= e):
                raise IndexError(f"episode indices out of range for {e} episodes")
            idx = idx % max(e, 1)
        off = np.asarray(self.episode_offsets, dtype=np.int64)
        lens = off[idx + 1] - off[idx]
        new_off = np.zeros(idx.size + 1, dtype=np.int64)
        np.cumsum(lens, out=new_off[1:])
        t_idx = _ranges(off[idx], lens)
        s_idx = _ranges(off[idx] + idx, lens + 1)
        instr_keep, instr_new = np.unique(
            np.asarray(self.episode_instruction)[idx], return_inverse=True
        )
        task_keep, task_new = np.unique(np.asarray(self.episode_task)[idx], return_inverse=True)
        return dataclasses.replace(
            self,
            states=np.asarray(self.states)[s_idx],
            actions=np.asarray(self.actions)[t_idx],
            rewards=np.asarray(self.rewards)[t_idx],
            terminals=np.asarray(self.terminals)[t_idx],
            truncations=np.asarray(self.truncations)[t_idx],
            episode_offsets=new_off,
            instructions=[self.instructions[int(k)] for k in instr_keep],
            tasks=[self.tasks[int(k)] for k in task_keep],
            episode_instruction=instr_new.reshape(-1).astype(np.int32),
            episode_task=task_new.reshape(-1).astype(np.int32),
            episode_level=np.asarray(self.episode_level)[idx],
            episode_source=np.asarray(self.episode_source)[idx],
            episode_success=np.asarray(self.episode_success)[idx],
            action_spec=dict(self.action_spec),
            provenance=dict(self.provenance),
            confidence={name: np.asarray(c)[t_idx] for name, c in self.confidence.items()},
        )

    def with_confidence(self, name: str, values: np.ndarray) -> RolloutDataset:
        """A copy whose confidence source ``name`` is ``values`` (``(N,)``; added or replaced;
        checked when the dataset is validated or saved)."""
        return dataclasses.replace(self, confidence={**self.confidence, name: np.asarray(values)})

    def summary(self) -> str:
        """A short multi-line human-readable description."""
        e, n = len(self), self.num_transitions
        levels = np.bincount(np.asarray(self.episode_level, dtype=np.int64), minlength=len(LEVELS))
        sources = np.bincount(
            np.asarray(self.episode_source, dtype=np.int64), minlength=len(SOURCES)
        )
        n_success = int(np.count_nonzero(self.episode_success))
        rate = f"{n_success / e:.3f} ({n_success}/{e})" if e else "n/a (0 episodes)"
        mean_len = f"{n / e:.2f}" if e else "n/a"
        spec = self.action_spec
        if spec.get("type") == "discrete":
            spec_txt = f"discrete(n={spec.get('n')})"
        else:
            spec_txt = (
                f"continuous(shape={spec.get('shape')}, low={spec.get('low')}, "
                f"high={spec.get('high')})"
            )
        lines = [
            f"domain: {self.domain}",
            f"episodes: {e}",
            f"transitions: {n}",
            "levels: " + ", ".join(f"{name}={int(c)}" for name, c in zip(LEVELS, levels)),
            "sources: " + ", ".join(f"{name}={int(c)}" for name, c in zip(SOURCES, sources)),
            f"success rate: {rate}",
            f"mean length: {mean_len}",
            f"instructions: {len(self.instructions)}",
            f"tasks: {len(self.tasks)}",
            f"state dim: {self.state_dim}",
            f"action spec: {spec_txt}",
        ]
        for name, values in sorted(self.confidence.items()):
            mean = f"mean {float(np.mean(values)):.3f}" if n else "empty"
            lines.append(f"confidence {name}: {mean}")
        if self.dropped_nonfinite:
            lines.append(f"dropped (non-finite): {self.dropped_nonfinite}")
        return "\n".join(lines)

    def __repr__(self) -> str:
        return (
            f"RolloutDataset(domain={self.domain!r}, episodes={len(self)}, "
            f"transitions={self.num_transitions}, state_dim={self.state_dim}, "
            f"action_spec={self.action_spec})"
        )


def _ranges(starts: np.ndarray, lens: np.ndarray) -> np.ndarray:
    """Concatenation of ``arange(s, s + l)`` for each ``(s, l)``, vectorised."""
    starts = np.asarray(starts, dtype=np.int64)
    lens = np.asarray(lens, dtype=np.int64)
    total = int(lens.sum())
    if total == 0:
        return np.zeros(0, dtype=np.int64)
    begin = np.zeros(lens.size, dtype=np.int64)
    np.cumsum(lens[:-1], out=begin[1:])
    return np.repeat(starts - begin, lens) + np.arange(total, dtype=np.int64)


def _canonical_json(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True)
