"""Nested settings given as their config class or as a plain dict (what YAML and JSON give), and
training YAMLs read with their includes resolved."""

from __future__ import annotations

import dataclasses
import numbers
import types
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypeVar, overload

import numpy as np

C = TypeVar("C")

_PLAIN_TYPES = (bool, int, float, str)


class ConfigError(TypeError, ValueError):
    """A nested setting of the wrong type or with an unknown key. A ``TypeError``, and a
    ``ValueError`` too, so the command line reports it in one line like other bad input."""


@overload
def as_config(value: None, cls: type[C], name: str) -> None: ...
@overload
def as_config(value: C | Mapping[str, Any], cls: type[C], name: str) -> C: ...
def as_config(value: C | Mapping[str, Any] | None, cls: type[C], name: str) -> C | None:
    """``value`` as an instance of the dataclass ``cls``: returned as is if it already is one,
    built from its fields if it is a mapping, ``None`` left as ``None``.

    Raises :class:`ConfigError` (a ``TypeError``) naming the argument ``name`` for any other
    type, an unknown key or a field of the wrong plain type (``int``, ``float``, ``bool``,
    ``str``); the class's own checks (``ValueError``) are prefixed with ``name``.
    """
    if value is None or isinstance(value, cls):
        return value
    if not isinstance(value, Mapping):
        raise ConfigError(
            f"{name} must be a {cls.__name__} or a dict of its fields, "
            f"got {type(value).__name__}: {value!r}"
        )
    fields = [f.name for f in dataclasses.fields(cls) if f.init]  # type: ignore[arg-type]
    unknown = [key for key in value if key not in fields]
    if unknown:
        raise ConfigError(
            f"{name}: unknown key(s) {', '.join(map(repr, unknown))} for {cls.__name__} "
            f"(known: {', '.join(fields)})"
        )
    hints = typing.get_type_hints(cls)
    for key, item in value.items():
        _check_plain_type(f"{name}.{key}", item, hints.get(key))
    try:
        return cls(**value)
    except ValueError as err:
        raise ValueError(f"{name}: {err}") from err


def _fits(value: Any, t: Any) -> bool:
    if t is type(None):
        return value is None
    if t is bool:
        return isinstance(value, (bool, np.bool_))
    if isinstance(value, (bool, np.bool_)):
        return False  # True is an int to Python, never a count or a rate here
    if t is int:
        return isinstance(value, numbers.Integral)
    if t is float:
        return isinstance(value, numbers.Real)
    return isinstance(value, t)


def _check_plain_type(name: str, value: Any, hint: Any) -> None:
    """Raise :class:`ConfigError` if ``hint`` is a plain type (or a union of them, ``None``
    included) that ``value`` does not fit; an integer fits ``float``, a bool only ``bool``."""
    union = typing.get_origin(hint) in (typing.Union, types.UnionType)
    allowed = typing.get_args(hint) if union else (hint,)
    if not all(t in _PLAIN_TYPES or t is type(None) for t in allowed):
        return  # containers, literals, ...: left to the class
    if not any(_fits(value, t) for t in allowed):
        expected = " or ".join("None" if t is type(None) else t.__name__ for t in allowed)
        raise ConfigError(f"{name} must be {expected}, got {type(value).__name__}: {value!r}")


def load_config_file(path: str | Path) -> dict[str, Any]:
    """A training YAML as one dict, its ``config: <file>`` include resolved as LightningCLI
    (jsonargparse 4.x) resolves it, so ``fit --print_config`` shows the same values.

    A ``config`` key inside a config file names another config file, relative to the including
    file's folder; the included file may include one in turn (``configs/<algo>_<domain>.yaml``
    includes ``parts/<domain>.yaml``, which includes ``parts/trainer.yaml``). Its keys come
    first; then each key of the including file, in order: a plain key (``trainer:``) replaces
    the included value whole, nested mappings included; a dotted key (``trainer.max_steps:``,
    ``trainer.logger.init_args.name:``) sets that one value and keeps the rest. Use it to read
    or rewrite a config without the CLI (placeholders such as ``{name}`` in a checkpoint's
    ``dirpath`` stay as written; the CLI fills them when it runs).

    Raises :class:`ConfigError` (a ``ValueError``) for what jsonargparse would ignore or
    misread: ``config`` after other keys, a list of includes, a dotted key into a value that is
    not a mapping, an include cycle; ``OSError`` for a missing file.
    """
    return _load(Path(path), ())


def _load(path: Path, chain: tuple[Path, ...]) -> dict[str, Any]:
    import yaml

    if path.resolve() in chain:
        raise ConfigError(f"{path}: includes itself ({' -> '.join(map(str, chain))})")
    loaded = yaml.safe_load(path.read_text())
    if loaded is None:
        return {}
    if not isinstance(loaded, dict):
        raise ConfigError(f"{path}: a config file must be a mapping, got {type(loaded).__name__}")
    config: dict[str, Any] = {}
    for n, (key, value) in enumerate(loaded.items()):
        if key == "config":
            if n:
                raise ConfigError(f"{path}: 'config' (the include) must be the file's first key")
            if not isinstance(value, str):
                raise ConfigError(
                    f"{path}: config: {value!r}: include one file (jsonargparse ignores a "
                    "list); that file may include another"
                )
            config = _load(path.parent / value, (*chain, path.resolve()))
        elif "." in str(key):
            _set_dotted(config, str(key), value, path)
        else:
            config[key] = value
    return config


def _set_dotted(config: dict[str, Any], key: str, value: Any, path: Path) -> None:
    """Set ``config[a][b][c] = value`` for ``key`` ``a.b.c``, keeping ``a``'s and ``b``'s other
    keys (missing levels are created)."""
    *parents, leaf = key.split(".")
    node = config
    for n, part in enumerate(parents):
        child = node.setdefault(part, {})
        if not isinstance(child, dict):
            where = ".".join(parents[: n + 1])
            raise ConfigError(f"{path}: {key}: {where} is not a mapping ({child!r})")
        node = child
    node[leaf] = value
