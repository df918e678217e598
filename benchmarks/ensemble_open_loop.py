"""Open-loop drift of a dynamics ensemble along held-out real episodes, with and without the
last change of state as an input (Meta-World's 91-d state has no velocities).

Fits five members (200-200 units, beta-NLL, 6,000 updates) on the distinct real rollouts but
the first ``--test`` ones, then rolls each held-out episode forward from its first state with
its own actions, feeding the model its own predictions, and prints the median error of the
hand position (mm) after 1, 5, 10 and 20 steps (docs/metaworld.md).

    python benchmarks/ensemble_open_loop.py --real ~/.cache/imaginebench/metaworld_train_real_n2000_s0_e0.05_p5_x3.h5
"""

import argparse, time, numpy as np, torch
from imaginebench.data.format import load_dataset
from imaginebench.modules.dynamics import DynamicsEnsemble, fit_ensemble
from imaginebench.modules.backbone import StateInstructionEncoder

parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
parser.add_argument("--real", required=True)
parser.add_argument("--test", type=int, default=100, help="held-out distinct rollouts")
args = parser.parse_args()
torch.set_num_threads(1)
torch.manual_seed(0)
re = load_dataset(args.real)
S = np.asarray(re.states, np.float32)
A = np.asarray(re.actions, np.float32)
off = re.episode_offsets
# distinct rollouts: every 3rd? use first-state dedup
firsts = S[off[:-1] + np.arange(len(re))]
_, keep = np.unique(firsts, axis=0, return_index=True)
keep = np.sort(keep)
test_eps, train_eps = keep[: args.test], keep[args.test :]


def rows(eps):
    s, p, a, n = [], [], [], []
    for e in eps:
        st = S[off[e] + e : off[e + 1] + e + 1]
        ac = A[off[e] : off[e + 1]]
        prev = np.r_[st[:1], st[:-1]]
        s.append(st[:-1])
        p.append(st[:-1] - prev[:-1])
        a.append(ac)
        n.append(st[1:])
    return [np.concatenate(x) for x in (s, p, a, n)]


s, p, a, n = rows(train_eps)
mean, std = s.mean(0), s.std(0) + 1e-3
cstd = (n - s).std(0) + 1e-3
zero_stay = (s == 0).any(0) & ~((s == 0) & (n != 0)).any(0)


def fit(history):
    extra = S.shape[1] if history else 0
    torch.manual_seed(0)
    trunks = [StateInstructionEncoder(S.shape[1] + extra, 1, (200, 200), 1, 4) for _ in range(5)]
    ens = DynamicsEnsemble(trunks, S.shape[1])
    x = (s - mean) / std
    if history:
        x = np.c_[x, p / cstd]
    t = time.time()
    fit_ensemble(
        ens,
        torch.as_tensor(x),
        torch.zeros(len(x), 1),
        torch.as_tensor(a),
        torch.as_tensor((n - s) / cstd),
        torch.zeros(len(x)),
        torch.Generator().manual_seed(0),
        max_steps=6000,
        eval_every=500,
        patience=4,
        nll_beta=1.0,
    )
    print("fit", history, f"{time.time() - t:.0f}s", flush=True)
    return ens


for history in (False, True):
    ens = fit(history)
    errs = []
    for e in test_eps:
        st = S[off[e] + e : off[e + 1] + e + 1]
        ac = A[off[e] : off[e + 1]]
        cur, prev = st[0].copy(), st[0].copy()
        err = []
        for t in range(min(20, len(ac))):
            x = (cur - mean) / std
            if history:
                x = np.r_[x, (cur - prev) / cstd]
            with torch.no_grad():
                ch = (
                    ens.means(
                        torch.as_tensor(x[None], dtype=torch.float32),
                        torch.zeros(1, 1),
                        torch.as_tensor(ac[t][None]),
                    )
                    .mean(0)[0]
                    .numpy()
                    * cstd
                )
            ch[(cur == 0) & zero_stay] = 0
            prev, cur = cur, cur + ch
            err.append(np.linalg.norm(cur[:3] - st[t + 1, :3]) * 1000)
        errs.append(np.pad(err, (0, 20 - len(err)), constant_values=np.nan))
    errs = np.array(errs)
    print(
        "history",
        history,
        "open-loop hand error mm at steps 1,5,10,20:",
        [round(float(np.nanmedian(errs[:, k])), 2) for k in (0, 4, 9, 19)],
        flush=True,
    )
