"""The package's layering: which packages may import which (read from the source with ``ast``)."""

from __future__ import annotations

import ast
import inspect
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "imaginebench"


def _module_name(path: Path, root: Path) -> str:
    parts = path.relative_to(root.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_modules(path: Path, root: Path = PACKAGE) -> set[str]:
    """Every module ``path`` (a file under the package folder ``root``) imports, at top level or
    inside functions, relative imports resolved, ``importlib.import_module("...")`` included."""
    tree = ast.parse(path.read_text(), filename=str(path))
    package = _module_name(path, root)
    if path.name != "__init__.py":
        package = package.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            found.add(module)
            found.update(f"{module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "import_module":
            if node.args and isinstance(node.args[0], ast.Constant):
                found.add(str(node.args[0].value))
    return found


def violations(layer: str, forbidden: tuple[str, ...]) -> list[str]:
    """``file: module`` for every import under ``imaginebench/<layer>`` reaching ``forbidden``."""
    out = []
    for path in sorted((PACKAGE / layer).rglob("*.py")):
        for module in sorted(imported_modules(path)):
            if any(module == f or module.startswith(f + ".") for f in forbidden):
                out.append(f"{path.relative_to(PACKAGE.parent)}: {module}")
    return out


ABOVE_ENVS = tuple(
    f"imaginebench.{name}"
    for name in ("modules", "data", "datamodules", "experts", "imagination", "callbacks")
)


def test_the_import_walker_sees_lazy_and_relative_imports(tmp_path):
    root = tmp_path / "imaginebench"
    probe = root / "envs" / "clevr" / "probe.py"
    probe.parent.mkdir(parents=True)
    probe.write_text(
        "from ..base import Task\n"
        "def f():\n"
        "    from imaginebench.experts import make_expert\n"
        "    import imaginebench.data.collect\n"
        "    importlib.import_module('imaginebench.modules.backbone')\n"
    )
    found = imported_modules(probe, root)
    assert {
        "imaginebench.envs.base",
        "imaginebench.experts",
        "imaginebench.data.collect",
        "imaginebench.modules.backbone",
    } <= found


def test_envs_are_the_ground_floor():
    """Simulators, tasks and judges import nothing that is built on them."""
    assert violations("envs", ABOVE_ENVS) == []


def test_models_do_not_depend_on_data_or_experts():
    forbidden = tuple(
        f"imaginebench.{name}"
        for name in ("data", "datamodules", "experts", "imagination", "callbacks")
    )
    assert violations("modules", forbidden) == []


def test_every_domain_has_an_expert():
    from imaginebench.envs import DOMAINS
    from imaginebench.experts import EXPERTS, expert_class

    assert set(EXPERTS) == set(DOMAINS)
    for domain in EXPERTS:
        assert callable(getattr(expert_class(domain), "act"))
    with pytest.raises(ValueError, match="no expert for domain"):
        expert_class("nowhere")


def test_loading_a_grounding_checkpoint_allows_its_collect_config():
    """Grounding checkpoints hold their data module's CollectConfig; the imagination code that
    loads them must allow it under ``weights_only`` even in a fresh process."""
    code = (
        "import sys, torch, imaginebench.imagination.run\n"
        "collect = sys.modules['imaginebench.data.collect']\n"
        "assert collect.CollectConfig in torch.serialization.get_safe_globals()\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=300)


# -- documented arguments ----------------------------------------------------------------------
def documented_args(cls: type) -> dict[str, str]:
    """The ``Args:`` section of ``cls``'s docstring: argument name -> its description."""
    lines = inspect.cleandoc(cls.__doc__ or "").splitlines()
    if "Args:" not in lines:
        return {}
    entries: dict[str, str] = {}
    name = None
    for line in lines[lines.index("Args:") + 1 :]:
        if line and not line.startswith("    "):
            break
        entry = re.match(r"    (\*{0,2}\w+)(?: \([^)]*\))?:(.*)", line)
        if entry:
            name = entry.group(1)
            entries[name] = entry.group(2)
        elif name is not None:
            entries[name] += " " + line.strip()
    return entries


def _parameters(function: Any) -> dict[str, inspect.Parameter]:
    return {k: v for k, v in inspect.signature(function).parameters.items() if k != "self"}


def _algorithm_classes() -> list[type]:
    from imaginebench.modules.grounding import GroundingModule
    from imaginebench.modules.offline import ALGORITHMS, OfflineRLModule

    classes = {cls for pair in ALGORITHMS.values() for cls in pair if cls is not None}
    return sorted(classes | {OfflineRLModule, GroundingModule}, key=lambda cls: cls.__name__)


@pytest.mark.parametrize("cls", _algorithm_classes(), ids=lambda cls: cls.__name__)
def test_documented_args_match_the_signature(cls):
    """Every documented argument exists (forwarded ``**kwargs`` reach the base classes'
    ``__init__``), and every named ``__init__`` argument is documented."""
    own = _parameters(cls.__init__)
    variadic = {inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD}
    inherited = {
        name
        for base in cls.__mro__[1:]
        if "__init__" in base.__dict__ and base is not object
        for name in _parameters(base.__init__)
    }
    takes_kwargs = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in own.values())
    accepted = set(own) | (inherited if takes_kwargs else set())
    documented = documented_args(cls)
    assert documented, f"{cls.__name__} documents no Args"
    for name, text in documented.items():
        if name.startswith("*"):
            forwarded = set(re.findall(r"``(\w+)``", text))
            assert forwarded <= inherited, f"{cls.__name__} {name}: {forwarded - inherited}"
        else:
            assert name in accepted, f"{cls.__name__} documents {name!r}, not an argument"
    named = {name for name, p in own.items() if p.kind not in variadic}
    assert named <= set(documented), f"{cls.__name__}: undocumented {named - set(documented)}"
