"""Every nested settings argument takes its config class or a plain dict (what YAML gives), and
anything else fails at construction with a TypeError naming the argument."""

from __future__ import annotations

from typing import Any, Callable

import pytest

from imaginebench.data.collect import CollectConfig
from imaginebench.datamodules import GroundingDataModule, RealImaginaryDataModule
from imaginebench.experts.online_sac import make_agent, train_online_sac
from imaginebench.imagination.decoder import DecodingConfig, Imaginer
from imaginebench.imagination.filters import FilterConfig, select
from imaginebench.imagination.run import imagine_level
from imaginebench.modules.grounding import GroundingModule, LoraSettings, LossWeights

TINY_LLAMA = dict(
    model_type="llama",
    vocab_size=30522,
    hidden_size=32,
    intermediate_size=64,
    num_hidden_layers=1,
    num_attention_heads=2,
    num_key_value_heads=1,
    max_position_embeddings=128,
)
DISCRETE = {"type": "discrete", "n": 40}


def _grounding(**kwargs: Any) -> GroundingModule:
    from imaginebench.modules.backbone import resolve_encoder_path

    return GroundingModule(
        10,
        DISCRETE,
        lm_config=TINY_LLAMA,
        tokenizer=resolve_encoder_path("all-MiniLM-L6-v2"),
        **kwargs,
    )


@pytest.mark.parametrize("cls", [RealImaginaryDataModule, GroundingDataModule])
def test_data_modules_take_collect_as_a_dict(cls, tmp_path):
    dm = cls(collect={"episodes": 3, "seed": 1, "paraphrases": 2}, cache_dir=str(tmp_path))
    expected = CollectConfig(episodes=3, seed=1, paraphrases=2)
    assert dm.collect == expected and dm.hparams["collect"] == expected
    assert dm.resolved_real_path() == tmp_path / expected.filename("clevr")


def test_grounding_module_takes_lora_and_loss_weights_as_dicts():
    module = _grounding(lora={"rank": 2, "alpha": 4, "dropout": 0.0}, loss_weights={"token": 0.5})
    assert module.lora == LoraSettings(rank=2, alpha=4, dropout=0.0)
    assert module.loss_weights == LossWeights(token=0.5)
    assert module.hparams["lora"] == module.lora and module.hparams["loss_weights"].token == 0.5


def test_imaginer_takes_decoding_as_a_dict():
    module = _grounding(lora=None)
    imaginer = Imaginer(module, decoding={"strategy": "sample", "temperature": 0.5})
    assert imaginer.decoding == DecodingConfig(strategy="sample", temperature=0.5)


def test_filters_and_online_sac_take_dicts():
    assert select([], {"require_success": True}) == select([], FilterConfig())
    agent = make_agent(3, 2, {"hidden": (8,), "lr": 1e-3})
    assert agent.hidden == (8,)


# (call with the bad value, the argument's name in the message)
BAD: dict[str, tuple[Callable[[Any], Any], str]] = {
    "RealImaginaryDataModule.collect": (lambda v: RealImaginaryDataModule(collect=v), "collect"),
    "GroundingDataModule.collect": (lambda v: GroundingDataModule(collect=v), "collect"),
    "GroundingModule.lora": (lambda v: GroundingModule(10, DISCRETE, lora=v), "lora"),
    "GroundingModule.loss_weights": (
        lambda v: GroundingModule(10, DISCRETE, loss_weights=v),
        "loss_weights",
    ),
    "Imaginer.decoding": (lambda v: Imaginer(None, decoding=v), "decoding"),
    "imagine_level.decoding": (
        lambda v: imagine_level("easy", "none.ckpt", "out.h5", decoding=v),
        "decoding",
    ),
    "imagine_level.filters": (
        lambda v: imagine_level("easy", "none.ckpt", "out.h5", filters=v),
        "filters",
    ),
    "select.config": (lambda v: select([], v), "config"),
    "train_online_sac.config": (lambda v: train_online_sac(None, v), "config"),
}


@pytest.mark.parametrize("where", sorted(BAD))
@pytest.mark.parametrize(
    "value, message",
    [
        (5, "must be a .* or a dict of its fields, got int: 5"),
        ("episodes=3", "got str"),
        ({"episodez": 3}, r"unknown key\(s\) 'episodez' for \w+ \(known: "),
    ],
)
def test_anything_else_is_a_type_error_naming_the_argument(where, value, message):
    call, name = BAD[where]
    with pytest.raises(TypeError, match=rf"^{name}\W") as error:
        call(value)
    assert error.match(message)


@pytest.mark.parametrize(
    "value, message",
    [
        ({"episodes": "1000"}, r"collect\.episodes must be int, got str: '1000'"),
        ({"episodes": True}, r"collect\.episodes must be int, got bool"),
        ({"epsilon": "0.2"}, r"collect\.epsilon must be float, got str"),
    ],
)
def test_a_field_of_the_wrong_type_is_named(value, message):
    with pytest.raises(TypeError, match=message):
        RealImaginaryDataModule(collect=value)


def test_fields_keep_their_own_checks_and_numbers_convert_sensibly():
    import numpy as np

    with pytest.raises(ValueError, match="^decoding: temperature must be > 0"):
        Imaginer(None, decoding={"temperature": 0.0})
    dm = RealImaginaryDataModule(collect={"episodes": np.int64(4), "epsilon": 0})
    assert dm.collect.episodes == 4 and dm.collect.epsilon == 0


# -- training YAMLs with includes (load_config_file) --------------------------------------------
def _write(folder, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


INCLUDED = {
    "parts/base.yaml": "trainer:\n  accelerator: cpu\n  logger:\n    init_args:\n"
    "      save_dir: runs\nseed_everything: 0\n",
    "parts/domain.yaml": "config: base.yaml\ntrainer.callbacks: [a, b]\nseed_everything: 1\n",
}


def test_includes_nest_and_dotted_keys_set_one_value(tmp_path):
    from imaginebench.config import load_config_file

    _write(tmp_path, INCLUDED)
    _write(
        tmp_path,
        {
            "run.yaml": "config: parts/domain.yaml\ntrainer.max_steps: 6\n"
            "trainer.logger.init_args.name: run\nmodel: {lr: 1}\n"
        },
    )
    assert load_config_file(tmp_path / "run.yaml") == {
        "trainer": {
            "accelerator": "cpu",
            "logger": {"init_args": {"save_dir": "runs", "name": "run"}},
            "callbacks": ["a", "b"],
            "max_steps": 6,
        },
        "seed_everything": 1,  # the includer's plain key replaces the include's
        "model": {"lr": 1},
    }


def test_a_plain_key_replaces_the_included_mapping_whole(tmp_path):
    from imaginebench.config import load_config_file

    _write(tmp_path, INCLUDED)
    _write(tmp_path, {"run.yaml": "config: parts/domain.yaml\ntrainer:\n  max_steps: 6\n"})
    assert load_config_file(tmp_path / "run.yaml")["trainer"] == {"max_steps": 6}


@pytest.mark.parametrize(
    "text, message",
    [
        ("config: [parts/base.yaml, parts/domain.yaml]\n", "include one file"),
        ("model: {}\nconfig: parts/base.yaml\n", "must be the file's first key"),
        ("config: parts/base.yaml\nseed_everything.value: 1\n", "seed_everything is not a map"),
        ("config: run.yaml\n", "includes itself"),
        ("- a list\n", "must be a mapping, got list"),
    ],
)
def test_what_jsonargparse_would_ignore_or_misread_is_an_error(tmp_path, text, message):
    from imaginebench.config import ConfigError, load_config_file

    _write(tmp_path, INCLUDED)
    _write(tmp_path, {"run.yaml": text})
    with pytest.raises(ConfigError, match=message):
        load_config_file(tmp_path / "run.yaml")
    with pytest.raises(FileNotFoundError):
        load_config_file(tmp_path / "absent.yaml")
