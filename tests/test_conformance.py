"""One conformance suite for every offline RL algorithm (and the documented example).

Each algorithm, on small synthetic language-conditioned tasks (``tests/helpers.py``):

* fits a few steps through Lightning; a checkpoint rebuilds a module that acts identically;
* ``act`` returns the right shapes, dtypes and ranges;
* its loss terms train only the networks they declare (``loss_parts``), every trainable
  parameter belongs to one of them and is in the optimizer, and target networks never get
  gradients but do follow their online networks;
* with fixed critics, has the exact TD target ``r + gamma (1 - done) V'``: discounts once with
  ``gamma``, never bootstraps terminal transitions, ignores ``gamma`` only with
  ``undiscounted_td_bug=True``;
* resumed from a mid-run checkpoint, ends bit-identical to an uninterrupted run;
* learns the optimum of a two-instruction task ("go left" vs "go right") from data whose most
  common action is wrong, where imitation (BC) fails.
"""

from __future__ import annotations

import math
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import lightning as L
import numpy as np
import pytest
import torch
import torch.nn.functional as F
from helpers import LEFT, RIGHT, LineTask, TaskDataModule, random_batch, trainer

from imaginebench.data.format import RolloutDataset
from imaginebench.modules.offline import (
    BC,
    BCQ,
    COMBO,
    CQL,
    IQL,
    PRDC,
    SAC,
    TD3BC,
    DiscreteBC,
    DiscreteBCQ,
    DiscreteCQL,
    DiscreteIQL,
    DiscreteSAC,
    OfflineRLModule,
)

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
from my_algorithm import DiscreteAWAC

SMALL = {"hidden": (64, 64), "instruction_dim": 32}
SMALL_COMBO = {
    "ensemble_size": 3,
    "num_elites": 2,
    "model_max_steps": 300,
    "model_eval_every": 50,
    "model_batch_size": 128,
    "rollout_length": 3,
    "rollout_batch_size": 200,
    "rollout_every": 4,
    "model_buffer_size": 3000,
}


@dataclass(frozen=True)
class Case:
    """An algorithm under test: test-sized settings, and overrides for the learning test."""

    cls: type[OfflineRLModule]
    kwargs: dict[str, Any] = field(default_factory=dict)
    learn_kwargs: dict[str, Any] = field(default_factory=dict)
    learn_steps: int = 400

    @property
    def discrete(self) -> bool:
        return bool(self.cls.discrete)


# SAC's entropy bonus: with the default initial temperature 1 and gamma 0.99, the soft value of
# never finishing (about alpha * entropy / (1 - gamma)) dwarfs the goal's reward of 1, so the
# soft-optimal policy avoids the goal until the temperature has been tuned down, which takes far
# longer than this test's budget. The SAC-based algorithms therefore start at alpha = 0.001 here.
COOL = {"initial_temperature": 1e-3}
# In the learning test's data the lure (stay) is taken 1.5 times as often as the right move,
# whose advantage is ~0.5. DiscreteCQL's regulariser at alpha 1 outweighs that (it stays), and
# AWAC's advantage weights exp(A / lambda) at lambda 1 need twice the budget to outweigh it.
CASES = {
    c.cls.__name__: c
    for c in [
        Case(DiscreteBC),
        Case(
            DiscreteCQL,
            {"target_update_interval": 3},
            {"target_update_interval": 50, "alpha": 0.3},
        ),
        Case(DiscreteBCQ),
        Case(DiscreteSAC, learn_kwargs=COOL),
        Case(DiscreteIQL),
        Case(DiscreteAWAC, learn_kwargs={"lmbda": 0.3}),
        Case(BC),
        Case(CQL, learn_kwargs=COOL),
        Case(BCQ, learn_steps=800),  # the VAE must first learn both modes of the data
        Case(TD3BC),
        Case(SAC, learn_kwargs=COOL),
        Case(IQL),
        Case(PRDC),
        Case(COMBO, SMALL_COMBO, {**COOL, "rollout_every": 100}),
    ]
}
NAMES = list(CASES)
FIT_STEPS = 6  # even: TD3-style algorithms made an actor update on the last step


pytestmark = pytest.mark.usefixtures("one_thread_per_module")  # small networks, 2 cores


@pytest.fixture(scope="module")
def tasks() -> dict[bool, tuple[LineTask, TaskDataModule]]:
    """Per action type: the task, and real data (two wordings per direction) plus imaginary
    data (two other wordings)."""
    out = {}
    for discrete, expert in ((True, 0.6), (False, 0.75)):
        task = LineTask(discrete=discrete)
        real = task.dataset(LEFT[:2] + RIGHT[:2], 200, seed=0, expert=expert)
        imaginary = task.dataset(
            LEFT[2:] + RIGHT[2:], 200, seed=1, expert=expert, source="imaginary"
        )
        out[discrete] = (task, real, imaginary)
    return out


def datamodule(tasks, discrete: bool, seed: int = 0, batch_size: int = 64) -> TaskDataModule:
    _, real, imaginary = tasks[discrete]
    return TaskDataModule(real, imaginary, ratio=0.5, batch_size=batch_size, seed=seed)


def build(case: Case, dm: TaskDataModule, **overrides: Any) -> OfflineRLModule:
    kwargs = {**SMALL, **case.kwargs, **overrides}
    return case.cls(state_dim=dm.state_dim, action_spec=dm.action_spec, **kwargs)


_fitted: dict[str, tuple[OfflineRLModule, TaskDataModule, dict[str, torch.Tensor]]] = {}


def fitted(case: Case, tasks) -> tuple[OfflineRLModule, TaskDataModule, dict[str, torch.Tensor]]:
    """The case's module after ``FIT_STEPS`` updates (cached), its data module and its initial
    state dict."""
    name = case.cls.__name__
    if name not in _fitted:
        L.seed_everything(0)
        dm = datamodule(tasks, case.discrete)
        module = build(case, dm)
        initial = {k: v.clone() for k, v in module.state_dict().items()}
        run = trainer(FIT_STEPS)
        run.fit(module, dm)
        assert run.global_step == FIT_STEPS
        _fitted[name] = (module, dm, initial)
    return _fitted[name]


# ----------------------------------------------------------------------------- fit and restore


@pytest.mark.parametrize("name", NAMES)
def test_fit_checkpoint_round_trip_and_act(name, tasks, tmp_path):
    case = CASES[name]
    module, dm, _ = fitted(case, tasks)
    assert all(
        torch.isfinite(v).all() for v in module.state_dict().values() if v.is_floating_point()
    )
    path = tmp_path / "module.ckpt"
    module.trainer.save_checkpoint(path)
    restored = case.cls.load_from_checkpoint(path)

    rng = np.random.default_rng(0)
    states = rng.normal(size=(7, dm.state_dim)).astype(np.float32)
    words = [LEFT[0], RIGHT[3], "please go to the left", RIGHT[0], LEFT[2], LEFT[1], RIGHT[1]]
    actions = module.act(states, words)
    np.testing.assert_array_equal(module.act(states, words), actions)  # deterministic
    # The restored module rebuilds its instruction bank, so the unseen sentence is encoded in a
    # different batch (other padding) than in ``module``; the sentence encoder's float32 output
    # then differs in the last bits, which moved continuous actions by 2-4e-7 on one machine.
    # Equal up to float32 rounding, far below any difference a lost weight would make:
    if case.discrete:
        np.testing.assert_array_equal(restored.act(states, words), actions)
    else:
        np.testing.assert_allclose(restored.act(states, words), actions, rtol=0, atol=1e-5)
    single = module.act(states[0], LEFT[0])
    if case.discrete:
        assert actions.shape == (7,) and actions.dtype == np.int64
        assert ((actions >= 0) & (actions < dm.action_spec["n"])).all()
        assert single.shape == () and single == actions[0]
    else:
        assert actions.shape == (7, 2) and actions.dtype == np.float32
        assert ((actions >= -2.0) & (actions <= 2.0)).all()
        assert single.shape == (2,)
        np.testing.assert_allclose(single, actions[0], rtol=1e-5, atol=1e-6)


# -------------------------------------------------------------------------- gradient isolation


def owner(name: str) -> str:
    return name.split(".", 1)[0]


@pytest.mark.parametrize("name", NAMES)
def test_loss_parts_train_only_their_networks(name, tasks):
    case = CASES[name]
    module, dm, initial = fitted(case, tasks)
    parts = type(module).loss_parts
    assert parts, "declare loss_parts: which loss term trains which submodule"
    trainable = {n: p for n, p in module.named_parameters() if p.requires_grad}
    owned = {n for n in trainable if any(owner(n) == o for ows in parts.values() for o in ows)}
    assert owned == set(trainable), f"parameters no loss term trains: {set(trainable) - owned}"
    in_optimizer = {id(p) for g in module.trainer.optimizers[0].param_groups for p in g["params"]}
    assert {id(p) for p in trainable.values()} == in_optimizer

    module.log_now = True
    terms = module.losses(module.prepare(dm.batches(0).batch(0)))
    assert set(parts) <= set(terms)
    torch.testing.assert_close(terms["loss"], sum(terms[k] for k in parts), rtol=1e-5, atol=1e-5)
    names, params = zip(*trainable.items(), strict=True)
    for part, owners in parts.items():
        grads = torch.autograd.grad(terms[part], params, retain_graph=True, allow_unused=True)
        for n, g in zip(names, grads, strict=True):
            if owner(n) in owners:
                assert g is not None, f"{part} does not reach {n}"
            else:
                assert g is None or not g.any(), f"{part} moves {n}, which it must not"
        for o in owners:
            assert any(
                g is not None and g.any()
                for n, g in zip(names, grads, strict=True)
                if owner(n) == o
            ), f"{part} gives no gradient to {o}"

    # Target networks: never trained, but they follow the online networks.
    targets = {n: p for n, p in module.named_parameters() if "target" in owner(n)}
    if "gamma" in module.hparams:
        assert targets, "a value-based algorithm without target networks"
    for n, p in targets.items():
        assert not p.requires_grad and p.grad is None, n
    assert any(not torch.equal(p, initial[n]) for n, p in targets.items()) or not targets


# ------------------------------------------------------------------------------- discounting


Q_ACTIONS = torch.tensor([1.0, 2.0, 3.0, 4.0])  # a fixed discrete critic: Q(s, a) = a + 1
Q_ONLINE, Q_TARGET, V = 0.25, 2.0, 1.5  # fixed continuous critics and value network


def constant(net: torch.nn.Module, value) -> None:
    """Make ``net`` (a head with an ``out`` layer) output ``value`` for every input."""
    for p in net.parameters():
        p.zero_()
    net.out.bias.copy_(torch.as_tensor(value).expand_as(net.out.bias))


def fixed_critic(case: Case, gamma: float, bug: bool):
    """A module whose critics (and value network) are constants, a batch, the loss term that
    holds its TD error, and that error as a function of the targets the constants imply:
    ``(module, batch, term, loss(target), bootstrap)``."""
    spec = (
        {"type": "discrete", "n": 4}
        if case.discrete
        else {"type": "continuous", "shape": [2], "low": -1.0, "high": 1.0}
    )
    # Continuous soft backups subtract alpha * log pi(a'|s') of a sampled a': a vanishing
    # temperature leaves the critics' value alone (the discrete ones compute it exactly).
    soft = {"initial_temperature": 1e-30} if issubclass(case.cls, SAC) else {}
    torch.manual_seed(0)
    m = case.cls(
        state_dim=3,
        action_spec=spec,
        gamma=gamma,
        undiscounted_td_bug=bug,
        **SMALL,
        **{**case.kwargs, **soft},
    )
    batch = random_batch(n=16, discrete=case.discrete)
    if isinstance(m, PRDC):
        m.build_index(batch["state"], batch["action"], torch.zeros(16, dtype=torch.long))
        batch["instruction_id"] = torch.zeros(16, dtype=torch.long)
    with torch.no_grad():
        for name, net in m.named_children():
            nets = list(net) if isinstance(net, torch.nn.ModuleList) else [net]
            if name in ("actor", "imitation") and case.discrete:
                constant(net, 0.0)  # uniform policy; BCQ: every action allowed
            elif name == "value":
                constant(net, V)
            elif name in ("q", "critics"):
                for n in nets:
                    constant(n, Q_ACTIONS if case.discrete else Q_ONLINE)
            elif name in ("q_target", "critics_target"):
                for n in nets:
                    constant(n, Q_ACTIONS + 1 if case.discrete else Q_TARGET)
    if case.discrete:
        q_data = Q_ACTIONS[batch["action"]]
        bootstrap = {
            "DiscreteCQL": 5.0,  # the target net at the online argmax (double DQN)
            "DiscreteBCQ": 5.0,
            "DiscreteSAC": 3.5 + math.log(4),  # E_uniform[Q'] + alpha * entropy, alpha = 1
            "DiscreteIQL": V,
            "DiscreteAWAC": 3.5,  # E_uniform[Q']
        }[case.cls.__name__]
    else:
        q_data = torch.full((16,), Q_ONLINE)
        bootstrap = V if isinstance(m, IQL) else Q_TARGET
    twin = 1 if isinstance(m, DiscreteCQL | DiscreteBCQ | DiscreteAWAC) else 2
    huber = isinstance(m, DiscreteCQL | DiscreteBCQ)
    term = {DiscreteCQL: "td", DiscreteBCQ: "td_loss", CQL: "td", COMBO: "td"}.get(
        case.cls, "critic_loss"
    )

    def loss(target: torch.Tensor) -> torch.Tensor:
        fn = F.smooth_l1_loss if huber else F.mse_loss
        return twin * fn(q_data, target)

    return m, batch, term, loss, bootstrap


@pytest.mark.parametrize("bug", [False, True])
@pytest.mark.parametrize("name", [n for n in NAMES if CASES[n].cls not in (BC, DiscreteBC)])
def test_td_targets_of_a_fixed_critic(name, bug):
    """With constant critics the TD target is ``r + gamma (1 - done) V'`` exactly: gamma once,
    no bootstrap from terminal transitions, gamma = 1 only with ``undiscounted_td_bug``."""
    m, batch, term, loss, bootstrap = fixed_critic(CASES[name], gamma=0.7, bug=bug)
    not_done = (~batch["done"]).float()
    target = batch["reward"] + (1.0 if bug else 0.7) * not_done * bootstrap
    with torch.no_grad():
        torch.testing.assert_close(m.losses(batch)[term], loss(target))


# ------------------------------------------------------------------------- transition weights


WEIGHTED = [n for n in NAMES if CASES[n].cls.weighted_losses]


def update(module: OfflineRLModule, batch) -> tuple[dict[str, torch.Tensor], list[torch.Tensor]]:
    """The loss terms (``"loss"`` and its parts; diagnostics such as ``q_data`` are plain batch
    means) and the gradient of ``"loss"`` of one update on ``batch``, drawing the same
    training noise every call."""
    generator = getattr(module, "generator", None)
    draws = generator.get_state() if generator is not None else None
    module.log_now = False
    terms = module.losses(module.prepare(batch))
    if generator is not None:
        generator.set_state(draws)
    params = [p for p in module.parameters() if p.requires_grad]
    grads = torch.autograd.grad(terms["loss"], params, allow_unused=True)
    zeros = [torch.zeros_like(p) if g is None else g for p, g in zip(params, grads)]
    parts = ("loss", *type(module).loss_parts)
    return {k: terms[k].detach() for k in parts}, zeros


def weighted(batch, weight: torch.Tensor):
    out = batch.clone()
    out["weight"] = weight
    return out


def assert_same_update(a, b, exact: bool = True) -> None:
    (terms_a, grads_a), (terms_b, grads_b) = a, b
    assert terms_a.keys() == terms_b.keys()
    check = torch.equal if exact else lambda x, y: torch.allclose(x, y, rtol=1e-5, atol=1e-7)
    for key in terms_a:
        assert check(terms_a[key], terms_b[key]), key
    assert all(check(x, y) for x, y in zip(grads_a, grads_b, strict=True)), "gradients differ"


@pytest.mark.parametrize("name", WEIGHTED)
def test_zero_weight_transitions_have_no_effect_on_the_update(name, tasks):
    """Transitions of weight 0 appended to a batch: the update is exactly the same whatever
    they hold (every per-sample term and batch statistic is weighted), the same as without
    them (training noise aside: stochastic algorithms draw noise per row, so there the batch
    with other zero-weight rows stands in for the batch without them), and scaling every
    weight by 2 changes nothing (losses are weighted means, not weighted sums)."""
    module, dm, _ = fitted(CASES[name], tasks)
    stream = dm.batches(0)
    batch = stream.batch(0)
    weight = torch.linspace(0.25, 1.75, len(batch))
    kept = weighted(batch, weight)
    padding = torch.zeros(16)
    first = torch.cat([kept, weighted(stream.batch(1)[:16], padding)])
    other = torch.cat([kept, weighted(stream.batch(2)[:16], padding)])
    assert_same_update(update(module, first), update(module, other))
    if getattr(module, "generator", None) is None:
        assert_same_update(update(module, first), update(module, kept), exact=False)
    assert_same_update(update(module, kept), update(module, weighted(batch, 2 * weight)))
    # the weights are used: another weighting is another update
    flipped = update(module, weighted(batch, weight.flip(0)))
    assert not torch.equal(update(module, kept)[0]["loss"], flipped[0]["loss"])


@pytest.mark.parametrize("name", WEIGHTED)
def test_uniform_weights_give_the_unweighted_losses_exactly(name, tasks):
    module, dm, _ = fitted(CASES[name], tasks)
    batch = dm.batches(0).batch(3)
    assert torch.equal(batch["weight"], torch.ones(len(batch)))  # the data module's default
    plain = batch.clone()
    del plain["weight"]
    assert_same_update(update(module, batch), update(module, plain))
    assert_same_update(
        update(module, batch), update(module, weighted(batch, torch.full((64,), 0.3)))
    )


def test_algorithms_that_do_not_weight_refuse_differing_weights(tasks):
    unweighted = [n for n in NAMES if not CASES[n].cls.weighted_losses]
    assert unweighted == ["COMBO"]
    module, dm, _ = fitted(CASES["COMBO"], tasks)
    batch = dm.batches(0).batch(0)
    module.prepare(batch)  # uniform weights: fine
    with pytest.raises(ValueError, match="does not weight its losses"):
        module.prepare(weighted(batch, torch.linspace(0, 1, len(batch))))


# ---------------------------------------------------------------------------------- resume


class Steps(L.Callback):
    """The weights a fit starts from (after any checkpoint is restored) and the updates it runs."""

    def on_train_start(self, trainer, module):
        self.start = {k: v.clone() for k, v in module.state_dict().items()}
        self.first_step, self.updates = trainer.global_step, 0

    def on_train_batch_end(self, trainer, module, outputs, batch, batch_idx):
        self.updates += 1


def final_state(case, tasks, steps, ckpt_in=None, ckpt_out=None):
    """``(module, its final state dict, Steps)`` of a seeded fit for ``steps`` updates."""
    L.seed_everything(0)
    dm = datamodule(tasks, case.discrete, seed=3)
    module = build(case, dm)
    watch = Steps()
    run = trainer(steps, deterministic=True, callbacks=[watch])
    run.fit(module, dm, ckpt_path=ckpt_in)
    if ckpt_out is not None:
        run.save_checkpoint(ckpt_out)
    return module, {k: v.clone() for k, v in module.state_dict().items()}, watch


@pytest.mark.parametrize("name", NAMES)
def test_resume_from_checkpoint_is_bit_exact(name, tasks, tmp_path):
    case = CASES[name]
    straight, a, _ = final_state(case, tasks, 2 * 5)
    mid = tmp_path / "mid.ckpt"
    _, half, _ = final_state(case, tasks, 5, ckpt_out=mid)
    resumed, b, watch = final_state(case, tasks, 2 * 5, ckpt_in=mid)
    # The resumed fit starts from the checkpoint's weights and runs only the remaining updates
    # (a fit that ignored the checkpoint would end at the same weights: the run is seeded).
    assert watch.start.keys() == half.keys()
    for key in half:
        assert torch.equal(watch.start[key], half[key]), key
    assert (watch.first_step, watch.updates) == (5, 5)
    assert a.keys() == b.keys()
    for key in a:
        assert torch.equal(a[key], b[key]), key
    assert any(not torch.equal(half[k], b[k]) for k in a), "nothing trained after the checkpoint"
    if isinstance(straight, COMBO):
        assert straight.model_size == resumed.model_size > 0
        for key, value in straight.model_buffer.items():
            assert torch.equal(value, resumed.model_buffer[key]), key


# --------------------------------------------------------------------------------- learning


@pytest.fixture(scope="module")
def lured() -> dict[bool, tuple[LineTask, RolloutDataset, RolloutDataset]]:
    """Data whose most common action is suboptimal: half the actions are a lure (discrete: stay,
    with a step cost of 0.5; continuous: a small step the wrong way, reward -0.125), the rest as
    in ``tasks``. Imitation takes the lure; the rewards say the instructed move is better."""
    out = {}
    for discrete, expert in ((True, 0.6), (False, 0.75)):
        task = LineTask(discrete=discrete, step_cost=0.5)
        real = task.dataset(LEFT[:2] + RIGHT[:2], 200, seed=0, expert=expert, lure=0.5)
        imaginary = task.dataset(
            LEFT[2:] + RIGHT[2:], 200, seed=1, expert=expert, source="imaginary", lure=0.5
        )
        out[discrete] = (task, real, imaginary)
    return out


@pytest.mark.slow
@pytest.mark.parametrize("name", NAMES)
def test_beats_imitation_where_the_common_action_is_wrong(name, lured):
    case = CASES[name]
    task = lured[case.discrete][0]
    L.seed_everything(0)
    dm = TaskDataModule(*lured[case.discrete][1:], ratio=0.5, batch_size=128, seed=0)
    module = build(case, dm, **case.learn_kwargs)
    untrained = task.evaluate(module)
    assert min(untrained.values()) < 0.9, f"the task is too easy: {untrained} untrained"
    start = time.perf_counter()
    trainer(case.learn_steps).fit(module, dm)
    success = task.evaluate(module)
    seconds = time.perf_counter() - start
    print(f"{name}: success {success} after {case.learn_steps} steps ({seconds:.1f} s)")
    if case.cls in (BC, DiscreteBC):  # imitation takes the lure: the data is a test of RL
        assert max(success.values()) <= 0.1, success
    else:  # the optimum always succeeds; BC succeeds in at most 7.5 % of episodes here
        assert min(success.values()) >= 0.9, success
