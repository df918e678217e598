"""Offline RL algorithms, one file each, on the shared instruction-conditioned backbone."""

from imaginebench.modules.offline.base import OfflineRLModule
from imaginebench.modules.offline.bc import BC, DiscreteBC
from imaginebench.modules.offline.cql import CQL, DiscreteCQL

ALGORITHMS = {"bc": (DiscreteBC, BC), "cql": (DiscreteCQL, CQL)}

__all__ = ["ALGORITHMS", "BC", "CQL", "DiscreteBC", "DiscreteCQL", "OfflineRLModule"]
