"""CollabBench: embedded multi-agent household tasks on the real iTHOR scenes.

``benchmark.make_env`` and ``benchmark.replay`` are imported lazily, so light modules
(assets, paths) load without the environment's dependencies.
"""

from typing import Any

from benchmark.version import __version__

__all__ = ["__version__", "make_env", "replay"]


def __getattr__(name: str) -> Any:
    if name in ("make_env", "replay"):
        from benchmark import env

        return getattr(env, name)
    raise AttributeError(f"module 'benchmark' has no attribute {name!r}")
