"""What a team may use of the world beyond its observations: the declared surface between the
baselines (or any team of yours) and the simulator. An import contract keeps the baselines to it.

Every team may read:

* ``type_of_id``: the object type an objectId names (``Apple|-00.47|+01.15|+00.48`` -> Apple);
* ``object_facts()`` (:class:`ObjectFacts`): the scene facts every agent is told, the same in
  every scene: which receptacle types accept which objects (``scenes/receptacles.yaml``), what
  slicing and breaking make (``scenes/derived_objects.yaml``) and with which tools;
* ``BASINS``: the basin types a faucet's running water fills.

A privileged team (the oracle, which reads the true state) also uses
:mod:`benchmark.teamkit.privileged`.
"""

from benchmark.sim.catalog import type_of_id
from benchmark.sim.facts import ObjectFacts, object_facts
from benchmark.sim.state_changes import BASINS

__all__ = ["BASINS", "ObjectFacts", "object_facts", "type_of_id"]
