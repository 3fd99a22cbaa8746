"""Pictures of episodes: the replay viewer (``viewer``, an episode page with its top-down frames)
and the demo (``demo``). The top-down picture of a world itself is ``benchmark.sim.render``."""
