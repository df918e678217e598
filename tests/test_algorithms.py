"""Offline RL algorithms: they learn on CLEVR, discount correctly, and their continuous
variants behave as their papers say on small synthetic problems."""

import lightning as L
import numpy as np
import pytest
import torch

from imaginebench.callbacks.evaluation import evaluate_level
from imaginebench.datamodules import RealImaginaryDataModule
from imaginebench.modules.offline import BC, CQL, DiscreteBC, DiscreteCQL

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


def _batch(n=8, state_dim=3, emb=384, discrete=True):
    g = torch.Generator().manual_seed(0)
    return {
        "state": torch.randn(n, state_dim, generator=g),
        "next_state": torch.randn(n, state_dim, generator=g),
        "instruction": torch.randn(n, emb, generator=g),
        "action": torch.randint(0, 4, (n,), generator=g)
        if discrete
        else torch.rand(n, 2, generator=g) * 2 - 1,
        "reward": torch.randn(n, generator=g),
        "done": torch.tensor([True, False] * (n // 2)),
    }


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
    batch = _batch()
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
    batch = _batch(n=64)
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
    batch = _batch(n=128, discrete=False)
    batch["action"] = 1.5 * torch.tanh(batch["state"][:, :2])  # in [-1.5, 1.5]
    for _ in range(300):
        loss = m.losses(batch)["loss"]
        opt.zero_grad()
        loss.backward()
        opt.step()
    pred = m.policy(batch["state"], batch["instruction"])
    assert torch.mean((pred - batch["action"]) ** 2) < 0.01


def test_continuous_cql_is_conservative_and_updates_every_part():
    spec = {"type": "continuous", "shape": [2], "low": -1.0, "high": 1.0}
    m = CQL(state_dim=3, action_spec=spec, conservative_weight=5.0, seed=0)
    opt = torch.optim.Adam(m.param_groups(), lr=1e-3)
    batch = _batch(n=64, discrete=False)
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


def test_continuous_cql_actor_loss_does_not_move_critics():
    spec = {"type": "continuous", "shape": [2], "low": -1.0, "high": 1.0}
    m = CQL(state_dim=3, action_spec=spec)
    batch = _batch(n=16, discrete=False)
    terms = m.losses(batch)
    grads = torch.autograd.grad(
        terms["actor"].requires_grad_()
        if False
        else (m.log_temperature.exp().detach() * 0 + terms["loss"]),
        list(m.critics.parameters()),
        allow_unused=True,
    )
    assert all(g is not None for g in grads)  # the critic loss does reach the critics
    # ...but the policy-improvement term alone does not:
    pi, log_pi = m.sample(batch["state"], batch["instruction"])
    from imaginebench.modules.offline.base import frozen

    q_pi = frozen(m.critics[0], batch["state"], batch["instruction"], pi)
    grads = torch.autograd.grad(q_pi.sum(), list(m.critics.parameters()), allow_unused=True)
    assert all(g is None for g in grads)


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
