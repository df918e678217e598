"""Offline RL algorithms: they learn on CLEVR, discount correctly, and their continuous
variants behave as their papers say on small synthetic problems."""

import copy
import math

import lightning as L
import numpy as np
import pytest
import torch
import torch.nn.functional as F
from helpers import random_batch

from imaginebench.callbacks.evaluation import evaluate_level
from imaginebench.datamodules import RealImaginaryDataModule
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
)

EVAL_EPISODES = 150
HORIZON = 10  # a short horizon: random pushing stumbles onto a third of the goals in 50 steps


class RandomPolicy:
    def __init__(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)

    def act(self, states, instructions):
        return self.rng.integers(0, 40, size=len(states))


@pytest.fixture(scope="module")
def clevr_data(tmp_path_factory):
    from imaginebench.data.collect import collect
    from imaginebench.data.format import save_dataset

    path = tmp_path_factory.mktemp("data") / "real.h5"
    dataset, _ = collect("clevr", "train", 400, seed=0, epsilon=0.2, paraphrases=10, progress=False)
    save_dataset(dataset, path)
    return path


def fit(module_cls, path, steps, **kwargs):
    L.seed_everything(0)
    dm = RealImaginaryDataModule(real=str(path), ratio=0.0, batch_size=256, seed=0)
    module = module_cls(state_dim=dm.state_dim, action_spec=dm.action_spec, **kwargs)
    trainer = L.Trainer(
        max_steps=steps,
        accelerator="cpu",
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
    )
    trainer.fit(module, dm)
    return module


@pytest.fixture(scope="module")
def chance(clevr_data):
    return evaluate_level(
        RandomPolicy(0), "clevr", "train", EVAL_EPISODES, seed=1, max_episode_steps=HORIZON
    ).success


@pytest.mark.slow
@pytest.mark.parametrize(
    "module_cls, steps, kwargs",
    [(DiscreteBC, 2000, {}), (DiscreteCQL, 2500, {"target_update_interval": 250})],
)
def test_policy_learns_clevr_train_level(clevr_data, chance, module_cls, steps, kwargs):
    module = fit(module_cls, clevr_data, steps, **kwargs)
    result = evaluate_level(
        module, "clevr", "train", EVAL_EPISODES, seed=1, max_episode_steps=HORIZON
    )
    # Clearly above chance: the lower end of the 95% interval beats the random policy by 8 points.
    assert result.ci95[0] >= chance + 0.08, (module_cls.__name__, result, chance)


@pytest.mark.parametrize("bug", [False, True])
def test_discrete_cql_discounting(bug):
    """gamma multiplies the bootstrap of non-terminal transitions; the original's gamma = 1
    bug only when asked for by name; terminal transitions never bootstrap."""
    m = DiscreteCQL(
        state_dim=3,
        action_spec={"type": "discrete", "n": 4},
        gamma=0.5,
        alpha=0.0,
        undiscounted_td_bug=bug,
    )
    batch = random_batch()
    with torch.no_grad():
        for p in m.q.parameters():
            p.zero_()
        m.q.out.bias.copy_(torch.tensor([1.0, 2.0, 3.0, 4.0]))
        m.q_target.load_state_dict(m.q.state_dict())
    # Q is constant per action: Q(s, a) = a + 1, max = 4.
    expected_target = batch["reward"] + (1.0 if bug else 0.5) * 4.0 * (~batch["done"]).float()
    q_data = batch["action"].float() + 1.0
    expected = torch.nn.functional.smooth_l1_loss(q_data, expected_target)
    assert torch.allclose(m.losses(batch)["td"], expected)


def test_discrete_cql_conservative_term_pushes_down_unseen_actions():
    m = DiscreteCQL(state_dim=3, action_spec={"type": "discrete", "n": 4}, alpha=1.0, lr=1e-2)
    opt = torch.optim.Adam(m.q.parameters(), lr=1e-2)
    batch = random_batch(n=64)
    batch["action"] = torch.zeros(64, dtype=torch.long)  # the data only ever takes action 0
    batch["reward"] = torch.zeros(64)
    for _ in range(200):
        loss = m.losses(batch)["loss"]
        opt.zero_grad()
        loss.backward()
        opt.step()
    q = m.q(batch["state"], batch["instruction"])
    assert (q[:, 0:1] > q[:, 1:] + 0.5).all()


def test_continuous_bc_regresses_the_data_actions():
    m = BC(state_dim=3, action_spec={"type": "continuous", "shape": [2], "low": -2.0, "high": 2.0})
    opt = torch.optim.Adam(m.parameters(), lr=3e-3)
    batch = random_batch(n=128, discrete=False)
    batch["action"] = 1.5 * torch.tanh(batch["state"][:, :2])  # in [-1.5, 1.5]
    for _ in range(300):
        loss = m.losses(batch)["loss"]
        opt.zero_grad()
        loss.backward()
        opt.step()
    pred = m.policy(batch["state"], batch["instruction"])
    assert torch.mean((pred - batch["action"]) ** 2) < 0.01


@pytest.mark.slow
def test_continuous_cql_is_conservative_and_updates_every_part():
    spec = {"type": "continuous", "shape": [2], "low": -1.0, "high": 1.0}
    m = CQL(state_dim=3, action_spec=spec, conservative_weight=5.0, sampling_seed=0)
    opt = torch.optim.Adam(m.param_groups(), lr=1e-3)
    batch = random_batch(n=64, discrete=False)
    batch["action"] = torch.full((64, 2), 0.5)
    before = {k: v.clone() for k, v in m.state_dict().items()}
    for _ in range(150):
        terms = m.losses(batch)
        opt.zero_grad()
        terms["loss"].backward()
        opt.step()
        m.after_update()
    assert all(torch.isfinite(v).all() for v in terms.values())
    after = m.state_dict()
    for prefix in ("actor.", "critics.", "critics_target.", "log_temperature"):
        changed = [
            k for k in after if k.startswith(prefix) and not torch.equal(after[k], before[k])
        ]
        assert changed, prefix
    s, i = batch["state"], batch["instruction"]
    q_data = m.critics[0](s, i, batch["action"])
    q_other = m.critics[0](s, i, torch.full((64, 2), -0.8))
    assert (q_data > q_other).float().mean() > 0.9


@pytest.mark.parametrize("mode", ["like_real", "push_down", "td_only"])
def test_continuous_cql_conservative_term_on_imaginary_rows(mode):
    """What the imaginary rows (the last half) bring to the conservative term: their states
    and actions (``like_real``), their states only (``push_down``: their log-sum-exp is pushed
    down, their actions never up) or nothing (``td_only``)."""
    spec = {"type": "continuous", "shape": [2], "low": -1.0, "high": 1.0}
    module = CQL(state_dim=3, action_spec=spec, sampling_seed=0, imaginary_conservative=mode)
    batch = random_batch(n=8, discrete=False)
    batch["source"] = torch.tensor([0, 0, 0, 0, 1, 1, 1, 1], dtype=torch.uint8)

    def conservative(change):
        changed = {k: v.clone() for k, v in batch.items()}
        changed[change][4:] = -changed[change][4:] + 0.3
        same_draws = copy.deepcopy(module)  # the same weights and sampling generator
        return same_draws.losses(changed)["conservative"]

    reference = copy.deepcopy(module).losses(batch)["conservative"]
    moves_with = {
        "like_real": {"state", "action"},
        "push_down": {"state"},
        "td_only": set(),
    }[mode]
    for change in ("state", "action"):
        assert torch.equal(conservative(change), reference) == (change not in moves_with), change


def test_combo_refuses_imaginary_conservative():
    with pytest.raises(ValueError, match="imaginary_conservative does not apply"):
        COMBO(state_dim=3, action_spec=CONTINUOUS, imaginary_conservative="td_only")


def test_continuous_cql_actor_loss_does_not_move_critics():
    spec = {"type": "continuous", "shape": [2], "low": -1.0, "high": 1.0}
    m = CQL(state_dim=3, action_spec=spec)
    terms = m.losses(random_batch(n=16, discrete=False))
    critics = list(m.critics.parameters())
    total = torch.autograd.grad(terms["loss"], critics, retain_graph=True, allow_unused=True)
    assert all(g is not None for g in total)  # the critic loss does reach the critics
    actor_only = torch.autograd.grad(terms["actor_loss"], critics, allow_unused=True)
    assert all(g is None for g in actor_only)  # ...but the policy-improvement term does not


def test_act_validates_inputs(clevr_data):
    m = DiscreteBC(state_dim=10, action_spec={"type": "discrete", "n": 40})
    a = m.act(np.zeros(10, dtype=np.float32), "push the red ball to the left of the blue ball")
    assert 0 <= int(a) < 40
    with pytest.raises(ValueError, match="states must have 10"):
        m.act(np.zeros((2, 7)), ["a", "b"])
    with pytest.raises(ValueError, match="instructions"):
        m.act(np.zeros((2, 10)), ["only one"])
    with pytest.raises(ValueError, match="needs a continuous"):
        BC(state_dim=10, action_spec={"type": "discrete", "n": 40})


# ------------------------------------------------------------------ BCQ, TD3+BC, IQL, PRDC, COMBO

CONTINUOUS = {"type": "continuous", "shape": [2], "low": -1.0, "high": 1.0}


@pytest.mark.usefixtures("one_thread")
def test_discrete_bcq_never_chooses_actions_the_generative_model_rules_out():
    """Q prefers action 3, but the data (G) only ever takes action 0: with the threshold the
    policy and the bootstrap stay on action 0; without it they take action 3."""
    batch = random_batch(n=16)
    for threshold, best in ((0.3, 0), (0.0, 3)):
        m = DiscreteBCQ(
            state_dim=3, action_spec={"type": "discrete", "n": 4}, threshold=threshold, gamma=0.5
        )
        with torch.no_grad():
            for net in (m.q, m.imitation):
                for p in net.parameters():
                    p.zero_()
            m.q.out.bias.copy_(torch.tensor([1.0, 0.0, 0.0, 10.0]))
            m.q_target.load_state_dict(m.q.state_dict())
            m.imitation.out.bias.copy_(torch.tensor([5.0, 0.0, 0.0, 0.0]))  # ratio e^-5 < 0.3
        assert (m.policy(batch["state"], batch["instruction"]) == best).all()
        q_data = m.q.out.bias[batch["action"]].detach()
        target = batch["reward"] + 0.5 * (~batch["done"]).float() * m.q.out.bias[best].detach()
        assert torch.allclose(m.losses(batch)["td_loss"], F.smooth_l1_loss(q_data, target))


@pytest.mark.usefixtures("one_thread")
def test_bcq_perturbation_stays_within_phi_of_the_generated_action():
    m = BCQ(state_dim=3, action_spec=CONTINUOUS, phi=0.05)
    batch = random_batch(n=64, discrete=False)
    with torch.no_grad():
        for p in m.actor.parameters():
            p.normal_(0, 3.0)  # saturate tanh: perturbations at the edge of the range
        a = torch.rand(64, 2) * 1.8 - 0.9
        moved = m.actor(batch["state"], batch["instruction"], a) - a
    assert moved.abs().max() <= 0.05 + 1e-6 and moved.abs().max() > 0.04


@pytest.mark.usefixtures("one_thread")
def test_td3bc_updates_actor_and_targets_every_policy_freq_steps():
    """Critics change every step; the actor and both targets only on steps 0, 2, 4, ..."""
    from helpers import LEFT, RIGHT, LineTask, TaskDataModule, trainer

    task = LineTask(discrete=False)
    dm = TaskDataModule(task.dataset(LEFT[:1] + RIGHT[:1], 20, seed=0), batch_size=16)
    m = TD3BC(state_dim=3, action_spec=task.action_spec, hidden=(16, 16), policy_freq=2)
    changes = []

    class Watch(L.Callback):
        def on_train_batch_start(self, trainer, module, batch, batch_idx):
            self.before = {k: v.clone() for k, v in module.state_dict().items()}

        def on_train_batch_end(self, trainer, module, outputs, batch, batch_idx):
            after = module.state_dict()
            changed = {k.split(".")[0] for k in after if not torch.equal(after[k], self.before[k])}
            changes.append(changed)

    trainer(5, callbacks=[Watch()]).fit(m, dm)
    everything = {"actor", "actor_target", "critics", "critics_target"}
    assert changes == [everything, {"critics"}, everything, {"critics"}, everything]


@pytest.mark.usefixtures("one_thread")
def test_expectile_loss_is_minimised_by_the_expectile():
    from imaginebench.modules.offline.common import expectile_loss

    samples = torch.tensor([0.0, 1.0])
    grid = torch.linspace(0, 1, 1001)
    losses = torch.stack([expectile_loss(samples - v, 0.7) for v in grid])
    # 0.7 (1 - v) = 0.3 v  =>  v = 0.7; tau = 0.5 is the mean
    assert abs(float(grid[losses.argmin()]) - 0.7) < 2e-3
    losses = torch.stack([expectile_loss(samples - v, 0.5) for v in grid])
    assert abs(float(grid[losses.argmin()]) - 0.5) < 2e-3


@pytest.mark.usefixtures("one_thread")
def test_iql_actor_weights_data_actions_by_their_clipped_exponentiated_advantage():
    batch = random_batch(n=32, discrete=False)
    for q, weight in ((1.0, math.exp(3.0)), (2.0, 100.0)):  # exp(3 * 2) > 100: clipped
        m = IQL(state_dim=3, action_spec=CONTINUOUS, beta=3.0, max_weight=100.0)
        with torch.no_grad():
            for net in m.critics_target:
                for p in net.parameters():
                    p.zero_()
                net.out.bias.fill_(q)  # Q'(s, a) = q
            for p in m.value.parameters():
                p.zero_()  # V(s) = 0: advantage q everywhere
        terms = m.losses(batch)
        assert torch.allclose(terms["weight"], torch.tensor(weight))
        log_prob = m.actor.log_prob(batch["state"], batch["instruction"], batch["action"])
        assert torch.allclose(terms["actor_loss"], -(weight * log_prob).mean())


@pytest.mark.usefixtures("one_thread")
def test_prdc_neighbours_match_brute_force_within_each_instruction():
    m = PRDC(state_dim=3, action_spec=CONTINUOUS, beta=2.0)
    g = torch.Generator().manual_seed(0)
    states, actions = torch.randn(300, 3, generator=g), torch.rand(300, 2, generator=g) * 2 - 1
    ids = torch.randint(0, 3, (300,), generator=g)
    m.build_index(states, actions, ids)
    qs, qa = torch.randn(50, 3, generator=g), torch.rand(50, 2, generator=g) * 2 - 1
    q_ids = torch.randint(0, 3, (50,), generator=g)
    found = m.nearest_actions(qs, qa, q_ids)
    keys, queries = torch.cat([2 * states, actions], 1), torch.cat([2 * qs, qa], 1)
    for i in range(50):
        same = (ids == q_ids[i]).nonzero().flatten()
        best = same[torch.cdist(queries[i : i + 1], keys[same]).argmin()]
        assert torch.equal(found[i], actions[best])
    # a much closer pair under another instruction is never chosen
    m.build_index(torch.zeros(2, 3), torch.tensor([[0.9, 0.9], [-0.9, -0.9]]), torch.tensor([0, 1]))
    near_other = m.nearest_actions(
        torch.zeros(1, 3), torch.tensor([[-0.9, -0.9]]), torch.tensor([0])
    )
    assert torch.equal(near_other, torch.tensor([[0.9, 0.9]]))


@pytest.mark.usefixtures("one_thread")
def test_combo_model_phase_learns_the_dynamics_and_rollouts_fill_half_the_batch():
    from helpers import LEFT, RIGHT, LineTask, TaskDataModule, trainer

    from imaginebench.modules.offline.common import dataset_transitions

    L.seed_everything(0)
    task = LineTask(discrete=False)
    dm = TaskDataModule(task.dataset(LEFT[:2] + RIGHT[:2], 300, seed=0), batch_size=64)
    m = COMBO(
        state_dim=3,
        action_spec=task.action_spec,
        hidden=(64, 64),
        ensemble_size=3,
        num_elites=2,
        model_max_steps=400,
        model_eval_every=50,
        rollout_batch_size=100,
        rollout_length=3,
    )
    trainer(2).fit(m, dm)
    assert bool(m.model_trained) and 0 < m.model_size <= 300
    data = dataset_transitions(dm)
    s, s2 = m.normalize(data["state"]), m.normalize(data["next_state"])
    a = m.to_unit(data["action"])
    target = torch.stack([(s2 - s)[:, 0], data["reward"]], 1)  # position and reward
    with torch.no_grad():
        pred = m.dynamics(int(m.elites[0]), s, m.train_embeddings[data["instruction_id"]], a)[0]
    r2 = 1 - ((pred[:, [0, -1]] - target) ** 2).mean(0) / target.var(0)
    # Measured with this budget over seeds 0-4 (one thread, 2026-11-23): position
    # R^2 0.966-0.995, reward R^2 0.75-0.97 (the reward is the position change signed by the
    # instruction, so it needs the instruction embedding; one machine gave 0.878 for seed 0
    # where another gave 0.969). Bounds below the worst seed, far above an untrained model's 0:
    assert r2[0] > 0.9 and r2[1] > 0.6, r2
    rows = m.model_buffer["state"][: m.model_size]
    assert (rows >= m.state_low).all() and (rows <= m.state_high).all()
    batch = m.prepare(dm.batches(0).batch(0))
    draws = m.generator.get_state()
    terms = m.losses(batch)
    assert float(terms["model_fraction"]) == 0.5
    # ...and the model's rows are really in the batch: their rewards move the TD error
    m.model_buffer["reward"] += 10.0
    m.generator.set_state(draws)
    assert float(m.losses(batch)["td"]) > float(terms["td"]) + 1.0


@pytest.mark.usefixtures("one_thread")
def test_row_draws_are_slices_of_the_global_batch_under_ddp():
    """With W ranks each rank keeps its slice of the draws for the global batch (so DDP with
    batch b samples like one process with batch W b); other draws are equal on every rank."""
    from types import SimpleNamespace

    m = SAC(state_dim=3, action_spec=CONTINUOUS)
    m.seed_sampling(7)
    whole = m.normal((8, 2), torch.device("cpu"), split=True)
    common = m.uniform((3,), torch.device("cpu"))
    parts, shared = [], []
    for rank in range(2):
        m.seed_sampling(7)
        m._trainer = SimpleNamespace(world_size=2, global_rank=rank)
        parts.append(m.normal((4, 2), torch.device("cpu"), split=True))
        shared.append(m.uniform((3,), torch.device("cpu")))
    m._trainer = None
    assert torch.equal(torch.cat(parts), whole)
    assert torch.equal(shared[0], shared[1]) and torch.equal(shared[0], common)


@pytest.mark.parametrize("mode", ["like_real", "push_down", "td_only"])
def test_discrete_cql_conservative_gap_on_imaginary_rows(mode):
    """The gap's rows: every row (``like_real``); the log-sum-exp on every row and the data Q on
    real rows (``push_down``, COMBO's split); real rows only (``td_only``)."""
    m = DiscreteCQL(
        state_dim=3, action_spec={"type": "discrete", "n": 4}, imaginary_conservative=mode
    )
    q_all = torch.tensor([[0.0, 0.0, 0.0, 0.0], [1.0, 2.0, 3.0, 4.0], [4.0, 0.0, 0.0, 0.0]])
    action = torch.tensor([0, 3, 1])
    q_data = torch.tensor([0.0, 4.0, 0.0])
    source = torch.tensor([0, 0, 1], dtype=torch.uint8)  # the third row is imaginary
    lse = torch.logsumexp(q_all, -1)
    expected = {
        "like_real": (lse - q_data).mean(),
        "push_down": lse.mean() - q_data[:2].mean(),
        "td_only": (lse[:2] - q_data[:2]).mean(),
    }[mode]
    assert torch.allclose(m.conservative_gap(q_all, q_data, action, source, None), expected)
    # weights scale rows as before: a zero-weight imaginary row is as if it were not there
    weight = torch.tensor([1.0, 1.0, 0.0])
    expected_weighted = (lse[:2] - q_data[:2]).mean()
    assert torch.allclose(
        m.conservative_gap(q_all, q_data, action, source, weight), expected_weighted
    )


def test_discrete_cql_imaginary_conservative_weight_scales_imagined_rows():
    """A weight ``c`` counts each imaginary row ``c`` times in the conservative gap: 0 gives
    ``td_only``'s gap, 1 ``like_real``'s, and 0.5 the mean with the imaginary row at half."""
    q_all = torch.tensor([[0.0, 0.0, 0.0, 0.0], [1.0, 2.0, 3.0, 4.0], [4.0, 0.0, 0.0, 0.0]])
    action = torch.tensor([0, 3, 1])
    q_data = torch.tensor([0.0, 4.0, 0.0])
    source = torch.tensor([0, 0, 1], dtype=torch.uint8)
    gap = torch.logsumexp(q_all, -1) - q_data

    def module(**kw):
        return DiscreteCQL(state_dim=3, action_spec={"type": "discrete", "n": 4}, **kw)

    def scaled(c, weight=None):
        return module(imaginary_conservative_weight=c).conservative_gap(
            q_all, q_data, action, source, weight
        )

    td_only = module(imaginary_conservative="td_only").conservative_gap(
        q_all, q_data, action, source, None
    )
    assert torch.allclose(scaled(0.0), td_only)
    assert torch.allclose(scaled(1.0), gap.mean())
    assert torch.allclose(scaled(0.5), (gap[0] + gap[1] + 0.5 * gap[2]) / 2.5)
    weight = torch.tensor([1.0, 0.5, 2.0])  # sample weights multiply the row weights
    assert torch.allclose(
        scaled(0.5, weight), (gap[0] + 0.5 * gap[1] + 1.0 * gap[2]) / (1.0 + 0.5 + 1.0)
    )
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        module(imaginary_conservative_weight=1.5)
    with pytest.raises(ValueError, match="like_real"):
        module(imaginary_conservative="push_down", imaginary_conservative_weight=0.5)


def test_discrete_cql_margin_mode_holds_imagined_actions_to_a_lead_only():
    """``margin``: real rows keep CQL(H)'s gap; an imaginary row costs DQfD's large-margin gap,
    ``max_a [Q(a) + m * (a != a_data)] - Q(a_data)``, which is zero once its action leads every
    other by ``m`` (so it stops pushing), and its gradient then leaves Q untouched."""
    m = DiscreteCQL(
        state_dim=3,
        action_spec={"type": "discrete", "n": 4},
        imaginary_conservative="margin",
        imaginary_margin=0.5,
    )
    q_all = torch.tensor(
        [[1.0, 2.0, 3.0, 4.0], [0.0, 0.2, 0.0, 0.0], [0.0, 1.0, 0.0, 0.0]], requires_grad=True
    )
    action = torch.tensor([3, 1, 1])
    q_data = q_all.gather(1, action[:, None]).squeeze(1)
    source = torch.tensor([0, 1, 1], dtype=torch.uint8)  # rows 2 and 3 are imaginary
    gap = m.conservative_gap(q_all, q_data, action, source, None)
    lse_gap = torch.logsumexp(q_all[0], -1) - 4.0
    # row 2 leads by 0.2 < 0.5: gap 0.3; row 3 leads by 1.0: gap 0
    assert torch.allclose(gap, (lse_gap + 0.3 + 0.0) / 3)
    gap.backward()
    assert torch.equal(q_all.grad[2], torch.zeros(4))
    assert q_all.grad[1, 1] < 0 and q_all.grad[1, 0] > 0  # lead widened: data up, rival down
    weight = torch.tensor([1.0, 0.0, 1.0])  # a zero-weight row leaves the mean
    assert torch.allclose(m.conservative_gap(q_all, q_data, action, source, weight), lse_gap / 2)
    with pytest.raises(ValueError, match="positive"):
        DiscreteCQL(state_dim=3, action_spec={"type": "discrete", "n": 4}, imaginary_margin=0.0)
    with pytest.raises(ValueError, match="DiscreteCQL"):
        CQL(state_dim=3, action_spec=CONTINUOUS, imaginary_conservative="margin")


def test_discrete_cql_rejects_an_unknown_imaginary_conservative():
    with pytest.raises(ValueError, match="imaginary_conservative"):
        DiscreteCQL(
            state_dim=3, action_spec={"type": "discrete", "n": 4}, imaginary_conservative="off"
        )


@pytest.mark.usefixtures("one_thread")
def test_a_state_entry_the_real_data_never_vary_enters_the_policy_at_its_mean():
    """An entry constant in the training data (Meta-World's wall slot, zero in every training
    task) is standardised to 0 whatever its value, so a novel level's wall neither moves nor
    saturates the policy's actions (before, it entered a thousand spreads away and every
    action of a wall task was at the bounds); the other entries are standardised as before."""
    from helpers import LEFT, RIGHT, LineTask, TaskDataModule, trainer

    task = LineTask(discrete=False)
    data = task.dataset(LEFT[:2] + RIGHT[:2], 40, seed=0)
    data.states[:, 2] = 0.25  # entry 2 never varies
    m = BC(state_dim=3, action_spec=task.action_spec, hidden=(32, 32))
    trainer(20).fit(m, TaskDataModule(data, batch_size=32))
    state = torch.as_tensor(data.states[:4]).clone()
    seen = m.normalize(state)
    state[:, 2] = 40.0  # a value the data never had
    unseen = m.normalize(state)
    torch.testing.assert_close(unseen, seen)
    assert (unseen[:, 2] == 0).all()
    real = torch.as_tensor(data.states)
    torch.testing.assert_close(
        unseen[:, :2], ((state - real.mean(0)) / real.std(0))[:, :2], rtol=1e-4, atol=1e-4
    )
    instructions = [LEFT[0]] * 4
    np.testing.assert_array_equal(
        m.act(data.states[:4], instructions), m.act(state.numpy(), instructions)
    )
