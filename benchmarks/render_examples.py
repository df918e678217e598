"""The rendered rollouts of docs/rendering.md: one real and one imagined episode per domain.

    python benchmarks/render_examples.py            # writes docs/figures/render_<domain>_*.gif

Real episodes are collected here with each domain's expert (``imaginebench collect``'s code:
5 episodes of level ``train``, seed 0); imagined ones come from the shipped
``imaginary_hard.h5`` of each domain that ships imaginary data, or from a file named with
``--imagined DOMAIN=FILE`` (Meta-World and LIBERO ship none: docs/rendering.md names the
commands that imagined theirs). From each file the first successful episode at least
``MIN_STEPS`` long is drawn (else the first successful one, else episode 0). Each GIF is what
``imaginebench render FILE --episode i --height 150 --width 200 --every K --out ...`` writes;
``--every`` thins the long continuous-control episodes.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np

from imaginebench.cli import main as imaginebench
from imaginebench.data.collect import collect
from imaginebench.data.format import load_dataset, save_dataset
from imaginebench.data.shipped import resolve_data_path

ROOT = Path(__file__).resolve().parents[1]
# domain -> keep every K-th state (the long continuous-control episodes)
EVERY = {"clevr": 1, "babyai": 1, "halfcheetah": 4, "metaworld": 3, "libero": 6}
MIN_STEPS = {"clevr": 5, "babyai": 10, "halfcheetah": 40, "metaworld": 20, "libero": 40}
SIZE = ("--height", "150", "--width", "200")


def pick_episode(path: Path, min_steps: int) -> int:
    """The file's first successful episode with at least ``min_steps`` steps, else its first
    successful one, else 0."""
    dataset = load_dataset(path)
    success = dataset.episode_success
    for candidates in (success & (dataset.episode_lengths() >= min_steps), success):
        if candidates.any():
            return int(np.argmax(candidates))
    return 0


def render(source: str, episode: int, out: Path, every: int) -> None:
    """``imaginebench render`` one episode; print the file's size and the time per state."""
    args = [source, "--episode", str(episode), "--every", str(every), *SIZE]
    states = len(load_dataset(resolve_data_path(source)).episode(episode).states)
    start = time.perf_counter()
    if imaginebench(["render", *args, "--out", str(out), "--overwrite"]) != 0:
        raise SystemExit(f"rendering {source} failed")
    seconds = time.perf_counter() - start
    print(
        f"  {out.name}: {out.stat().st_size // 1024} KB; {states} states drawn in "
        f"{seconds:.1f} s ({1000 * seconds / states:.0f} ms per state, renderer start included)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out-dir", default=str(ROOT / "docs" / "figures"))
    parser.add_argument("--domains", nargs="+", default=list(EVERY), choices=list(EVERY))
    parser.add_argument(
        "--imagined",
        nargs="+",
        default=[],
        metavar="DOMAIN=FILE",
        help="an imagined file to draw instead of the domain's shipped imaginary_hard.h5",
    )
    args = parser.parse_args()
    out_dir = Path(args.out_dir)
    chosen = dict(_domain_file(item) for item in args.imagined)
    with tempfile.TemporaryDirectory() as scratch:
        for domain in args.domains:
            print(domain)
            real = Path(scratch) / f"{domain}_real.h5"
            dataset, _ = collect(domain, "train", 5, seed=0, progress=False)
            save_dataset(dataset, real)
            episode = pick_episode(real, MIN_STEPS[domain])
            render(str(real), episode, out_dir / f"render_{domain}_real.gif", EVERY[domain])
            imagined = chosen.get(domain, f"shipped:{domain}/imaginary_hard.h5")
            path = resolve_data_path(imagined)
            if not path.is_file():
                print(f"  no imaginary data for {domain} ({imagined}; see --imagined)")
                continue
            episode = pick_episode(path, MIN_STEPS[domain])
            out = out_dir / f"render_{domain}_imaginary.gif"
            render(imagined, episode, out, EVERY[domain])


def _domain_file(item: str) -> tuple[str, str]:
    """``DOMAIN=FILE`` -> ``(domain, file)``."""
    domain, sep, path = item.partition("=")
    if not sep or domain not in EVERY or not path:
        raise SystemExit(f"--imagined takes DOMAIN=FILE with DOMAIN one of {list(EVERY)}: {item!r}")
    return domain, path


if __name__ == "__main__":
    main()
