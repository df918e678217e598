"""Meta-World imagination with the slot model of ``slot_dynamics.py`` as the state model.

``imaginebench imagine`` with a config's settings, except that the imagined states advance by
:class:`slot_dynamics.SlotDynamics` (fitted on the same real data as the config's ensemble,
never the simulator) instead of the dynamics ensemble; the ensemble still gives each transition
its confidence. The quality report (replayed success: the simulator as judge) is printed and
written beside the file as usual:

    python benchmarks/imagine_with_slots.py -c configs/imagine_metaworld.yaml --level hard \
        --rollouts 200 --checkpoint <grounding step 600> --out /tmp/slots_{level}.h5 \
        --no-min-confidence
"""

from __future__ import annotations

import argparse

import torch
import yaml
from slot_dynamics import SlotDynamics

import imaginebench.imagination.run as run
from imaginebench.data.format import load_dataset
from imaginebench.imagination.quality import format_table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("-c", "--config", required=True)
    parser.add_argument("--level", required=True)
    parser.add_argument("--checkpoint", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--rollouts", type=int, default=200)
    parser.add_argument("--max-steps", type=int, default=6000, help="slot model updates")
    parser.add_argument(
        "--no-min-confidence",
        action="store_true",
        help="drop the config's min_confidence step (the ensemble cannot vouch for scenes it "
        "never saw, which is what the slot model is for)",
    )
    parser.add_argument("--no-filters", action="store_true", help="keep every rollout")
    parser.add_argument(
        "--momentum", action="store_true", help="entities see their own last change"
    )
    parser.add_argument("--unseen", choices=["untyped", "static"], default="untyped")
    args = parser.parse_args()
    torch.set_num_threads(1)
    config = yaml.safe_load(open(args.config))
    filters = dict(config.get("filters") or {})
    if args.no_min_confidence:
        filters["min_confidence"] = None
    if args.no_filters:
        filters.update(reject_illegal=False, require_success=False, min_confidence=None)
    fit_ensemble = run.fit_ensemble_on

    def with_slots(path, settings, progress, loaded=None, **kwargs):
        scorer, how = fit_ensemble(path, settings, progress, loaded=loaded, **kwargs)
        real = loaded if loaded is not None else load_dataset(path)
        slots = SlotDynamics.fit(
            real, max_steps=args.max_steps, momentum=args.momentum, unseen=args.unseen
        )
        scorer.next_states = lambda states, actions, context=None: slots.next_states(
            states, actions, context
        )
        return scorer, {
            **how,
            "state_model": f"slot_dynamics.SlotDynamics ({args.max_steps} updates, "
            f"momentum {args.momentum}, unseen types {args.unseen})",
        }

    run.fit_ensemble_on = with_slots
    _, report = run.imagine_level(
        args.level,
        args.checkpoint,
        args.out,
        domain=config["domain"],
        rollouts=args.rollouts,
        seed=config.get("seed", 0),
        horizon=config.get("horizon"),
        decoding=config.get("decoding"),
        filters=filters,
        ensemble_confidence=config.get("ensemble_confidence", False),
        ensemble=config.get("ensemble"),
        state_model="ensemble",
    )
    print(format_table([report]))


if __name__ == "__main__":
    main()
