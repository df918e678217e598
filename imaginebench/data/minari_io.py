"""Minari interchange: a rollout dataset as a `Minari <https://minari.farama.org>`_ dataset and back.

:func:`export_minari` writes one Minari dataset (HDF5 storage) per rollout dataset;
:func:`import_minari` reads such a dataset back into a :class:`RolloutDataset`. The mapping
(``docs/dataset_format.md``, "Minari interchange"):

* each episode's states ``(T + 1, D)``, actions, rewards and the per-step terminal / truncation
  flags become the Minari episode's ``observations``, ``actions``, ``rewards``,
  ``terminations`` and ``truncations`` (same dtypes, bit for bit); ``infos`` is empty;
* the per-episode ``instruction``, ``task`` (the task spec JSON), ``level``, ``source`` and
  ``success`` go into the Minari *episode metadata* (attributes of the episode's HDF5 group,
  read with ``dataset.storage.get_episode_metadata([i])``), one string or bool per episode,
  and each confidence source's ``(T,)`` float32 values as ``confidence.<source>``;
* the file's domain, action spec, provenance, state dim and string tables (their order, so the
  ids come back identical) go into the dataset metadata under ``"imaginebench"``;
* the environment spec is the domain's gymnasium id with ``kwargs={"level": level}``, so
  ``minari.load_dataset(id).recover_environment()`` builds the environment of that level.
* the dataset's observation / action space is the environment's, or the same ``Box`` without
  bounds when some rows lie outside it (imagined states can).

A Minari dataset that was not written by :func:`export_minari` has no instructions or task specs,
which our format requires; :func:`import_minari` refuses it and says what is missing.

``minari`` is an optional dependency (``pip install 'imaginebench[minari]'``), imported only
when these functions run.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import secrets
import shutil
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from imaginebench.data.dataset import RolloutDataset
from imaginebench.data.schema import (
    ARRAY_KINDS,
    FORMAT_NAME,
    LEVELS,
    SCHEMA_VERSION,
    SOURCES,
    SUPPORTED_SCHEMA_VERSIONS,
    DatasetError,
    default_provenance,
    normalise_action_spec,
)
from imaginebench.data.validation import validate

__all__ = [
    "EPISODE_METADATA_KEYS",
    "METADATA_KEY",
    "MINARI_INSTALL_HINT",
    "MinariMissingError",
    "default_dataset_id",
    "default_datasets_root",
    "export_minari",
    "import_minari",
]

#: Key of the dataset metadata (``metadata.json``) that holds the rollout file's own metadata.
METADATA_KEY = "imaginebench"
#: Per-episode fields stored as Minari episode metadata.
EPISODE_METADATA_KEYS = ("instruction", "task", "level", "source", "success")
MINARI_INSTALL_HINT = "pip install 'imaginebench[minari]'"
#: ``(namespace/)name-vN``: the version is required (Minari's parser fails without one).
_DATASET_ID = re.compile(r"^(?:[-_\w][-_\w/]*[-_\w]+/)?[-_\w]+?-v\d+$")


class MinariMissingError(ImportError):
    """``minari`` is not installed."""


def _minari() -> Any:
    try:
        import minari
    except ImportError as err:
        raise MinariMissingError(
            f"the Minari export/import needs the minari package: {MINARI_INSTALL_HINT}"
        ) from err
    return minari


def default_datasets_root() -> Path:
    """Minari's own datasets folder: ``$MINARI_DATASETS_PATH``, else ``~/.minari/datasets``."""
    env = os.environ.get("MINARI_DATASETS_PATH")
    return Path(env) if env else Path.home() / ".minari" / "datasets"


@contextmanager
def _datasets_root(root: Path) -> Iterator[None]:
    """Point Minari (which reads ``MINARI_DATASETS_PATH`` on every call) at ``root``."""
    old = os.environ.get("MINARI_DATASETS_PATH")
    os.environ["MINARI_DATASETS_PATH"] = str(root)
    try:
        yield
    finally:
        if old is None:
            os.environ.pop("MINARI_DATASETS_PATH", None)
        else:
            os.environ["MINARI_DATASETS_PATH"] = old


def _names(ids: np.ndarray, table: tuple[str, ...]) -> list[str]:
    return [table[int(i)] for i in np.unique(np.asarray(ids, dtype=np.int64))]


def default_dataset_id(ds: RolloutDataset) -> str:
    """``imaginebench/<domain>-<level or mixed>-<source or mixed>-v0``."""
    levels = _names(ds.episode_level, LEVELS)
    sources = _names(ds.episode_source, SOURCES)
    level = levels[0] if len(levels) == 1 else "mixed"
    source = sources[0] if len(sources) == 1 else "mixed"
    return f"imaginebench/{ds.domain}-{level}-{source}-v0"


def _check_dataset_id(dataset_id: str) -> str:
    if not isinstance(dataset_id, str) or not _DATASET_ID.fullmatch(dataset_id):
        raise ValueError(
            f"malformed Minari dataset id {dataset_id!r}: it must look like "
            "'namespace/name-v0' (letters, digits, '-', '_'; the namespace is optional, "
            "the version is not)"
        )
    return dataset_id


def _env_spec(domain: str, level: str) -> Any:
    """The domain's registered gymnasium spec with ``kwargs["level"] = level``."""
    import gymnasium as gym

    from imaginebench.envs import get_domain  # registers the ids

    spec = gym.spec(get_domain(domain).env_id)
    return dataclasses.replace(spec, kwargs={**spec.kwargs, "level": level})


def _check_spaces(src: str, ds: RolloutDataset, obs_space: Any, act_space: Any) -> None:
    import gymnasium as gym

    if not isinstance(obs_space, gym.spaces.Box) or obs_space.shape != (ds.state_dim,):
        raise DatasetError(
            src,
            f"the {ds.domain!r} environment's observation space {obs_space} does not hold the "
            f"file's {ds.state_dim}-d states",
        )
    spec = ds.action_spec
    if spec["type"] == "discrete":
        ok = isinstance(act_space, gym.spaces.Discrete) and int(act_space.n) == spec["n"]
    else:
        ok = isinstance(act_space, gym.spaces.Box) and list(act_space.shape) == spec["shape"]
    if not ok:
        raise DatasetError(
            src,
            f"the {ds.domain!r} environment's action space {act_space} does not match the "
            f"file's action spec {spec}",
        )


def _space_holding(space: Any, rows: np.ndarray) -> tuple[Any, int]:
    """``space`` and 0 if it holds every row, else the same Box without bounds and the number of
    rows outside (the dataset's space must hold its data; imagined states may leave the env's)."""
    import gymnasium as gym

    if not isinstance(space, gym.spaces.Box) or not len(rows):
        return space, 0
    flat = rows.reshape(len(rows), -1)
    inside = (flat >= space.low.reshape(-1)) & (flat <= space.high.reshape(-1))
    outside = int(np.count_nonzero(~inside.all(axis=1)))
    if not outside:
        return space, 0
    return gym.spaces.Box(-np.inf, np.inf, space.shape, space.dtype), outside


def _episode_slices(ds: RolloutDataset) -> Iterator[tuple[int, slice, slice]]:
    off = np.asarray(ds.episode_offsets, dtype=np.int64)
    for i in range(len(ds)):
        t0, t1 = int(off[i]), int(off[i + 1])
        yield i, slice(t0, t1), slice(t0 + i, t1 + i + 1)


def _differences(a: RolloutDataset, b: RolloutDataset) -> list[str]:
    """Fields in which ``b`` differs from ``a`` (arrays by dtype and value, strings exactly)."""
    out = []
    for name in ARRAY_KINDS:  # every array of the format
        x, y = np.asarray(getattr(a, name)), np.asarray(getattr(b, name))
        if x.dtype != y.dtype or x.shape != y.shape or not np.array_equal(x, y):
            out.append(name)
    for name in ("instructions", "tasks", "domain"):
        if getattr(a, name) != getattr(b, name):
            out.append(name)
    if a.confidence.keys() != b.confidence.keys() or any(
        a.confidence[k].dtype != b.confidence[k].dtype
        or not np.array_equal(a.confidence[k], b.confidence[k])
        for k in a.confidence
    ):
        out.append("confidence")
    for name in ("action_spec", "provenance"):
        if _sorted_json(getattr(a, name)) != _sorted_json(getattr(b, name)):
            out.append(name)
    return out


def export_minari(
    dataset: RolloutDataset,
    root: str | os.PathLike[str] | None = None,
    *,
    dataset_id: str | None = None,
    env_level: str | None = None,
    overwrite: bool = False,
    source_name: str = "<dataset>",
) -> Path:
    """Write ``dataset`` as the Minari dataset ``dataset_id`` under the datasets folder ``root``.

    Args:
        dataset: the rollouts (validated strictly first: non-finite values are refused).
        root: Minari datasets folder (default: :func:`default_datasets_root`);
            ``minari.load_dataset(dataset_id)`` finds the result when ``MINARI_DATASETS_PATH``
            points there.
        dataset_id: default :func:`default_dataset_id`.
        env_level: level of the environment recorded in the env spec; default the level of the
            episodes, required when they span several levels (each episode keeps its own level in
            its metadata either way).
        overwrite: replace an existing dataset of that id (never anything else).
        source_name: where the dataset came from (error messages and the metadata).

    The dataset is written into a hidden temporary folder of ``root``, read back and compared with
    ``dataset`` (every array by dtype and value, every string) and only then moved to
    ``root/<dataset_id>``, so a failed export leaves no partial dataset and an existing one
    untouched. Returns the dataset's folder.
    """
    minari = _minari()
    from minari.data_collector import EpisodeBuffer

    ds = validate(dataset, source_name=source_name, nonfinite="raise")
    dataset_id = _check_dataset_id(dataset_id or default_dataset_id(ds))
    root = (Path(root) if root is not None else default_datasets_root()).expanduser().absolute()
    target = root / dataset_id
    if target.exists() or target.is_symlink():
        if not overwrite:
            raise FileExistsError(
                f"{target}: Minari dataset {dataset_id!r} already exists; pass --overwrite "
                "(overwrite=True) to replace it"
            )
        if not (target / "data" / "metadata.json").is_file():
            raise FileExistsError(
                f"{target}: exists and is not a Minari dataset; refusing to replace it"
            )
    levels = _names(ds.episode_level, LEVELS)
    if env_level is None:
        if len(levels) != 1:
            what = f"the episodes span the levels {levels}" if levels else "it has no episodes"
            raise ValueError(
                f"{source_name}: {what}; pass --env-level "
                "(env_level=) to choose the level of the environment in the Minari env spec "
                "(every episode keeps its own level in its metadata)"
            )
        env_level = levels[0]
    if env_level not in LEVELS:
        raise ValueError(f"unknown env level {env_level!r}; expected one of {', '.join(LEVELS)}")

    import gymnasium as gym

    spec = _env_spec(ds.domain, env_level)
    env = gym.make(spec)
    try:
        obs_space, act_space = env.observation_space, env.action_space
    finally:
        env.close()
    _check_spaces(source_name, ds, obs_space, act_space)
    obs_space, obs_outside = _space_holding(obs_space, ds.states)
    act_space, act_outside = _space_holding(act_space, ds.actions)

    buffers = [
        EpisodeBuffer(
            observations=ds.states[s],
            actions=ds.actions[t],
            rewards=ds.rewards[t],
            terminations=ds.terminals[t],
            truncations=ds.truncations[t],
            infos={},  # an empty group: Minari's EpisodeData expects a dict
        )
        for _, t, s in _episode_slices(ds)
    ]
    episode_metadata = [
        {
            "instruction": ds.instructions[int(ds.episode_instruction[i])],
            "task": ds.tasks[int(ds.episode_task[i])],
            "level": LEVELS[int(ds.episode_level[i])],
            "source": SOURCES[int(ds.episode_source[i])],
            "success": np.bool_(ds.episode_success[i]),
            **{f"confidence.{name}": values[t] for name, values in ds.confidence.items()},
        }
        for i, t, _ in _episode_slices(ds)
    ]
    ours = {
        "format": FORMAT_NAME,
        "schema_version": SCHEMA_VERSION,
        "domain": ds.domain,
        "state_dim": ds.state_dim,
        "action_spec": ds.action_spec,
        "provenance": ds.provenance,
        "instructions": list(ds.instructions),
        "tasks": list(ds.tasks),
        "confidence_sources": sorted(ds.confidence),
        "env_level": env_level,
        # rows outside the environment's space (imagined states can be): the dataset's space
        # is then the environment's Box without bounds
        "states_outside_env_space": obs_outside,
        "actions_outside_env_space": act_outside,
        "episode_metadata_keys": list(EPISODE_METADATA_KEYS),
        "exported": {
            "from": source_name,
            **{
                k: v
                for k, v in default_provenance().items()
                if k in ("command", "created", "imaginebench_version")
            },
        },
    }
    sources = _names(ds.episode_source, SOURCES)
    description = (
        f"ImagineBench {ds.domain} rollouts ({len(ds)} episodes; levels {', '.join(levels)}; "
        f"sources {', '.join(sources)}) exported from {Path(source_name).name}. Each episode's "
        "instruction, task spec (JSON), level, source and success are in its episode metadata "
        "(dataset.storage.get_episode_metadata([i])); the rollout file's domain, action spec "
        f"and provenance are in the dataset metadata under '{METADATA_KEY}'."
    )
    for what, n, total in (
        ("states", obs_outside, len(ds.states)),
        ("actions", act_outside, len(ds.actions)),
    ):
        if n:
            description += (
                f" {n} of {total} {what} lie outside the environment's space, so the dataset's "
                "space is unbounded."
            )
    generator = ds.provenance.get("generator")

    root.mkdir(parents=True, exist_ok=True)
    staging = root / f".imaginebench-export.{os.getpid()}.{secrets.token_hex(4)}.tmp"
    try:
        with _datasets_root(staging), warnings.catch_warnings():
            for field in ("code_permalink", "author", "author_email"):
                warnings.filterwarnings("ignore", message=rf"`{field}` is set to None")
            created = minari.create_dataset_from_buffers(
                dataset_id,
                buffers,
                env=spec,
                eval_env=spec,
                algorithm_name=str(generator) if generator else "unknown",
                observation_space=obs_space,
                action_space=act_space,
                description=description,
                requirements=["imaginebench"],
                data_format="hdf5",
                jpeg_encoding=False,
            )
            storage = created.storage
            if len(ds):
                storage.update_episode_metadata(episode_metadata, range(len(ds)))
            storage.update_metadata({METADATA_KEY: ours})
        written = staging / dataset_id
        back = _read(minari.MinariDataset(written / "data"), str(written))
        differ = _differences(ds, back)
        if differ:
            raise DatasetError(
                source_name,
                f"the Minari copy does not read back identically ({', '.join(differ)} differ); "
                "nothing was written",
            )
        _publish(written, target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    from minari.dataset.minari_dataset import parse_dataset_id
    from minari.namespace import create_namespace, list_local_namespaces

    namespace = parse_dataset_id(dataset_id)[0]
    if namespace is not None:
        with _datasets_root(root):
            if namespace not in list_local_namespaces():
                create_namespace(namespace)
    return target


def _publish(written: Path, target: Path) -> None:
    """Move the finished dataset folder onto ``target``, replacing an old one only after the new
    one is in place (the old one is restored if the move fails)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    old = None
    if target.exists() or target.is_symlink():
        old = target.parent / f".{target.name}.{os.getpid()}.{secrets.token_hex(4)}.old"
        os.rename(target, old)
    try:
        os.rename(written, target)
    except BaseException:
        if old is not None:
            os.rename(old, target)
        raise
    if old is not None:
        if old.is_symlink():
            old.unlink()
        else:
            shutil.rmtree(old, ignore_errors=True)


# --------------------------------------------------------------------------------------------------
# Import
# --------------------------------------------------------------------------------------------------


def _resolve(dataset: str | os.PathLike[str], root: str | os.PathLike[str] | None) -> Path:
    """A dataset folder (or its ``data`` folder) as given, else ``root/<dataset id>``."""
    given = Path(dataset).expanduser()
    if given.is_dir() and (given / "metadata.json").is_file():
        return given
    if given.is_dir() and (given / "data" / "metadata.json").is_file():
        return given / "data"
    base = (Path(root) if root is not None else default_datasets_root()).expanduser()
    data = base / str(dataset) / "data"
    if not (data / "metadata.json").is_file():
        raise FileNotFoundError(
            2,
            f"{dataset}: no Minari dataset with this id under {base} (nor a dataset folder at "
            "this path); give its id with --root DIR (or MINARI_DATASETS_PATH), or its folder",
            str(dataset),
        )
    return data


def import_minari(
    dataset: str | os.PathLike[str], root: str | os.PathLike[str] | None = None
) -> RolloutDataset:
    """Read a Minari dataset written by :func:`export_minari` back into a rollout dataset.

    ``dataset`` is a dataset id under ``root`` (default :func:`default_datasets_root`) or the
    path of a dataset folder. The result is validated like a loaded file (non-finite values are
    refused) and equals the exported dataset: arrays, string tables, domain, action spec and
    provenance. Raises :class:`DatasetError` for a dataset without ImagineBench metadata (one
    not exported by us) or with inconsistent contents, :class:`FileNotFoundError` if there is
    no such dataset.
    """
    minari = _minari()
    data = _resolve(dataset, root)
    src = str(dataset)
    try:
        md = minari.MinariDataset(data)
    except (AssertionError, KeyError, OSError, TypeError, ValueError) as err:
        raise DatasetError(src, f"not a readable Minari dataset ({type(err).__name__}: {err})")
    return _read(md, src)


def _read(md: Any, src: str) -> RolloutDataset:
    import gymnasium as gym

    ours = md.storage.metadata.get(METADATA_KEY)
    if not isinstance(ours, dict):
        raise DatasetError(
            src,
            "not exported by ImagineBench: its Minari metadata has no "
            f"'{METADATA_KEY}' entry (domain, action spec, provenance), and its episodes "
            f"carry no {', '.join(EPISODE_METADATA_KEYS)}, which every episode of our format "
            "needs (an instruction and a task spec above all); only datasets written by "
            "'imaginebench export-minari' can be imported",
        )

    def need(key: str, kind: type | tuple[type, ...]) -> Any:
        if key not in ours:
            raise DatasetError(src, f"Minari metadata '{METADATA_KEY}' lacks '{key}'")
        value = ours[key]
        if not isinstance(value, kind) or isinstance(value, bool) and kind is not bool:
            raise DatasetError(src, f"Minari metadata '{METADATA_KEY}.{key}' is {value!r}")
        return value

    if ours.get("format") != FORMAT_NAME:
        raise DatasetError(
            src, f"Minari metadata '{METADATA_KEY}.format' is {ours.get('format')!r}"
        )
    version = need("schema_version", int)
    if version not in SUPPORTED_SCHEMA_VERSIONS:
        raise DatasetError(
            src,
            f"unsupported schema_version {version}; this version of imaginebench reads "
            f"{list(SUPPORTED_SCHEMA_VERSIONS)}",
        )
    domain = need("domain", str)
    state_dim = need("state_dim", int)
    action_spec = normalise_action_spec(need("action_spec", dict), src)
    provenance = need("provenance", dict)
    tables = {}
    for name in ("instructions", "tasks"):
        table = need(name, list)
        if not all(isinstance(s, str) for s in table):
            raise DatasetError(src, f"Minari metadata '{METADATA_KEY}.{name}' holds non-strings")
        tables[name] = table
    lookup = {name: {s: k for k, s in enumerate(t)} for name, t in tables.items()}
    sources = ours.get("confidence_sources", [])  # absent in exports of schema version 1
    if not isinstance(sources, list) or not all(isinstance(s, str) for s in sources):
        raise DatasetError(
            src, f"Minari metadata '{METADATA_KEY}.confidence_sources' is {sources!r}"
        )
    confidence: dict[str, list[np.ndarray]] = {name: [] for name in sources}
    if not isinstance(md.observation_space, gym.spaces.Box) or md.observation_space.shape != (
        state_dim,
    ):
        raise DatasetError(
            src, f"observation space {md.observation_space} is not a Box of shape ({state_dim},)"
        )

    discrete = action_spec["type"] == "discrete"
    act_shape = () if discrete else tuple(action_spec["shape"])
    states, actions, rewards, terminals, truncations, lengths = [], [], [], [], [], []
    ep_ids: dict[str, list[int]] = {k: [] for k in ("instruction", "task", "level", "source")}
    success: list[bool] = []
    indices = md.episode_indices
    metas = list(md.storage.get_episode_metadata(indices))
    for i, (ep, meta) in enumerate(zip(md.iterate_episodes(indices), metas, strict=True)):
        where = f"episode {i}"
        obs = ep.observations
        if not isinstance(obs, np.ndarray) or obs.dtype.kind != "f" or obs.ndim != 2:
            raise DatasetError(src, f"{where}: observations are not a 2-D float array")
        t = len(ep.rewards)
        if obs.shape != (t + 1, state_dim):
            raise DatasetError(
                src, f"{where}: observations have shape {obs.shape}, expected {(t + 1, state_dim)}"
            )
        act = np.asarray(ep.actions)
        if act.shape != (t, *act_shape):
            raise DatasetError(
                src, f"{where}: actions have shape {act.shape}, expected {(t, *act_shape)}"
            )
        flags = {}
        for name in ("terminations", "truncations"):
            flag = np.asarray(getattr(ep, name))
            if flag.dtype != bool or flag.shape != (t,):
                raise DatasetError(src, f"{where}: {name} are not {t} booleans")
            flags[name] = flag
        missing = [k for k in EPISODE_METADATA_KEYS if k not in meta]
        if missing:
            raise DatasetError(src, f"{where}: episode metadata lacks {', '.join(missing)}")
        for key, name in (("instruction", "instructions"), ("task", "tasks")):
            value = meta[key]
            if not isinstance(value, str) or value not in lookup[name]:
                raise DatasetError(
                    src, f"{where}: its {key} {value!r} is not in the metadata's {name} table"
                )
            ep_ids[key].append(lookup[name][value])
        for key, names in (("level", LEVELS), ("source", SOURCES)):
            if meta[key] not in names:
                raise DatasetError(
                    src, f"{where}: unknown {key} {meta[key]!r}; expected one of {names}"
                )
            ep_ids[key].append(names.index(meta[key]))
        if not isinstance(meta["success"], (bool, np.bool_)):
            raise DatasetError(src, f"{where}: success is {meta['success']!r}, not a boolean")
        success.append(bool(meta["success"]))
        for name in sources:
            values = np.asarray(meta.get(f"confidence.{name}", np.zeros(0)))
            if values.shape != (t,):
                raise DatasetError(
                    src, f"{where}: episode metadata confidence.{name} is not {t} values"
                )
            confidence[name].append(values)
        states.append(obs)
        actions.append(act)
        rewards.append(np.asarray(ep.rewards))
        terminals.append(flags["terminations"])
        truncations.append(flags["truncations"])
        lengths.append(t)
    offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])

    def cat(parts: list[np.ndarray], shape: tuple[int, ...], dtype: Any) -> np.ndarray:
        return np.concatenate(parts) if parts else np.zeros((0, *shape), dtype=dtype)

    raw = RolloutDataset(
        states=cat(states, (state_dim,), np.float32),
        actions=cat(actions, act_shape, np.int64 if discrete else np.float32),
        rewards=cat(rewards, (), np.float32),
        terminals=cat(terminals, (), bool),
        truncations=cat(truncations, (), bool),
        episode_offsets=offsets,
        instructions=list(tables["instructions"]),
        tasks=list(tables["tasks"]),
        episode_instruction=np.asarray(ep_ids["instruction"], dtype=np.int32),
        episode_task=np.asarray(ep_ids["task"], dtype=np.int32),
        episode_level=np.asarray(ep_ids["level"], dtype=np.uint8),
        episode_source=np.asarray(ep_ids["source"], dtype=np.uint8),
        episode_success=np.asarray(success, dtype=bool),
        domain=domain,
        action_spec=action_spec,
        provenance=provenance,
        confidence={name: cat(parts, (), np.float32) for name, parts in confidence.items()},
    )
    return validate(raw, source_name=src, nonfinite="raise")


def _sorted_json(obj: Any) -> str:
    """JSON with sorted keys: equal objects give equal strings."""
    return json.dumps(obj, sort_keys=True)
