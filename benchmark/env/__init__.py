"""The multi-agent environment: ``make_env``, ``CollabEnv`` and episode replay."""

from benchmark.env.collab_env import CollabEnv, make_env
from benchmark.env.options import EnvOptions
from benchmark.env.replay import ReplayResult, replay
from benchmark.env.trace import trace_hash

__all__ = ["CollabEnv", "EnvOptions", "ReplayResult", "make_env", "replay", "trace_hash"]
