"""The multi-agent environment: ``make_env``, ``CollabEnv`` and episode replay."""

from benchmark.env.collab_env import CollabEnv, EnvOptions, make_env
from benchmark.env.trace import ReplayResult, replay, trace_hash

__all__ = ["CollabEnv", "EnvOptions", "ReplayResult", "make_env", "replay", "trace_hash"]
