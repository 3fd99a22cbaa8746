"""Mixed teams: each agent played by a member of its own (a baseline with its own settings).

``baseline=mixed`` with ``baseline.kwargs.members``, a list of members, each a mapping:

* ``baseline``: a registered team name or ``module:Class`` path (``heuristic``, ``llm_agents``);
* ``agents``: the agents it plays, by name (``agent_0``) or index (``0``); leave it out of one
  member, the last, to give it every agent the others do not name (``agent_0 is X, the rest
  Y``); members that name agents the episode does not have are skipped (a 2-agent member list
  plays 1-agent reference episodes with whoever plays ``agent_0``);
* ``kwargs``: the team's own constructor arguments (prompt version, sampling, checkpoint...);
* ``llm``: for an LLM baseline, its LLM: the name of a ``configs/llm/`` file (``smollm2``) or a
  mapping of its fields; ``llm_options`` overrides fields of it (``{adapter: ...}``);
* ``label``: how rows, traces and summaries name the member (default: the baseline, with its
  LLM and adapter).

Each member team is reset with its own agents and sees only their observations (its partners
are in ``task_info.agents``, and it hears their messages); it acts for its agents and gets
their rewards. Members
with the same LLM share its backend through the worker's pool (:meth:`Team.bind`), so two
agents on one model batch together. The episode's trace records the member of every agent
(:meth:`Team.members`), and the result row carries it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import yaml

from benchmark.agents import Team, make_team
from benchmark.env.views import TaskInfo
from benchmark.paths import CONFIGS_DIR

if TYPE_CHECKING:
    from benchmark.llm.resources import LLMResources

# The fields of an LLM config and their defaults (configs/llm/*.yaml, the runner's LLMConfig).
LLM_DEFAULTS: dict[str, Any] = {
    "backend": "none",
    "model": "",
    "options": {},
    "adapter": None,
    "constrained": True,
}
MEMBER_FIELDS = ("baseline", "agents", "kwargs", "llm", "llm_options", "label")


def member_llm(llm: str | Mapping[str, Any], overrides: Mapping[str, Any] | None) -> dict:
    """A member's LLM config: a ``configs/llm/<name>.yaml`` file or a mapping, with the
    defaults filled in and ``overrides`` on top; an unknown name or field is an error naming
    it."""
    if isinstance(llm, str):
        path = CONFIGS_DIR / "llm" / f"{llm}.yaml"
        if not path.is_file():
            known = sorted(p.stem for p in (CONFIGS_DIR / "llm").glob("*.yaml"))
            raise ValueError(f"member llm {llm!r}: no configs/llm/{llm}.yaml; known: {known}")
        base = yaml.safe_load(path.read_text()) or {}
    elif isinstance(llm, Mapping):
        base = dict(llm)
    else:
        raise ValueError(f"member llm must be a configs/llm name or a mapping, got {llm!r}")
    merged = {**LLM_DEFAULTS, **base, **dict(overrides or {})}
    unknown = sorted(set(merged) - set(LLM_DEFAULTS))
    if unknown:
        raise ValueError(f"member llm: unknown fields {unknown}; valid: {list(LLM_DEFAULTS)}")
    return merged


@dataclass(frozen=True)
class Member:
    """One member of a mixed team (see the module docstring); ``agents`` None: the rest."""

    baseline: str
    label: str
    kwargs: dict[str, Any] = field(default_factory=dict)
    agents: tuple[str, ...] | None = None

    @classmethod
    def parse(cls, k: int, spec: Mapping[str, Any]) -> Member:
        where = f"members[{k}]"
        if not isinstance(spec, Mapping):
            raise ValueError(f"{where}: a member is a mapping with 'baseline', got {spec!r}")
        unknown = sorted(set(spec) - set(MEMBER_FIELDS))
        if unknown:
            raise ValueError(f"{where}: unknown fields {unknown}; valid: {list(MEMBER_FIELDS)}")
        baseline = spec.get("baseline")
        if not isinstance(baseline, str) or not baseline:
            raise ValueError(f"{where}: 'baseline' must name a team, got {baseline!r}")
        kwargs = dict(spec.get("kwargs") or {})
        label = baseline
        if spec.get("llm") is not None:
            llm = member_llm(spec["llm"], spec.get("llm_options"))
            kwargs["llm"] = llm
            name = spec["llm"] if isinstance(spec["llm"], str) else llm["backend"]
            label += f"/{name}" + (f"+{llm['adapter']}" if llm["adapter"] else "")
        elif spec.get("llm_options"):
            raise ValueError(f"{where}: 'llm_options' needs 'llm'")
        agents = spec.get("agents")
        if agents is not None:
            if isinstance(agents, str | int):
                agents = [agents]
            if not isinstance(agents, Sequence) or not agents:
                raise ValueError(f"{where}: 'agents' must list agents, got {agents!r}")
            agents = tuple(_agent_name(a, where) for a in agents)
        return cls(baseline, str(spec.get("label") or label), kwargs, agents)


def _agent_name(agent: object, where: str) -> str:
    if isinstance(agent, bool):
        raise ValueError(f"{where}: agent {agent!r} is neither a name nor an index")
    if isinstance(agent, int) and agent >= 0:
        return f"agent_{agent}"
    if isinstance(agent, str) and agent.startswith("agent_") and agent[6:].isdigit():
        return agent
    raise ValueError(f"{where}: agent {agent!r} is neither agent_<k> nor an index >= 0")


def parse_members(members: Sequence[Mapping[str, Any]]) -> list[Member]:
    """The members of a mixed team; errors name the member and what is wrong: no member, an
    agent named twice, more than one member for the rest, or the rest before the last."""
    if not isinstance(members, Sequence) or isinstance(members, str) or not members:
        raise ValueError("a mixed team needs 'members': a non-empty list")
    parsed = [Member.parse(k, m) for k, m in enumerate(members)]
    seen: dict[str, int] = {}
    for k, m in enumerate(parsed):
        if m.agents is None and k != len(parsed) - 1:
            raise ValueError(f"members[{k}]: only the last member may leave 'agents' out")
        for a in m.agents or ():
            if a in seen:
                raise ValueError(f"members[{k}]: {a} is played by members[{seen[a]}] already")
            seen[a] = k
    return parsed


class MixedTeam(Team):
    """A team whose agents are played by different member teams (see the module docstring)."""

    def __init__(self, members: Sequence[Mapping[str, Any]]) -> None:
        self.spec = parse_members(members)
        self.teams = [make_team(m.baseline, **m.kwargs) for m in self.spec]
        self.owner: dict[str, int] = {}

    def bind(self, resources: LLMResources) -> None:
        for team in self.teams:
            team.bind(resources)

    def reset(self, agent_ids: list[str], task_info: TaskInfo) -> None:
        named = {a for m in self.spec for a in m.agents or ()}
        rest = [a for a in agent_ids if a not in named]
        if rest and self.spec[-1].agents is not None:
            raise ValueError(
                f"no member plays {rest}: name them, or leave the last member's "
                "'agents' out so it plays the rest"
            )
        self.owner = {}
        for k, m in enumerate(self.spec):
            for a in m.agents if m.agents is not None else rest:
                if a in agent_ids:
                    self.owner[a] = k
        self.active = sorted(set(self.owner.values()))
        for k in self.active:
            self.teams[k].reset([a for a in agent_ids if self.owner[a] == k], task_info)

    def members(self) -> dict[str, str]:
        return {a: self.spec[k].label for a, k in self.owner.items()}

    def _split(self, per_agent: Mapping[str, Any]) -> dict[int, dict[str, Any]]:
        parts: dict[int, dict[str, Any]] = {k: {} for k in self.active}
        for agent, value in per_agent.items():
            parts[self.owner[agent]][agent] = value
        return parts

    def act(self, observations: dict[str, dict[str, Any]]) -> dict[str, str]:
        actions: dict[str, str] = {}
        for k, own in self._split(observations).items():
            # Every member sees every step of its agents, deciding or not, as a whole team does.
            chosen = self.teams[k].act(own)
            actions.update({a: t for a, t in chosen.items() if self.owner.get(a) == k})
        return actions

    def rewarded(self, rewards: dict[str, float]) -> None:
        for k, own in self._split(rewards).items():
            self.teams[k].rewarded(own)

    def metrics(self) -> dict[str, float]:
        """Each active member's numbers, under ``member<k>/`` (k its place in the list)."""
        out: dict[str, float] = {}
        for k in self.active:
            out.update({f"member{k}/{name}": v for name, v in self.teams[k].metrics().items()})
        return out

    def close(self) -> None:
        for team in self.teams:
            team.close()
