"""Training throughput: gradient updates per second of our DiscreteBC and DiscreteCQL (the real
Lightning path) against a bare PyTorch loop and d3rlpy 2.8.1, on the same data, network and
hyperparameters, measured in one process. Prints a markdown table and writes
docs/results/throughput.md.

    python benchmarks/throughput.py                            # 2000 steps, 200 warm-up, 3 repeats
    python benchmarks/throughput.py --steps 300 --repeats 1    # quick check (< 1 min)

Measure on an otherwise idle machine: torch's intra-op threads slow down by orders of magnitude
when other processes occupy the cores. The report records the cores other processes used during
every run, and also gives rates from the process CPU time (robust to that with ``--threads 1``).

Every contender trains a freshly initialised network of the same shape (state (10) ||
Linear(384->64) of the instruction embedding -> MLP 256, 256 -> 40 actions) on batches of 256
transitions drawn uniformly from the same CLEVR-Robot expert dataset (collected once, cached in
the temp dir):

* ``ours``: ``lightning.Trainer(max_steps=W+N)`` fitting ``DiscreteBC`` / ``DiscreteCQL`` with
  ``RealImaginaryDataModule(ratio=0)``; a callback times the N steps after W warm-up steps
  (end of step W to end of step W+N: batch sampling, Lightning's loop, update).
* ``bare``: a plain loop: ``torch.randint`` indices into the same in-memory tensors, embedding
  table lookup (standardised once if our modules standardise embeddings by default), state
  normalisation, the loss written out, ``Adam(foreach=True)``.
* ``d3rlpy``: ``DiscreteBCConfig`` / ``DiscreteCQLConfig`` with an encoder factory that builds the
  same network from our ``StateInstructionEncoder`` (the observation is state || embedding, states
  pre-normalised). Each step is ``dataset.sample_transition_batch(256)`` + ``algo.update(batch)``,
  exactly the body of d3rlpy's ``fit`` loop without its logger and progress bar; sampling and
  update are timed separately and both rates are reported.

Runs are interleaved (repeat r runs every algorithm and contender once, the contender order rotated
by r) and the median over repeats is reported.

d3rlpy 2.8.1 pins gymnasium==1.0.0, which conflicts with our gymnasium==1.4.0, so it is installed
without its dependencies (it runs fine with gymnasium 1.4):

    pip install structlog==26.1.0 colorama==0.4.6 dataclasses-json==0.6.7 gym==0.26.2
    pip install --no-deps d3rlpy==2.8.1

(the first line is ``pip install -e '.[benchmark]'``).
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import functools
import gc
import inspect
import io
import logging
import os
import platform
import shlex
import statistics
import sys
import tempfile
import time
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor

from imaginebench.modules.backbone import (
    DEFAULT_ENCODER,
    DiscreteHead,
    StateInstructionEncoder,
    shared_encoder,
)

ALGORITHMS = ("DiscreteBC", "DiscreteCQL")
CONTENDERS = ("ours", "ours-k8", "bare", "d3rlpy")
UPDATES_PER_BATCH = 8  # the ours-k8 contender: 8 updates per Lightning batch


@dataclass(frozen=True)
class Hyper:
    """Hyperparameters shared by all contenders."""

    batch_size: int = 256
    hidden: tuple[int, ...] = (256, 256)
    instruction_dim: int = 64
    bc_lr: float = 1e-3
    bc_penalty: float = 0.0  # our logit_penalty (default 0) and d3rlpy's beta: plain cross-entropy
    cql_lr: float = 3e-4
    gamma: float = 0.99
    alpha: float = 1.0
    target_update_interval: int = 500


# ------------------------------------------------------------------------------------- data


@dataclass
class Data:
    path: Path
    dataset: object  # RolloutDataset
    state_dim: int
    action_spec: dict
    instructions: list[str]
    embeddings: Tensor  # (num_instructions, 384), rows in the data module's instruction order
    standardized: bool  # embeddings standardised per dimension, as our modules do by default
    state_mean: Tensor
    state_std: Tensor
    # flat transition tensors (the data module's real buffer)
    states: Tensor
    state_index: Tensor
    action: Tensor
    reward: Tensor
    done: Tensor
    instruction_id: Tensor

    @property
    def transitions(self) -> int:
        return int(self.action.shape[0])


def _module_default(name: str, fallback: object) -> object:
    """Default of an ``OfflineRLModule`` constructor argument (``fallback`` if it has none)."""
    from imaginebench.modules.offline.base import OfflineRLModule

    param = inspect.signature(OfflineRLModule.__init__).parameters.get(name)
    return fallback if param is None or param.default is inspect.Parameter.empty else param.default


def load_data(episodes: int, seed: int, cache_dir: Path) -> Data:
    from imaginebench.data.collect import collect
    from imaginebench.data.format import load_dataset, save_dataset
    from imaginebench.datamodules import RealImaginaryDataModule

    path = cache_dir / f"clevr_train_n{episodes}_s{seed}_e0.2.h5"
    if not path.exists():
        dataset, stats = collect("clevr", "train", episodes, seed=seed, epsilon=0.2, progress=False)
        save_dataset(dataset, path, overwrite=True)
        print(f"# {stats} -> {path}", flush=True)
    dm = RealImaginaryDataModule(real=str(path), ratio=0.0, batch_size=256)
    dm.setup()
    buf = dm.real
    assert buf is not None
    encoder = shared_encoder(DEFAULT_ENCODER, "mean", True)  # what the modules' banks use
    embeddings = encoder.encode(dm.instructions)
    # Match whatever our modules feed the network by default: if they standardise the
    # embeddings (with the training instructions' mean and std), the other contenders get the
    # same standardised table, computed once.
    standardize = _module_default("standardize_instructions", False) and len(embeddings) > 1
    if standardize:
        embeddings = (embeddings - embeddings.mean(0)) / embeddings.std(0).clamp_min(1e-4)
    return Data(
        path=path,
        dataset=load_dataset(path),
        state_dim=dm.state_dim,
        action_spec=dm.action_spec,
        instructions=list(dm.instructions),
        embeddings=embeddings,
        standardized=bool(standardize),
        state_mean=buf.states.mean(0),
        state_std=buf.states.std(0).clamp_min(1e-3),
        states=buf.states,
        state_index=buf.data["state_index"].long(),
        action=buf.data["action"].long(),
        reward=buf.data["reward"].float(),
        done=buf.data["done"].float(),
        instruction_id=buf.data["instruction_id"].long(),
    )


def build_net(data: Data, hp: Hyper) -> DiscreteHead:
    trunk = StateInstructionEncoder(
        data.state_dim, data.embeddings.shape[1], hp.hidden, hp.instruction_dim
    )
    return DiscreteHead(trunk, int(data.action_spec["n"]))


# ---------------------------------------------------------------------- contender: ours


def run_ours(
    algo: str, data: Data, hp: Hyper, warmup: int, steps: int, seed: int, k: int = 1
) -> dict:
    import lightning as L

    from imaginebench.datamodules import RealImaginaryDataModule
    from imaginebench.modules.offline import DiscreteBC, DiscreteCQL

    class StepTimer(L.Callback):
        """Time from the end of step ``warmup`` to the end of step ``warmup + steps``."""

        def __init__(self) -> None:
            self.t0, self.t1 = None, None

        def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
            step = trainer.global_step  # one per update, also with k updates per batch
            if step >= warmup and self.t0 is None:
                self.t0 = (time.perf_counter(), time.process_time())
            elif step >= warmup + steps and self.t1 is None:
                self.t1 = (time.perf_counter(), time.process_time())

    torch.manual_seed(seed)
    dm = RealImaginaryDataModule(
        real=str(data.path), ratio=0.0, batch_size=hp.batch_size, seed=seed, updates_per_batch=k
    )
    common = dict(
        state_dim=dm.state_dim,
        action_spec=dm.action_spec,
        hidden=hp.hidden,
        instruction_dim=hp.instruction_dim,
    )
    if algo == "DiscreteBC":
        model = DiscreteBC(**common, lr=hp.bc_lr, logit_penalty=hp.bc_penalty)
    else:
        model = DiscreteCQL(
            **common,
            lr=hp.cql_lr,
            gamma=hp.gamma,
            alpha=hp.alpha,
            target_update_interval=hp.target_update_interval,
        )
    timer = StepTimer()
    trainer = L.Trainer(
        max_steps=warmup + steps,
        accelerator="cpu",
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        callbacks=[timer],
    )
    trainer.fit(model, dm)
    assert timer.t0 is not None and timer.t1 is not None, "the trainer stopped early"
    return {"seconds": timer.t1[0] - timer.t0[0], "cpu_seconds": timer.t1[1] - timer.t0[1]}


# ---------------------------------------------------------------------- contender: bare


def run_bare(algo: str, data: Data, hp: Hyper, warmup: int, steps: int, seed: int) -> dict:
    torch.manual_seed(seed)
    net = build_net(data, hp)
    cql = algo == "DiscreteCQL"
    target = copy.deepcopy(net).requires_grad_(False) if cql else None
    opt = torch.optim.Adam(net.parameters(), lr=hp.cql_lr if cql else hp.bc_lr, foreach=True)
    gen = torch.Generator().manual_seed(seed)
    n, b = data.transitions, hp.batch_size
    states, mean, std = data.states, data.state_mean, data.state_std
    emb_table = data.embeddings

    def step(k: int) -> None:
        idx = torch.randint(n, (b,), generator=gen)
        row = data.state_index[idx]
        s = (states[row] - mean) / std
        a = data.action[idx]
        e = emb_table[data.instruction_id[idx]]
        if cql:
            s2 = (states[row + 1] - mean) / std
            q = net(s, e)
            q_a = q.gather(1, a[:, None]).squeeze(1)
            with torch.no_grad():
                best = net(s2, e).argmax(1, keepdim=True)
                y = data.reward[idx] + hp.gamma * (1.0 - data.done[idx]) * target(s2, e).gather(
                    1, best
                ).squeeze(1)
            loss = F.smooth_l1_loss(q_a, y) + hp.alpha * (torch.logsumexp(q, 1) - q_a).mean()
        else:
            logits = net(s, e)
            loss = F.cross_entropy(logits, a)
            if hp.bc_penalty:
                loss = loss + hp.bc_penalty * 0.5 * logits.pow(2).mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if cql and (k + 1) % hp.target_update_interval == 0:
            with torch.no_grad():
                for p_t, p in zip(target.parameters(), net.parameters()):
                    p_t.copy_(p)

    for k in range(warmup):
        step(k)
    t0, c0 = time.perf_counter(), time.process_time()
    for k in range(warmup, warmup + steps):
        step(k)
    return {"seconds": time.perf_counter() - t0, "cpu_seconds": time.process_time() - c0}


# ---------------------------------------------------------------------- contender: d3rlpy


def import_d3rlpy():
    with contextlib.redirect_stderr(io.StringIO()):  # gym 0.26's "unmaintained" banner
        import d3rlpy
    if d3rlpy.__version__ != "2.8.1":
        warnings.warn(f"d3rlpy {d3rlpy.__version__} installed, the benchmark targets 2.8.1")
    return d3rlpy


_d3rlpy_cache: dict = {}


def d3rlpy_dataset(data: Data):
    """Our transitions as a d3rlpy MDPDataset with observation = normalised state || embedding.

    Terminated episodes keep their T rows (d3rlpy bootstraps nothing after a terminal);
    truncated ones get their final state as an extra row flagged ``timeouts`` (with a dummy
    action and reward), so d3rlpy sees the same T transitions and next states.
    """
    if "dataset" in _d3rlpy_cache:
        return _d3rlpy_cache["dataset"]
    d3rlpy = import_d3rlpy()
    ds = data.dataset
    index = {s: i for i, s in enumerate(data.instructions)}
    states = (torch.as_tensor(ds.states) - data.state_mean) / data.state_std
    obs, act, rew, term, tout = [], [], [], [], []
    off = ds.episode_offsets
    for i in range(len(ds)):
        t0, t1 = int(off[i]), int(off[i + 1])
        length = t1 - t0
        if length == 0:
            continue
        ep_states = states[t0 + i : t1 + i + 1]
        emb = data.embeddings[index[ds.instructions[ds.episode_instruction[i]]]]
        terminated = bool(ds.terminals[t1 - 1])
        rows = length if terminated else length + 1
        obs.append(torch.cat([ep_states[:rows], emb.expand(rows, -1)], 1).numpy())
        a, r = ds.actions[t0:t1].astype(np.int64), ds.rewards[t0:t1].astype(np.float32)
        flags = np.zeros(rows, dtype=np.float32)
        flags[-1] = 1.0
        if terminated:
            act.append(a), rew.append(r), term.append(flags), tout.append(np.zeros_like(flags))
        else:
            act.append(np.append(a, 0)), rew.append(np.append(r, np.float32(0)))
            term.append(np.zeros_like(flags)), tout.append(flags)
    dataset = d3rlpy.dataset.MDPDataset(
        observations=np.concatenate(obs).astype(np.float32),
        actions=np.concatenate(act),
        rewards=np.concatenate(rew),
        terminals=np.concatenate(term),
        timeouts=np.concatenate(tout),
        action_space=d3rlpy.ActionSpace.DISCRETE,
        action_size=int(data.action_spec["n"]),
    )
    assert dataset.transition_count == data.transitions, (
        dataset.transition_count,
        data.transitions,
    )
    _d3rlpy_cache["dataset"] = dataset
    return dataset


def d3rlpy_encoder_factory(data: Data, hp: Hyper):
    """An EncoderFactory building our StateInstructionEncoder on the concatenated observation."""
    d3rlpy = import_d3rlpy()
    if "factory" in _d3rlpy_cache:
        return _d3rlpy_cache["factory"]
    from d3rlpy.models.torch import Encoder

    state_dim, emb_dim = data.state_dim, int(data.embeddings.shape[1])

    class SplitEncoder(Encoder):
        def __init__(self) -> None:
            super().__init__()
            self.body = StateInstructionEncoder(state_dim, emb_dim, hp.hidden, hp.instruction_dim)

        def forward(self, x: Tensor) -> Tensor:
            return self.body(x[:, :state_dim], x[:, state_dim:])

    class SplitEncoderFactory(d3rlpy.models.EncoderFactory):
        def create(self, observation_shape):
            assert tuple(observation_shape) == (state_dim + emb_dim,), observation_shape
            return SplitEncoder()

        @staticmethod
        def get_type() -> str:
            return "imaginebench_split"

    _d3rlpy_cache["factory"] = SplitEncoderFactory()
    return _d3rlpy_cache["factory"]


def run_d3rlpy(algo: str, data: Data, hp: Hyper, warmup: int, steps: int, seed: int) -> dict:
    d3rlpy = import_d3rlpy()
    dataset = d3rlpy_dataset(data)
    factory = d3rlpy_encoder_factory(data, hp)
    d3rlpy.seed(seed)  # numpy (the replay buffer's sampler), random and torch
    if algo == "DiscreteBC":
        config = d3rlpy.algos.DiscreteBCConfig(
            batch_size=hp.batch_size,
            learning_rate=hp.bc_lr,
            beta=hp.bc_penalty,
            encoder_factory=factory,
        )
    else:
        config = d3rlpy.algos.DiscreteCQLConfig(
            batch_size=hp.batch_size,
            learning_rate=hp.cql_lr,
            gamma=hp.gamma,
            alpha=hp.alpha,
            target_update_interval=hp.target_update_interval,
            encoder_factory=factory,
        )
    learner = config.create(device="cpu:0")
    learner.build_with_dataset(dataset)
    clock = time.perf_counter
    for _ in range(warmup):
        learner.update(dataset.sample_transition_batch(hp.batch_size))
    sample_s = update_s = 0.0
    t0, c0 = clock(), time.process_time()
    for _ in range(steps):
        ta = clock()
        batch = dataset.sample_transition_batch(hp.batch_size)
        tb = clock()
        learner.update(batch)
        tc = clock()
        sample_s += tb - ta
        update_s += tc - tb
    return {
        "seconds": clock() - t0,
        "cpu_seconds": time.process_time() - c0,
        "sample_seconds": sample_s,
        "update_seconds": update_s,
    }


RUNNERS = {
    "ours": run_ours,
    "ours-k8": functools.partial(run_ours, k=UPDATES_PER_BATCH),
    "bare": run_bare,
    "d3rlpy": run_d3rlpy,
}


# ------------------------------------------------------------------------------------- main


def cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def busy_cpu_seconds() -> float | None:
    """CPU seconds the whole machine has spent busy since boot (``/proc/stat``; None elsewhere)."""
    try:
        ticks = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:9]]
    except (OSError, ValueError):
        return None
    idle = ticks[3] + ticks[4]  # idle + iowait
    return (sum(ticks) - idle) / os.sysconf("SC_CLK_TCK")


def fmt_rate(x: float | None) -> str:
    return "n/a" if x is None else f"{x:,.0f}"


def fmt_ratio(a: float | None, b: float | None) -> str:
    return "n/a" if a is None or b is None else f"{a / b:.2f}x"


def quiet_libraries() -> None:
    """Silence Lightning's banners/tips and d3rlpy's structlog info lines (warnings stay)."""
    import lightning  # noqa: F401  (creates its loggers)

    for name in list(logging.root.manager.loggerDict):
        if name.startswith(("lightning", "pytorch_lightning")):
            logging.getLogger(name).setLevel(logging.ERROR)
    warnings.filterwarnings("ignore", message=".*does not have many workers.*")
    warnings.filterwarnings("ignore", message=".*isinstance\\(treespec, LeafSpec\\).*")
    with contextlib.suppress(ImportError):
        import structlog

        structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--steps", type=int, default=2000, help="timed updates per run")
    parser.add_argument(
        "--warmup", type=int, default=200, help="untimed updates before timing (>= 1)"
    )
    parser.add_argument(
        "--repeats", type=int, default=3, help="interleaved repeats (median reported)"
    )
    parser.add_argument(
        "--threads", type=int, default=None, help="torch.set_num_threads (default: torch's default)"
    )
    parser.add_argument("--episodes", type=int, default=300, help="CLEVR train episodes collected")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--algorithms",
        default=",".join(ALGORITHMS),
        help="comma-separated subset of " + ",".join(ALGORITHMS),
    )
    parser.add_argument(
        "--contenders",
        default=",".join(CONTENDERS),
        help="comma-separated subset of " + ",".join(CONTENDERS),
    )
    parser.add_argument(
        "--cache-dir",
        default=str(Path(tempfile.gettempdir()) / "imaginebench_throughput"),
        help="where the collected dataset is cached",
    )
    parser.add_argument("--out", default="docs/results/throughput.md", help="'' to skip writing")
    args = parser.parse_args()
    if args.steps < 1 or args.warmup < 1 or args.repeats < 1:
        parser.error("--steps, --warmup and --repeats must be >= 1")
    algorithms = [a for a in args.algorithms.split(",") if a]
    contenders = [c for c in args.contenders.split(",") if c]
    for a in algorithms:
        if a not in ALGORITHMS:
            parser.error(f"unknown algorithm {a!r}; choose from {ALGORITHMS}")
    for c in contenders:
        if c not in CONTENDERS:
            parser.error(f"unknown contender {c!r}; choose from {CONTENDERS}")

    command = shlex.join(["python", "benchmarks/throughput.py", *sys.argv[1:]])
    load_start = os.getloadavg()  # before this process does any work
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    d3rlpy_version = None
    if "d3rlpy" in contenders:
        try:
            d3rlpy_version = import_d3rlpy().__version__
        except ImportError:
            sys.exit(
                "d3rlpy is not installed; see the install lines in this script's docstring "
                "or pass --contenders ours,bare"
            )
    quiet_libraries()
    import lightning

    cores = os.cpu_count() or 1
    threads = torch.get_num_threads()
    if load_start[0] > 0.5 * cores:
        print(
            f"# warning: 1-minute load average {load_start[0]:.1f} on {cores} cores (it lags a "
            f"minute behind): if other processes are running, wall-clock rates are unreliable"
            + (
                f", and {threads} torch threads sharing busy cores can make every step orders of "
                f"magnitude slower; measure on an idle machine (or with --threads 1 and read "
                f"the CPU-time rates)"
                if threads > 1
                else "; read the CPU-time rates"
            )
            + ". The report gives the cores other processes used during every run.",
            flush=True,
        )
    hp = Hyper()
    cache_dir = Path(args.cache_dir)
    cache_dir.mkdir(parents=True, exist_ok=True)
    data = load_data(args.episodes, args.seed, cache_dir)
    print(
        f"# {args.episodes} episodes, {data.transitions} transitions, "
        f"{len(data.instructions)} instructions; torch {torch.__version__} with "
        f"{threads} threads; steps {args.steps}, warm-up {args.warmup}, "
        f"repeats {args.repeats}, batch {hp.batch_size}",
        flush=True,
    )

    results: dict[tuple[str, str], list[dict]] = {}
    for r in range(args.repeats):
        order = contenders[r % len(contenders) :] + contenders[: r % len(contenders)]
        for algo in algorithms:
            for who in order:
                gc.collect()
                busy0, own0, wall0 = busy_cpu_seconds(), time.process_time(), time.perf_counter()
                res = RUNNERS[who](algo, data, hp, args.warmup, args.steps, args.seed + r)
                busy1, own1, wall1 = busy_cpu_seconds(), time.process_time(), time.perf_counter()
                res["rate"] = args.steps / res["seconds"]
                res["cpu_rate"] = args.steps / res["cpu_seconds"]
                # cores kept busy by other processes during this run (setup included)
                res["others"] = (
                    None
                    if busy0 is None or busy1 is None
                    else max(0.0, (busy1 - busy0) - (own1 - own0)) / (wall1 - wall0)
                )
                results.setdefault((algo, who), []).append(res)
                extra = ""
                if "update_seconds" in res:
                    extra = (
                        f"; sampling {1e3 * res['sample_seconds'] / args.steps:.2f} ms/step, "
                        f"update {1e3 * res['update_seconds'] / args.steps:.2f} ms/step"
                    )
                if res["others"] is not None:
                    extra += f"; other processes used {res['others']:.2f} cores"
                print(
                    f"# repeat {r + 1}/{args.repeats} {algo:11s} {who:6s} "
                    f"{res['rate']:8.1f} upd/s (CPU time: {res['cpu_rate']:.1f}){extra}",
                    flush=True,
                )

    def median(algo: str, who: str, key: str = "rate") -> float | None:
        runs = results.get((algo, who))
        if not runs:
            return None
        if key in ("rate", "cpu_rate"):
            return statistics.median(x[key] for x in runs)
        return statistics.median(args.steps / x[key] for x in runs)  # a seconds key -> rate

    def rate_table(key: str) -> list[str]:
        rows = [
            "| algorithm | ours (Lightning) upd/s | ours, 8 updates per batch | bare loop upd/s "
            "| d3rlpy upd/s | ours / bare | ours-k8 / bare | ours / d3rlpy |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for algo in algorithms:
            ours, k8, bare, d3 = (median(algo, c, key) for c in CONTENDERS)
            rows.append(
                f"| {algo} | {fmt_rate(ours)} | {fmt_rate(k8)} | {fmt_rate(bare)} | "
                f"{fmt_rate(d3)} | {fmt_ratio(ours, bare)} | {fmt_ratio(k8, bare)} | "
                f"{fmt_ratio(ours, d3)} |"
            )
        return rows

    table = rate_table("rate")
    print("\n".join(table))
    if not args.out:
        return

    others = [x["others"] for runs in results.values() for x in runs if x["others"] is not None]
    busy = bool(others) and max(others) > 0.2
    lines = [
        "# Training throughput: ours vs. a bare PyTorch loop vs. d3rlpy",
        "",
        f"Generated by `{command}` on {time.strftime('%Y-%m-%d %H:%M')}.",
        "",
        f"* CPU: {cpu_name()} ({cores} logical cores); torch {torch.__version__} with "
        f"{threads} intra-op thread(s) ({torch.get_num_interop_threads()} inter-op); "
        f"lightning {lightning.__version__}; d3rlpy {d3rlpy_version or 'not run'}; "
        f"Python {platform.python_version()}.",
        f"* Data: {args.episodes} CLEVR-Robot `train` expert episodes (epsilon 0.2, seed "
        f"{args.seed}): {data.transitions} transitions, {len(data.instructions)} instructions, "
        f"10-d state, {data.embeddings.shape[1]}-d instruction embedding (all-MiniLM-L6-v2"
        f"{', standardised per dimension' if data.standardized else ''}), "
        f"{data.action_spec['n']} actions.",
        f"* Network (every contender): state || Linear({data.embeddings.shape[1]}->"
        f"{hp.instruction_dim}) of the embedding -> MLP {', '.join(map(str, hp.hidden))} (ReLU) "
        f"-> {data.action_spec['n']} outputs; Adam.",
        f"* Hyperparameters: batch {hp.batch_size}; BC lr {hp.bc_lr:g}, cross-entropy (logit "
        f"penalty / d3rlpy beta {hp.bc_penalty:g}); CQL lr {hp.cql_lr:g}, gamma {hp.gamma:g}, "
        f"alpha {hp.alpha:g}, double DQN, Huber TD, hard target copy every "
        f"{hp.target_update_interval} steps.",
        f"* Timing: {args.steps} timed updates after {args.warmup} warm-up updates per run, "
        f"{args.repeats} interleaved repeat(s), median reported.",
        f"* Other processes: 1-minute load average {load_start[0]:.2f} before the start; during "
        f"the runs they kept "
        + (
            f"{statistics.mean(others):.2f} cores busy on average (at most {max(others):.2f} "
            f"in one run)"
            if others
            else "an unknown number of cores busy"
        )
        + f" of {cores}"
        + (
            ": **the machine was shared, so the wall-clock numbers are unreliable** (the "
            "CPU-time table is less sensitive to this with `--threads 1`)."
            if busy
            else "."
        ),
        "",
        "## Updates per second (wall clock, median)",
        "",
        *table,
        "",
        "Target: ours >= 0.9x the bare loop.",
        "",
        "## Updates per second from process CPU time (median)",
        "",
        "Steps divided by the CPU time the process used during the timed steps. With one torch "
        "thread this is close to the wall-clock rate on an idle machine and is far less "
        "sensitive to other processes; with several threads it also counts threads spinning.",
        "",
        *rate_table("cpu_rate"),
        "",
    ]
    if any(who == "d3rlpy" for _, who in results):
        lines += [
            "## d3rlpy step breakdown (wall clock, median)",
            "",
            "| algorithm | sample + update upd/s | update only upd/s | sampling ms/step "
            "| update ms/step |",
            "|---|---|---|---|---|",
        ]
        for algo in algorithms:
            if (algo, "d3rlpy") not in results:
                continue
            upd = median(algo, "d3rlpy", "update_seconds")
            samp = median(algo, "d3rlpy", "sample_seconds")
            lines.append(
                f"| {algo} | {fmt_rate(median(algo, 'd3rlpy'))} | {fmt_rate(upd)} | "
                f"{1e3 / samp:.2f} | {1e3 / upd:.2f} |"
            )
        lines.append("")
    lines += [
        "## Every run",
        "",
        "Updates/s from wall clock / from CPU time, and the cores other processes kept busy.",
        "",
        "| algorithm | contender | "
        + " | ".join(f"repeat {r + 1}" for r in range(args.repeats))
        + " |",
        "|---|---|" + "---|" * args.repeats,
    ]
    for algo in algorithms:
        for who in contenders:
            runs = results[(algo, who)]
            cells = " | ".join(
                f"{x['rate']:,.1f} / {x['cpu_rate']:,.1f}"
                + ("" if x["others"] is None else f" (others {x['others']:.2f})")
                for x in runs
            )
            lines.append(f"| {algo} | {who} | {cells} |")
    lines += [
        "",
        "## What is timed",
        "",
        '* **ours**: `lightning.Trainer(max_steps=W+N, accelerator="cpu", logger=False, '
        "enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False)` "
        "fitting `DiscreteBC` / `DiscreteCQL` with `RealImaginaryDataModule(ratio=0.0, "
        "batch_size=256)`. A callback takes the time at the end of step W and at the end of step "
        "W+N, so the N timed steps include batch sampling (the data module's stream), Lightning's "
        "loop and hooks, and `training_step` (state normalisation, embedding lookup, losses, "
        "backward, `Adam(foreach=True)` step, target copy, logging every 50 steps).",
        "* **bare**: a loop in this script with the same backbone classes and the same in-memory "
        "tensors: `torch.randint` indices, gathers, state normalisation, embedding-table lookup, "
        "the loss written out (BC: cross-entropy; CQL: double-DQN Huber TD + "
        "alpha * (logsumexp - Q(s,a))), `Adam(foreach=True)`, hard target copy every K steps.",
        "* **d3rlpy**: `DiscreteBCConfig` / `DiscreteCQLConfig` with the same hyperparameters and "
        "a custom `EncoderFactory` that wraps our `StateInstructionEncoder` (d3rlpy adds the "
        f"Linear(256->{data.action_spec['n']}) head itself); the observation is the normalised "
        "state concatenated with the instruction embedding (`MDPDataset` built from the same "
        "episodes). Each timed step is `dataset.sample_transition_batch(256)` followed by "
        "`algo.update(batch)`: the body of d3rlpy's own `fit` loop without its logger and "
        "progress bar, so the main table compares the full per-step cost of each library, "
        "sampling included for all three. d3rlpy's replay buffer assembles every batch from 256 "
        "Python `Transition` objects; the breakdown gives the update alone. d3rlpy keeps its "
        "default `AdamFactory` (torch `Adam` without `foreach`: the per-parameter loop on CPU) "
        "and its DiscreteCQL evaluates Q(s) twice (TD and conservative terms).",
        "",
        "The d3rlpy install (its `gymnasium==1.0.0` pin conflicts with ours; it runs with 1.4):",
        "",
        "```bash",
        "pip install -e '.[benchmark]'   # structlog, colorama, dataclasses-json, gym==0.26.2",
        "pip install --no-deps d3rlpy==2.8.1",
        "```",
    ]
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(lines) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
