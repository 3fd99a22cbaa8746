"""``CollabEnv``: a PettingZoo ``ParallelEnv`` of collaborative household tasks.

Time runs in ticks. Each agent runs one skill at a time over several ticks, all agents at once
(the simulator's ``multi_step``). ``step`` takes the actions of the agents that need a decision
(the others' entries are ignored) and advances ticks until at least one agent needs a decision
again, or the episode ends: on success, at the tick limit, or when every agent chose ``done``.
Rewards per agent and tick: ``alpha * team_progress + (1 - alpha) * own_credit`` plus a success
bonus, where team_progress is the change in satisfied checklist atoms and own_credit the atoms
the agent's own actions satisfied (minus those they undid), both divided by the checklist size.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

from pettingzoo import ParallelEnv

from benchmark.env import observation
from benchmark.env.grammar import Call, ParseError, parse_action
from benchmark.env.messaging import OBJECT_ID, Postbox
from benchmark.env.skills import PRIMITIVE_OF, Explore, Navigate, Skill
from benchmark.env.trace import TraceRecorder
from benchmark.env.traffic import joint_lifts, right_of_way, step_aside
from benchmark.episode import Episode, make_episode
from benchmark.goals import holds
from benchmark.sim.planning import sight_poses
from benchmark.sim.world import ActionResult
from benchmark.tasks import TaskRef, resolve_task


@dataclass(frozen=True)
class EnvOptions:
    """Environment options (all recorded in the trace).

    Attributes:
        action_level: ``skill`` (the skill grammar) or ``primitive`` (raw THOR actions).
        observability: ``partial`` (agents know what they have seen or were told) or ``full``.
        ambiguity: instruction phrasing: ``explicit``, ``types`` or ``implicit``.
        comm: whether messages are delivered.
        token_cap: message length cap in whitespace tokens.
        message_cost: extra ticks a message costs its sender.
        reward_sharing: alpha, the team share of each agent's reward.
        success_bonus: reward every agent gets when the checklist is complete.
        split: scene split used when the scene is chosen by seed.
        strict_agents: reject agent counts outside the task's range.
    """

    action_level: str = "skill"
    observability: str = "partial"
    ambiguity: str = "types"
    comm: bool = True
    token_cap: int = 32
    message_cost: int = 0
    reward_sharing: float = 0.7
    success_bonus: float = 1.0
    split: str | None = None
    strict_agents: bool = True

    def __post_init__(self) -> None:
        choices = {
            "action_level": ("skill", "primitive"),
            "observability": ("partial", "full"),
            "ambiguity": ("explicit", "types", "implicit"),
        }
        for name, valid in choices.items():
            if getattr(self, name) not in valid:
                raise ValueError(f"{name}={getattr(self, name)!r} is not one of {list(valid)}")
        if not 0.0 <= self.reward_sharing <= 1.0:
            raise ValueError(f"reward_sharing={self.reward_sharing} must be in [0, 1]")
        if self.token_cap < 1 or self.message_cost < 0:
            raise ValueError("token_cap must be >= 1 and message_cost >= 0")


class CollabEnv(ParallelEnv):
    """Multi-agent collaborative household task on the embedded simulator."""

    metadata: ClassVar[dict[str, Any]] = {
        "name": "collab_env_v0",
        "render_modes": ["rgb_array"],
        "is_parallelizable": True,
    }

    def __init__(
        self,
        task: TaskRef,
        scene: str | None = None,
        n_agents: int = 2,
        seed: int = 0,
        options: EnvOptions | None = None,
    ) -> None:
        self.task = resolve_task(task)
        self.fixed_scene = scene
        self.n_agents = n_agents
        self.seed = seed
        self.options = options or EnvOptions()
        self.possible_agents = [f"agent_{k}" for k in range(n_agents)]
        self.agents: list[str] = []
        self.render_mode = "rgb_array"
        self.episode: Episode | None = None
        self.tick_hook: Callable[[CollabEnv], None] | None = None  # called after every tick

    # ------------------------------------------------------------------ spaces
    @functools.cache  # noqa: B019  (PettingZoo wants the same object back)
    def observation_space(self, agent: str):
        return observation.observation_space()

    @functools.cache  # noqa: B019
    def action_space(self, agent: str):
        return observation.action_space()

    # ------------------------------------------------------------------ reset
    def reset(self, seed: int | None = None, options: dict | None = None):
        if seed is not None:
            self.seed = seed
        o = self.options
        self.episode = make_episode(
            self.task,
            self.fixed_scene,
            self.n_agents,
            self.seed,
            split=o.split,
            strict_agents=o.strict_agents,
        )
        ep = self.episode
        self.world = ep.world
        self.controller = ep.controller
        self.agents = list(self.possible_agents)
        self.instruction = ep.instructions[o.ambiguity]
        self.tick = 0
        self.skills: list[Skill | None] = [None] * self.n_agents
        self.finished = [False] * self.n_agents
        self.decisions = [0] * self.n_agents
        self.last = [("", True, "episode started")] * self.n_agents
        self.postbox = Postbox(self.possible_agents)
        self.visited = [{(a.i, a.j)} for a in self.world.agents]
        self.known: list[set[str]] = [
            set(OBJECT_ID.findall(self.instruction)) for _ in range(self.n_agents)
        ]
        self.satisfied = [holds(self.world, a) for a in ep.checklist]
        self.credit = [0] * self.n_agents
        self._poses: dict = {}
        self._see_all()
        self.recorder = TraceRecorder(self)
        return self._observations(), self._infos()

    # ------------------------------------------------------------------ step
    def step(self, actions: dict[str, Any]):
        if not self.agents:
            raise RuntimeError("step() called on a finished episode; call reset()")
        deciders = [k for k in range(self.n_agents) if self._needs_decision(k)]
        recorded = {}
        for k in deciders:
            name = self.possible_agents[k]
            text = actions.get(name, "") if isinstance(actions, dict) else ""
            recorded[name] = text if isinstance(text, str) else repr(text)
            self._decide(k, text)
        self.recorder.decisions(self.tick, recorded)
        rewards = dict.fromkeys(self.possible_agents, 0.0)
        while True:
            for name, r in self._advance().items():
                rewards[name] += r
            if self._over() or any(self._needs_decision(k) for k in range(self.n_agents)):
                break
        success = all(self.satisfied)
        ended = success or all(self.finished)
        truncated = not ended and self._over()
        obs, infos = self._observations(), self._infos()
        terms = dict.fromkeys(self.agents, ended)
        truncs = dict.fromkeys(self.agents, truncated)
        rews = {a: rewards[a] for a in self.agents}
        if ended or truncated:
            self.recorder.finish()
            for name in self.agents:
                infos[name]["trace"] = self.recorder.trace
            self.agents = []
        return obs, rews, terms, truncs, infos

    def _over(self) -> bool:
        return (
            all(self.satisfied)
            or all(self.finished)
            or self.tick >= self.task.max_ticks
            or max(self.decisions) >= self.task.max_decisions
        )

    def _needs_decision(self, k: int) -> bool:
        skill = self.skills[k]
        return not self.finished[k] and (skill is None or skill.finished)

    # ------------------------------------------------------------------ decisions
    def _decide(self, k: int, text: Any) -> None:
        self.decisions[k] += 1
        try:
            call = parse_action(text, self.options.action_level)
        except ParseError as err:
            skill = Skill("invalid")
            self._start(k, skill, text, fail=f"could not parse action: {err}")
            skill.record = self.recorder.skill(
                self.tick, self.possible_agents[k], "invalid", None, False
            )
            return
        problem = self._recipient_problem(k, call)
        if problem is not None:
            skill = Skill("invalid")
            self._start(k, skill, text, fail=problem)
            skill.record = self.recorder.skill(
                self.tick, self.possible_agents[k], "invalid", None, False
            )
            return
        delay = 0
        if call.say is not None:
            delay = self._send(k, call)
        skill, problem = self._make_skill(k, call)
        self._start(k, skill, text, fail=problem, delay=delay)
        skill.record = self.recorder.skill(
            self.tick, self.possible_agents[k], call.name, call.target, problem is None
        )

    def _recipient_problem(self, k: int, call: Call) -> str | None:
        """Why the attached message cannot be sent (unknown recipient, or oneself), if so."""
        if call.say is None or call.say.to == "all":
            return None
        if call.say.to == self.possible_agents[k]:
            return "could not send the message: you cannot message yourself"
        if call.say.to not in self.possible_agents:
            return (
                f"could not send the message: no agent {call.say.to!r}; "
                f"recipients are all, {', '.join(self.possible_agents)}"
            )
        return None

    def _send(self, k: int, call: Call) -> int:
        say = call.say
        assert say is not None
        self.postbox.send(
            self.tick,
            self.possible_agents[k],
            say.to,
            say.text,
            self.options.token_cap,
            self.options.comm,
        )
        return self.options.message_cost if self.options.comm else 0

    def _make_skill(self, k: int, call: Call) -> tuple[Skill, str | None]:
        """The skill to run for ``call``, or a placeholder and the reason it cannot run."""
        name, target = call.name, call.target
        if self.options.action_level == "primitive":
            return self._primitive_skill(k, call)
        cap = self.task.capability(k)
        if name in cap.cannot:
            return Skill(name, target), f"{self.possible_agents[k]} ({cap.name}) cannot {name}"
        if name == "done":
            self.finished[k] = True
            return Skill("done"), None
        if name == "wait":
            return Skill("wait"), None
        if name == "explore":
            return Explore("explore", visited=self.visited[k]), None
        index = self.world.index_of.get(target or "", -1)
        if index < 0 or not self.world.objs[index].active:
            return Skill(name, target), f"there is no object {target!r}"
        if self.options.observability == "partial" and target not in self.known[k]:
            return Skill(name, target), f"you do not know where {target} is yet"
        if name == "navigate":
            poses = self._sight_poses(index)
            if not poses:
                return Skill(name, target), f"{target} cannot be seen from anywhere now"
            return Navigate(name, target, poses=poses), None
        if name in ("pickup", "lift") and index in self.episode.heavy and name == "pickup":
            return Skill(name, target), f"{target} is too heavy: two agents must lift it together"
        if name == "lift":
            return Skill("lift", target), None
        return Skill(
            name, target, primitive={"action": PRIMITIVE_OF[name], "objectId": target}
        ), None

    def _primitive_skill(self, k: int, call: Call) -> tuple[Skill, str | None]:
        if call.name == "done":
            self.finished[k] = True
            return Skill("done"), None
        if call.name == "wait":
            return Skill("wait"), None
        act: dict[str, Any] = {"action": call.name}
        if call.target is not None:
            act["objectId"] = call.target
            if (
                self.world.index_of.get(call.target, -1) in self.episode.heavy
                and call.name == "PickupObject"
            ):
                return Skill(call.name, call.target), f"{call.target} is too heavy to pick up alone"
        return Skill(call.name, call.target, primitive=act), None

    def _start(
        self, k: int, skill: Skill, text: Any, fail: str | None = None, delay: int = 0
    ) -> None:
        if fail is not None:
            skill.primitive = None
            skill.feedback = fail
            skill.success = False
            skill.name = f"!{skill.name}"
        skill.delay = delay
        self.skills[k] = skill
        self.last[k] = (text if isinstance(text, str) else repr(text), fail is None, fail or "")

    def _sight_poses(self, index: int) -> list:
        key = (index, self.world.box(index))
        if key not in self._poses:
            self._poses[key] = sight_poses(self.world, index)
        return self._poses[key]

    # ------------------------------------------------------------------ ticks
    def _advance(self) -> dict[str, float]:
        """Run one tick for every agent; returns this tick's rewards."""
        world = self.world
        n = self.n_agents
        before = sum(self.satisfied)
        primitives: list[dict | None] = [None] * n
        lifters: dict[int, list[int]] = {}
        walking = frozenset(
            k
            for k, s in enumerate(self.skills)
            if isinstance(s, Navigate | Explore) and not s.finished and not self.finished[k]
        )
        for k, skill in enumerate(self.skills):
            if isinstance(skill, Navigate):
                skill.walking = walking
            if skill is None or skill.finished or self.finished[k]:
                continue
            if skill.delay > 0 or skill.name.startswith("!"):
                continue
            if skill.name == "lift":
                lifters.setdefault(world.index_of[skill.target], []).append(k)
                continue
            primitives[k] = skill.next_action(world, k)
        lift_results = joint_lifts(self, lifters, primitives)
        step_aside(self, primitives)
        right_of_way(primitives)
        results: list[ActionResult | None] = [None] * n
        gained = [0] * n

        def after(k: int, result: ActionResult) -> None:
            results[k] = result
            now = [holds(world, a) for a in self.episode.checklist]
            for i, (old, new) in enumerate(zip(self.satisfied, now, strict=True)):
                if old != new:
                    gained[k] += 1 if new else -1
                    self.recorder.atom(self.tick, self.possible_agents[k], i, new)
            self.satisfied = now

        self.controller.multi_step(primitives, after_each=after)
        blocked_before = [s.blocked if s is not None else 0 for s in self.skills]
        self._finish_skills(results, lift_results)
        blocked = [
            s is not None and s.blocked > b
            for s, b in zip(self.skills, blocked_before, strict=True)
        ]
        self.recorder.tick(self.tick, primitives, results, self.skills, blocked)
        self.tick += 1
        if self.tick_hook is not None:
            self.tick_hook(self)
        for k, a in enumerate(world.agents):
            self.visited[k].add((a.i, a.j))
        self._see_all()
        team = sum(gained) / max(1, len(self.satisfied))
        alpha = self.options.reward_sharing
        bonus = (
            self.options.success_bonus
            if all(self.satisfied) and before < len(self.satisfied)
            else 0.0
        )
        out = {}
        for k, name in enumerate(self.possible_agents):
            self.credit[k] += gained[k]
            own = gained[k] / max(1, len(self.satisfied))
            out[name] = alpha * team + (1 - alpha) * own + bonus
        return out

    def _finish_skills(
        self, results: list[ActionResult | None], lift_failures: dict[int, str]
    ) -> None:
        world = self.world
        for k, skill in enumerate(self.skills):
            if skill is None or skill.finished or self.finished[k]:
                continue
            if skill.delay > 0:
                skill.delay -= 1
                continue
            if skill.name.startswith("!"):
                skill.ticks += 1
                skill.finished = True
            elif skill.name == "lift":
                skill.ticks += 1
                if k in lift_failures:
                    skill.finish(False, lift_failures[k])
                elif results[k] is not None and not results[k].success:
                    skill.finish(False, results[k].error)
                else:
                    skill.finish(True, "lifted together" if results[k] is None else "lifted")
            else:
                skill.observe(world, k, results[k])
            if skill.finished:
                text = self.last[k][0]
                self.last[k] = (text, skill.success, skill.feedback)
                if skill.record is not None:
                    skill.record.update(end=self.tick, success=skill.success)

    def _see_all(self) -> None:
        if self.options.observability == "full":
            return
        world = self.world
        for k in range(self.n_agents):
            known = self.known[k]
            for s in world.specs:
                if s.object_id not in known and world.visible(k, s.index):
                    known.add(s.object_id)

    # ------------------------------------------------------------------ observations
    def _observations(self) -> dict[str, dict]:
        out = {}
        world = self.world
        for k, name in enumerate(self.possible_agents):
            decide = self._needs_decision(k)
            messages = self.postbox.collect(name) if decide else []
            for m in messages:
                self.known[k].update(OBJECT_ID.findall(m.text))
            visible = [s.index for s in world.specs if world.visible(k, s.index)]
            text, ok, feedback = self.last[k]
            out[name] = observation.build(
                world,
                k,
                name,
                self.instruction,
                self.tick,
                decide,
                visible,
                messages,
                text,
                ok,
                feedback,
            )
        return out

    def _infos(self) -> dict[str, dict]:
        return {
            name: {
                "needs_decision": self._needs_decision(k),
                "tick": self.tick,
                "satisfied": sum(self.satisfied),
                "atoms": len(self.satisfied),
            }
            for k, name in enumerate(self.possible_agents)
        }

    # ------------------------------------------------------------------ extras
    def task_info(self) -> dict[str, Any]:
        """What agents get at reset: the instruction, the goal clauses of the (public) task spec,
        the team, capabilities and limits.

        Under full observability it also holds ``env``, this environment, for privileged
        reference teams (the oracle) that read the true state.
        """
        info = {
            "task": self.task.id,
            "family": self.task.family,
            "instruction": self.instruction,
            "goal": [_clause_text(c) for c in self.task.goal],
            "agents": list(self.possible_agents),
            "n_agents": self.n_agents,
            "capabilities": {
                a: sorted(self.task.capability(k).cannot)
                for k, a in enumerate(self.possible_agents)
            },
            "max_ticks": self.task.max_ticks,
            "action_level": self.options.action_level,
            "observability": self.options.observability,
            "comm": self.options.comm,
        }
        if self.options.observability == "full":
            info["env"] = self
        return info

    def render(self):
        from benchmark.render import top_down

        return top_down(self.world)

    def close(self) -> None:
        self.agents = []


def _clause_text(c: Any) -> str:
    args = c.subject if c.target is None else f"{c.subject}, {c.target}"
    quantifier = f"count>={c.count}" if c.quantifier == "count" else c.quantifier
    return f"{quantifier}: {c.predicate}({args})={str(c.value).lower()}"


def make_env(
    task: TaskRef, scene: str | None = None, n_agents: int = 2, seed: int = 0, **options: Any
) -> CollabEnv:
    """A :class:`CollabEnv` for ``task``: a registered id, a spec, or the path of a task file
    (``.yaml``, anywhere; see :func:`benchmark.tasks.resolve_task`). ``scene=None`` picks one by
    seed.

    Keyword options are :class:`EnvOptions` fields; unknown ones raise ValueError.
    """
    valid = set(EnvOptions.__dataclass_fields__)
    unknown = sorted(set(options) - valid)
    if unknown:
        raise ValueError(f"unknown env option(s) {unknown}; valid options are {sorted(valid)}")
    env = CollabEnv(task, scene=scene, n_agents=n_agents, seed=seed, options=EnvOptions(**options))
    env.reset(seed=seed)
    return env
