"""LightningCLI entry point: ``imaginebench fit|validate|test -c configs/<algo>_<env>.yaml``.

Configs name the model and data module by ``class_path``: an offline RL algorithm with
:class:`~imaginebench.datamodules.RealImaginaryDataModule`, or the LLM grounding fine-tune
(:class:`~imaginebench.modules.grounding.GroundingModule`) with
:class:`~imaginebench.datamodules.GroundingDataModule`.
"""

from __future__ import annotations

import re
import sys
import warnings
from typing import Any

import lightning as L
from lightning.pytorch.callbacks import ModelCheckpoint
from lightning.pytorch.cli import LightningCLI

from imaginebench.callbacks.progress import update_progress_bar
from imaginebench.callbacks.resume import ResumeCheck


class ImagineBenchCLI(LightningCLI):
    """The data module's state size and action space are passed to the model, so configs name
    only the algorithm's own hyperparameters."""

    def add_arguments_to_parser(self, parser) -> None:  # type: ignore[no-untyped-def]
        parser.link_arguments("data.state_dim", "model.init_args.state_dim", apply_on="instantiate")
        parser.link_arguments(
            "data.action_spec", "model.init_args.action_spec", apply_on="instantiate"
        )
        parser.add_argument(
            "--allow_resume_mismatch",
            type=bool,
            default=False,
            help="resume from --ckpt_path even if its model or data settings (seed, files, "
            "ratio, ...) differ from this run's (refused by default)",
        )

    def instantiate_trainer(self, **kwargs: Any) -> L.Trainer:
        """The trainer, with Lightning's default progress bar swapped for one that counts
        gradient updates (a bar named in the config is kept as it is), a :class:`ResumeCheck`,
        and ``{seed}`` in every ``ModelCheckpoint``'s ``dirpath`` replaced by the run's seed."""
        named = list(self._get(self.config_init, "trainer", default={}).get("callbacks") or [])
        trainer = super().instantiate_trainer(**kwargs)  # may append its default bar to that list
        bar = trainer.progress_bar_callback
        if bar is not None and not any(c is bar for c in named):  # Lightning added it
            trainer.callbacks[trainer.callbacks.index(bar)] = update_progress_bar()
        allow = bool(self._get(self.config, "allow_resume_mismatch", default=False))
        given = self._get(self.config, "seed_everything", default=None)
        trainer.callbacks.append(ResumeCheck(allow_mismatch=allow, seed=_run_seed(given)))
        for callback in trainer.callbacks:
            if isinstance(callback, ModelCheckpoint) and callback.dirpath is not None:
                callback.dirpath = _fill_dirpath(str(callback.dirpath), given)
        return trainer

    def before_fit(self) -> None:
        """Refuse a fit that would train nothing (and still score and save an untrained model)."""
        for name in ("max_steps", "max_epochs"):
            if getattr(self.trainer, name) == 0:
                raise ValueError(
                    f"--trainer.{name} 0: fit would train nothing; give a positive number"
                )


def _run_seed(seed_everything: Any) -> int | None:
    """The run's seed: ``seed_everything`` as LightningCLI leaves it (``true`` already replaced
    by the seed it drew), ``None`` if no seed was set (``false``, ``null``)."""
    valid = isinstance(seed_everything, int) and not isinstance(seed_everything, bool)
    return seed_everything if valid else None


def _fill_dirpath(dirpath: str, seed_everything: Any) -> str:
    """``dirpath`` with ``{seed}`` replaced by the run's seed, so that runs of one config with
    different seeds never share a checkpoint folder and ``--ckpt_path last`` finds the run's
    own."""
    seed = _run_seed(seed_everything)

    def fill(match: re.Match[str]) -> str:
        if match.group(1) != "seed":
            raise ValueError(
                f"ModelCheckpoint dirpath {dirpath}: unknown placeholder {match.group(0)} "
                "(known: {seed})"
            )
        if seed is None:
            raise ValueError(
                f"ModelCheckpoint dirpath {dirpath}: {{seed}} needs an explicit "
                f"seed_everything (an integer), got {seed_everything!r}"
            )
        return str(seed)

    return re.sub(r"\{([^{}]*)\}", fill, dirpath)


def quiet_known_warnings() -> None:
    """Silence Lightning notices that do not apply to offline RL with manual optimisation."""
    for message in (
        "Using ModelCheckpoint with manual optimization",
        r"`isinstance\(treespec, LeafSpec\)` is deprecated",
        "The '.*_dataloader' does not have many workers",
        "Failed to load CPU gemm_4bit_forward",  # bitsandbytes without the optional kernels
    ):
        warnings.filterwarnings("ignore", message=message)


def end_process_group() -> None:
    """Destroy a DDP run's process group before the interpreter exits. Left to interpreter
    shutdown, gloo's threads can abort the process ("terminate called without an active
    exception"): a rank that is done while rank 0 still scores the policy after fit then dies of
    SIGABRT, and Lightning kills every process, rank 0 and its results.json included."""
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()


def run(args: list[str] | None = None) -> ImagineBenchCLI:
    """Run a LightningCLI command (``fit``, ``validate``, ``test``, ``predict``)."""
    quiet_known_warnings()
    try:
        return ImagineBenchCLI(
            L.LightningModule,
            L.LightningDataModule,
            subclass_mode_model=True,
            subclass_mode_data=True,
            save_config_kwargs={"overwrite": True},
            args=None if args == sys.argv[1:] else args,  # None: LightningCLI reads sys.argv
        )
    finally:
        end_process_group()


class _ParseOnlyCLI(ImagineBenchCLI):
    """Parses a config as ``fit`` would and instantiates nothing."""

    def instantiate_classes(self) -> None:
        pass


def resolve_config(args: list[str]) -> dict[str, Any]:
    """The config a ``fit`` with ``args`` (``-c FILE``, overrides; no subcommand) would run,
    every default filled in, as ``config.yaml`` in its log folder records it; nothing is
    instantiated (no data read, no model built). Invalid arguments raise ``ValueError``."""
    import logging

    import yaml

    seed_log = logging.getLogger("lightning.fabric.utilities.seed")  # "Seed set to ..."
    level = seed_log.level
    seed_log.setLevel(logging.WARNING)
    quiet_known_warnings()
    try:
        with warnings.catch_warnings():
            # the args are given on purpose, whatever this process's own command line is
            warnings.filterwarnings("ignore", message="LightningCLI's args parameter")
            cli = _ParseOnlyCLI(
                L.LightningModule,
                L.LightningDataModule,
                subclass_mode_model=True,
                subclass_mode_data=True,
                run=False,
                args=args,
                parser_kwargs={"exit_on_error": False},
            )
    except Exception as err:  # jsonargparse reports bad arguments as ArgumentError
        raise ValueError(f"invalid fit arguments {' '.join(args)}: {err}") from err
    finally:
        seed_log.setLevel(level)
    return yaml.safe_load(cli.parser.dump(cli.config, skip_link_targets=False))


def main() -> None:
    """The ``lightning`` console script (lightning 2.6 ships none)."""
    run(sys.argv[1:])
