"""What a privileged team (the oracle, ``PrivilegedView``) uses of the simulator: the true
world, the grid it walks on, which objects some reachable pose sees, and the state rules of
appliances (the basin a faucet runs into; whether a heat source or the water is on)."""

from benchmark.sim.arrange import reachable_by_sight
from benchmark.sim.scene import GRID_SIZE
from benchmark.sim.state_changes import basin_of, heat_is_on
from benchmark.sim.world import World

__all__ = ["GRID_SIZE", "World", "basin_of", "heat_is_on", "reachable_by_sight"]
