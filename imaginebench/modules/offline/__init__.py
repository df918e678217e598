"""Offline RL algorithms, one file each, on the shared instruction-conditioned backbone."""

from imaginebench.modules.offline.base import OfflineRLModule
from imaginebench.modules.offline.bc import BC, DiscreteBC
from imaginebench.modules.offline.bcq import BCQ, DiscreteBCQ
from imaginebench.modules.offline.combo import COMBO
from imaginebench.modules.offline.cql import CQL, DiscreteCQL
from imaginebench.modules.offline.iql import IQL, DiscreteIQL
from imaginebench.modules.offline.prdc import PRDC
from imaginebench.modules.offline.sac import SAC, DiscreteSAC
from imaginebench.modules.offline.td3bc import TD3BC

# name -> (discrete variant, continuous variant); None where the algorithm has no such variant
ALGORITHMS = {
    "bc": (DiscreteBC, BC),
    "cql": (DiscreteCQL, CQL),
    "bcq": (DiscreteBCQ, BCQ),
    "sac": (DiscreteSAC, SAC),
    "iql": (DiscreteIQL, IQL),
    "td3bc": (None, TD3BC),
    "prdc": (None, PRDC),
    "combo": (None, COMBO),
}

__all__ = [
    "ALGORITHMS",
    "BC",
    "BCQ",
    "COMBO",
    "CQL",
    "IQL",
    "PRDC",
    "SAC",
    "TD3BC",
    "DiscreteBC",
    "DiscreteBCQ",
    "DiscreteCQL",
    "DiscreteIQL",
    "DiscreteSAC",
    "OfflineRLModule",
]
