"""Tests for the instruction-conditioned backbone: offline sentence encoder, instruction bank and
the policy / value heads."""

from __future__ import annotations

import pytest
import torch
from torch.distributions import Normal, TransformedDistribution
from torch.distributions.transforms import TanhTransform

from imaginebench.modules import backbone
from imaginebench.modules.backbone import (
    DEFAULT_ENCODER,
    ContinuousQHead,
    DeterministicHead,
    DiscreteHead,
    GaussianHead,
    InstructionBank,
    InstructionEncoder,
    StateInstructionEncoder,
)

CLOSE_A = "push the red ball to the left of the blue ball"
CLOSE_B = "move the red sphere left of the blue sphere"
UNRELATED = "open the drawer"
SENTENCES = [CLOSE_A, CLOSE_B, UNRELATED]


pytestmark = pytest.mark.usefixtures("one_thread_per_module")


@pytest.fixture(scope="module")
def encoder(one_thread_per_module):
    """The default all-MiniLM-L6-v2 encoder, loaded once with the hub switched off."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HF_HUB_OFFLINE", "1")
        mp.delenv("IMAGINEBENCH_ALLOW_DOWNLOAD", raising=False)
        return InstructionEncoder()


@pytest.fixture
def bank(encoder, monkeypatch):
    """An InstructionBank whose shared encoder is the module's already loaded one."""

    def shared(name, pooling, normalize):
        assert (name, pooling, normalize) == (DEFAULT_ENCODER, "mean", True)
        return encoder

    monkeypatch.setattr(backbone, "shared_encoder", shared)
    return InstructionBank()


# ------------------------------------------------------------------------------------ encoder


def test_default_encoder_is_offline_normalised_minilm(encoder):
    assert encoder.dim == 384 and encoder.pooling == "mean"
    assert not any(p.requires_grad for p in encoder.parameters())
    emb = encoder.encode(SENTENCES)
    assert emb.shape == (3, 384) and emb.dtype == torch.float32
    assert torch.allclose(emb.norm(dim=-1), torch.ones(3), atol=1e-5)
    assert torch.isfinite(emb).all()
    assert encoder.encode([]).shape == (0, 384)
    encoder.train()
    assert not encoder.training  # stays frozen in eval mode


def test_similar_instructions_are_closer_than_unrelated(encoder):
    a, b, c = encoder.encode(SENTENCES)
    close, far_a, far_b = a @ b, a @ c, b @ c
    assert close > far_a and close > far_b, (close, far_a, far_b)


def test_encoding_is_deterministic_and_batch_independent(encoder):
    together = encoder.encode(SENTENCES)
    alone = torch.cat([encoder.encode([s]) for s in SENTENCES])
    assert torch.allclose(together, alone, atol=1e-5)
    encoder.batch_size, saved = 2, encoder.batch_size
    try:
        chunked = encoder.encode(SENTENCES)
    finally:
        encoder.batch_size = saved
    assert torch.allclose(together, chunked, atol=1e-5)


def test_cls_and_pooler_pooling(encoder, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    mean = encoder.encode(SENTENCES)
    cls = InstructionEncoder(pooling="cls").encode(SENTENCES)
    pooler = InstructionEncoder(pooling="pooler").encode(SENTENCES)
    for emb in (cls, pooler):
        assert emb.shape == (3, 384) and emb.dtype == torch.float32
        assert torch.allclose(emb.norm(dim=-1), torch.ones(3), atol=1e-5)
    assert not torch.allclose(cls, pooler, atol=1e-3)
    assert not torch.allclose(cls, mean, atol=1e-3)
    assert not torch.allclose(pooler, mean, atol=1e-3)
    raw = InstructionEncoder(pooling="cls", normalize=False).encode(SENTENCES)
    assert not torch.allclose(raw.norm(dim=-1), torch.ones(3), atol=1e-2)
    assert torch.allclose(torch.nn.functional.normalize(raw, dim=-1), cls, atol=1e-5)


def test_bad_pooling_raises():
    with pytest.raises(ValueError, match="pooling"):
        InstructionEncoder(pooling="max")


def test_missing_encoder_path_raises(tmp_path, monkeypatch):
    monkeypatch.delenv("IMAGINEBENCH_ALLOW_DOWNLOAD", raising=False)
    missing = tmp_path / "no_such_encoder"
    with pytest.raises(FileNotFoundError, match="no_such_encoder") as info:
        InstructionEncoder(str(missing))
    assert "offline" in str(info.value) and "IMAGINEBENCH_ALLOW_DOWNLOAD" in str(info.value)


# ------------------------------------------------------------------------------------ bank


def test_bank_encodes_each_unique_sentence_once(bank, encoder, monkeypatch):
    calls: list[list[str]] = []
    original = InstructionEncoder.encode

    def counting(self, sentences):
        calls.append(list(sentences))
        return original(self, sentences)

    monkeypatch.setattr(InstructionEncoder, "encode", counting)
    ids = bank.add([CLOSE_A, CLOSE_B, CLOSE_A, UNRELATED, CLOSE_B])
    assert ids.dtype == torch.long and ids.tolist() == [0, 1, 0, 2, 1]
    assert calls == [[CLOSE_A, CLOSE_B, UNRELATED]]
    assert bank.table.shape == (3, 384) and bank.dim == 384

    again = bank.add([UNRELATED, CLOSE_A])
    assert again.tolist() == [2, 0] and len(calls) == 1  # nothing new: no encoding

    new = "stack the green ball behind the cyan ball"
    more = bank.add([CLOSE_B, new, new])
    assert more.tolist() == [1, 3, 3] and calls[1:] == [[new]]
    assert bank.table.shape == (4, 384)
    monkeypatch.undo()

    direct = encoder.encode([CLOSE_A, CLOSE_B, UNRELATED, new])
    ids = torch.tensor([0, 1, 2, 3])
    assert torch.allclose(bank(ids), direct, atol=1e-5)
    assert torch.allclose(bank(torch.tensor([[3, 0]])), direct[[3, 0]].unsqueeze(0), atol=1e-5)


def test_bank_table_is_neither_checkpointed_nor_a_buffer(bank):
    """Not in checkpoints, and not a buffer: DDP broadcasts buffers from rank 0, whose bank may
    hold extra (evaluation) sentences."""
    bank.add([CLOSE_A, UNRELATED])
    assert "table" not in bank.state_dict()
    assert all(name != "table" for name, _ in bank.named_buffers())
    assert bank.add([]).shape == (0,)


# ------------------------------------------------------------------------------------ heads


STATE_DIM, EMB_DIM, BATCH = 10, 384, 7


def features(hidden=(32, 16), extra_dim=0) -> StateInstructionEncoder:
    return StateInstructionEncoder(
        STATE_DIM, EMB_DIM, hidden=hidden, instruction_dim=8, extra_dim=extra_dim
    )


def inputs(seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    state = torch.rand(BATCH, STATE_DIM, generator=g)
    instruction = torch.nn.functional.normalize(torch.randn(BATCH, EMB_DIM, generator=g), dim=-1)
    return state, instruction


def test_state_instruction_encoder_shapes():
    torch.manual_seed(0)
    state, instruction = inputs()
    enc = features(hidden=(32, 16))
    assert enc.feature_dim == 16
    h = enc(state, instruction)
    assert h.shape == (BATCH, 16) and (h >= 0).all()  # ReLU after the last layer
    enc_extra = features(extra_dim=3)
    assert enc_extra(state, instruction, torch.zeros(BATCH, 3)).shape == (BATCH, 16)
    h.sum().backward()
    assert enc.instruction_proj.weight.grad is not None


def test_one_instruction_serves_k_samples_like_repeated_rows():
    torch.manual_seed(0)
    state, instruction = inputs()
    enc, k = features(extra_dim=3), 5
    samples = torch.randn(BATCH, k, state.shape[-1])
    extra = torch.randn(BATCH, k, 3)
    grouped = enc(samples, instruction, extra)
    repeated = enc(
        samples.flatten(0, 1), instruction.repeat_interleave(k, 0), extra.flatten(0, 1)
    ).view(BATCH, k, -1)
    assert grouped.shape == (BATCH, k, enc.feature_dim)
    torch.testing.assert_close(grouped, repeated)


def test_discrete_q_and_deterministic_heads():
    torch.manual_seed(0)
    state, instruction = inputs()
    assert DiscreteHead(features(), 40)(state, instruction).shape == (BATCH, 40)
    q = ContinuousQHead(features(extra_dim=4))
    assert q(state, instruction, torch.zeros(BATCH, 4)).shape == (BATCH,)
    pi = DeterministicHead(features(), 4)
    action = pi(state, instruction)
    assert action.shape == (BATCH, 4) and (action.abs() < 1).all()


def test_gaussian_head_log_prob_matches_tanh_normal():
    torch.manual_seed(0)
    head = GaussianHead(features(), 3)
    state, instruction = inputs(1)
    for saturated in (False, True):
        if saturated:  # push the means far out so that tanh saturates
            with torch.no_grad():
                head.mean.bias.copy_(torch.tensor([9.0, -6.0, 0.0]))
        torch.manual_seed(123)
        action, log_prob = head.sample(state, instruction)
        assert action.shape == (BATCH, 3) and log_prob.shape == (BATCH,)
        assert torch.isfinite(log_prob).all()
        # the same pre-tanh sample, reconstructed from the same random numbers
        torch.manual_seed(123)
        mean, std = head.distribution(state, instruction)
        pre = mean + std * torch.randn_like(mean)
        assert torch.allclose(action, torch.tanh(pre))
        tanh = TanhTransform(cache_size=1)
        squashed = tanh(pre)  # cached: log_prob inverts to exactly `pre`
        reference = TransformedDistribution(Normal(mean, std), [tanh]).log_prob(squashed).sum(-1)
        assert torch.allclose(log_prob, reference, atol=1e-4, rtol=1e-5), (log_prob, reference)
        if not saturated:
            assert (action.abs() < 1).all()
            assert torch.equal(head(state, instruction), torch.tanh(mean))
        else:
            assert pre.abs().max() > 5  # the saturated regime was exercised
            assert (action.abs() <= 1).all()
    assert (
        (std >= torch.tensor(GaussianHead.LOG_STD_MIN).exp() - 1e-7)
        & (std <= torch.tensor(GaussianHead.LOG_STD_MAX).exp() + 1e-6)
    ).all()


def test_gaussian_head_sample_is_differentiable():
    torch.manual_seed(0)
    head = GaussianHead(features(), 2)
    action, log_prob = head.sample(*inputs())
    (action.sum() + log_prob.sum()).backward()
    assert head.mean.weight.grad is not None and head.log_std.weight.grad is not None
