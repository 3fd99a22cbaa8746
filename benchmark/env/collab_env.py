"""``CollabEnv``: a PettingZoo ``ParallelEnv`` of collaborative household tasks.

Time runs in ticks; each agent runs one skill at a time over several ticks, all agents at once
(the simulator's ``multi_step``). ``step`` starts the skills of the agents that need a decision
(:mod:`benchmark.env.skills`), runs ticks until at least one agent needs a decision again or the
episode ends (on success, at a limit, or when every agent chose ``done``), delivers the messages
of the agents about to decide, and returns their observations. The same-tick coordination rules
are in :mod:`benchmark.env.traffic`, the reward in :mod:`benchmark.env.rewards`, the trace in
:mod:`benchmark.env.trace`.
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable
from dataclasses import asdict, fields
from typing import Any, ClassVar

from pettingzoo import ParallelEnv

from benchmark.env import observation, skills
from benchmark.env.homes import misplaced, shows_homes
from benchmark.env.messaging import OBJECT_ID, Message, Postbox
from benchmark.env.observation import LastAction
from benchmark.env.options import EnvOptions
from benchmark.env.rewards import tick_rewards
from benchmark.env.skills import Skill
from benchmark.env.trace import TraceRecorder
from benchmark.env.traffic import joint_lifts, right_of_way, step_aside
from benchmark.env.views import PrivilegedView, TaskInfo, task_info
from benchmark.sim.world import ActionResult, World
from benchmark.tasks.episode import Episode, check_episode_args, make_episode
from benchmark.tasks.goals import holds
from benchmark.tasks.spec import TaskRef, resolve_task

TickHook = Callable[[World], None]


class UnknownOptionWarning(UserWarning):
    """``reset`` was given an option it does not know; the option was ignored."""


# What ``reset(options=...)`` takes: a scene, and any EnvOptions field for one episode.
RESET_OPTIONS = ("scene", *sorted(f.name for f in fields(EnvOptions)))


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
        self.base_options = options or EnvOptions()
        self.options = self.base_options
        check_episode_args(self.task, scene, n_agents, self.base_options.strict_agents)
        self.possible_agents = [f"agent_{k}" for k in range(n_agents)]
        self.agents: list[str] = []
        self.render_mode = "rgb_array"
        self.episode: Episode | None = None

    @functools.cache  # noqa: B019  (PettingZoo wants the same object back)
    def observation_space(self, agent: str):
        return observation.observation_space(homes=shows_homes(self.task))

    @functools.cache  # noqa: B019
    def action_space(self, agent: str):
        return observation.action_space()

    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None):
        """Start an episode.

        Args:
            seed: the episode seed, kept for later resets (None: the last one).
            options: overrides for this episode only: ``scene`` (a scene name, or None to choose
                one by seed) and any :class:`EnvOptions` field, e.g. ``{"comm": False}``.
                Unknown keys are ignored with an :class:`UnknownOptionWarning` naming the valid
                ones (PettingZoo's API test passes a placeholder option); a bad value of a known
                one raises ValueError.
        Returns:
            (observations, infos) per agent; every agent needs a decision.
        """
        if seed is not None:
            self.seed = seed
        overrides = dict(options or {})
        unknown = sorted(map(str, set(overrides) - set(RESET_OPTIONS)))
        if unknown:
            warnings.warn(
                f"reset: unknown option(s) {unknown} ignored; valid options are "
                f"{list(RESET_OPTIONS)}",
                UnknownOptionWarning,
                stacklevel=2,
            )
            overrides = {k: v for k, v in overrides.items() if k in RESET_OPTIONS}
        scene = overrides.pop("scene", self.fixed_scene)
        self.options = o = self.base_options.updated(**overrides)
        self.episode = ep = make_episode(
            self.task, scene, self.n_agents, self.seed, split=o.split, strict_agents=o.strict_agents
        )
        self.world, self.controller = ep.world, ep.controller
        self.agents = list(self.possible_agents)
        self.instruction = ep.instructions[o.ambiguity]
        self.tick = 0
        self.skills: list[Skill | None] = [None] * self.n_agents
        self.finished = [False] * self.n_agents
        self.decisions = [0] * self.n_agents
        self.last = [LastAction()] * self.n_agents
        self.postbox = Postbox(self.possible_agents)
        self.visited = [{(a.i, a.j)} for a in self.world.agents]
        named = set(OBJECT_ID.findall(self.instruction))
        self.known: list[set[str]] = [set(named) for _ in range(self.n_agents)]
        self.satisfied = [holds(self.world, a) for a in ep.checklist]
        caps = [self.task.capability(k) for k in range(self.n_agents)]
        self.contexts = skills.agent_contexts(
            self.world,
            self.possible_agents,
            o.action_level,
            [(c.name, c.cannot) for c in caps],
            None if o.observability == "full" else self.known,
            ep.heavy,
            self.visited,
        )
        self._learn_visible()
        self.recorder = TraceRecorder(ep, asdict(o), self.instruction, self.satisfied)
        return self._observations(self._deliver()), self._infos()

    def step(self, actions: dict[str, Any], on_tick: TickHook | None = None, observe: bool = True):
        """Start the deciding agents' skills and run ticks until someone must decide again.

        Args:
            actions: agent name -> action text for the agents that need a decision; other
                entries are ignored, and a missing or unparseable one is a failed action.
            on_tick: called with the world after every tick (to draw frames, say); it must
                not change the world.
            observe: build the observations; replays, which read none, skip them (messages
                are still delivered and objects still become known, so play is the same).
        Returns:
            PettingZoo's (observations, rewards, terminations, truncations, infos) for the agents
            alive before the step. Rewards add up over the ticks the step ran. When the episode
            ends every info holds its ``trace``.
        """
        self._require_episode("step")
        if not self.agents:
            raise RuntimeError("step() called on a finished episode; call reset()")
        recorded = {}
        for k in [k for k in range(self.n_agents) if self._needs_decision(k)]:
            name = self.possible_agents[k]
            text = actions.get(name, "") if isinstance(actions, dict) else ""
            recorded[name] = text if isinstance(text, str) else repr(text)
            self._decide(k, text)
        self.recorder.decisions(self.tick, recorded)
        rewards = dict.fromkeys(self.possible_agents, 0.0)
        while True:
            for name, r in zip(self.possible_agents, self._tick(on_tick), strict=True):
                rewards[name] += r
            if self._over() or any(self._needs_decision(k) for k in range(self.n_agents)):
                break
        ended = all(self.satisfied) or all(self.finished)
        truncated = not ended and self._over()
        inboxes = self._deliver()
        obs, infos = (self._observations(inboxes) if observe else {}), self._infos()
        terms = dict.fromkeys(self.agents, ended)
        truncs = dict.fromkeys(self.agents, truncated)
        rews = {a: rewards[a] for a in self.agents}
        if ended or truncated:
            names = self.possible_agents
            self.recorder.finish(
                self.postbox.log,
                self.satisfied,
                self.tick,
                dict(zip(names, self.decisions, strict=True)),
                dict(zip(names, self.finished, strict=True)),
            )
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

    def _learn_visible(self) -> None:
        if self.options.observability == "partial":
            observation.learn_visible(self.world, self.known)

    def _needs_decision(self, k: int) -> bool:
        skill = self.skills[k]
        return not self.finished[k] and (skill is None or skill.finished)

    def _decide(self, k: int, text: Any) -> None:
        """Send agent k's message, then start its skill (or a rejected one saying why not)."""
        self.decisions[k] += 1
        name = self.possible_agents[k]
        call, skill = skills.parse_decision(
            text, self.options.action_level, lambda to: self.postbox.recipient_problem(name, to)
        )
        delay, o = 0, self.options
        if call is not None:
            if call.say is not None:  # talking first: the message is posted now
                self.postbox.send(self.tick, name, call.say.to, call.say.text, o.token_cap, o.comm)
                delay = o.message_cost if o.comm else 0
            skill = skills.build_skill(call, self.contexts[k])
        assert skill is not None
        if skill.name == "done" and not skill.rejected:
            self.finished[k] = True
        skill.delay = delay
        self.skills[k] = skill
        shown = text if isinstance(text, str) else repr(text)
        self.last[k] = LastAction.of(shown, skill, self.possible_agents)
        skill.record = self.recorder.skill(
            self.tick, name, skill.name, skill.target, accepted=not skill.rejected
        )

    def _tick(self, on_tick: TickHook | None) -> list[float]:
        """Run one tick for every agent; returns this tick's reward per agent."""
        world, checklist = self.world, self.episode.checklist
        primitives, lifters = skills.tick_actions(world, self.skills, self.finished)
        lift_failures = joint_lifts(world, self.episode.heavy, lifters, primitives)
        aside = step_aside(world, self.skills, self.finished, primitives)
        held_back = right_of_way(self.skills, primitives, aside)
        results: list[ActionResult | None] = [None] * self.n_agents
        gained = [0] * self.n_agents
        was_complete = all(self.satisfied)

        def after(k: int, result: ActionResult) -> None:
            # Credit every atom change to the agent whose action caused it.
            results[k] = result
            now = [holds(world, a) for a in checklist]
            for i, (old, new) in enumerate(zip(self.satisfied, now, strict=True)):
                if old != new:
                    gained[k] += 1 if new else -1
                    self.recorder.atom(self.tick, self.possible_agents[k], i, new)
            self.satisfied = now

        self.controller.multi_step(primitives, after_each=after)
        blocked_before = [s.blocked if s is not None else 0 for s in self.skills]
        self._finish_skills(results, lift_failures)
        blocked = [
            s is not None and s.blocked > b
            for s, b in zip(self.skills, blocked_before, strict=True)
        ]
        self.recorder.tick(self.tick, primitives, results, self.skills, blocked, held_back)
        self.tick += 1
        if on_tick is not None:
            on_tick(world)
        for k, a in enumerate(world.agents):
            self.visited[k].add((a.i, a.j))
        self._learn_visible()
        o = self.options
        completed = all(self.satisfied) and not was_complete
        return tick_rewards(gained, len(checklist), o.reward_sharing, o.success_bonus, completed)

    def _finish_skills(
        self, results: list[ActionResult | None], lift_failures: dict[int, tuple[str, str]]
    ) -> None:
        for k, skill in enumerate(self.skills):
            if skill is None or skill.finished or self.finished[k]:
                continue
            skill.advance(self.world, k, results[k], lift_failures.get(k))
            if skill.finished:
                self.last[k] = LastAction.of(self.last[k].text, skill, self.possible_agents)
                if skill.record is not None:
                    skill.record.update(
                        end=self.tick, success=skill.success, reason=skill.reason or None
                    )

    def _deliver(self) -> dict[str, list[Message]]:
        """Deliver the messages of the agents about to decide; the objects the messages name
        become known to their recipients."""
        deciding = [a for k, a in enumerate(self.possible_agents) if self._needs_decision(k)]
        inboxes = self.postbox.deliver(deciding)
        for k, name in enumerate(self.possible_agents):
            for m in inboxes[name]:
                self.known[k].update(OBJECT_ID.findall(m.text))
        return inboxes

    def _deciding(self) -> list[bool]:
        return [self._needs_decision(k) for k in range(self.n_agents)]

    def _observations(self, inboxes: dict[str, list[Message]]) -> dict[str, dict]:
        agents, deciding = self.possible_agents, self._deciding()
        # The goal configuration (rearrangement tasks only): see benchmark.env.homes.
        belongs = misplaced(self.world, self.episode.homes) if shows_homes(self.task) else None
        return observation.build_all(
            self.world, agents, self.instruction, self.tick, deciding, inboxes, self.last, belongs
        )

    def _infos(self) -> dict[str, dict]:
        return observation.infos(self.possible_agents, self._deciding(), self.tick, self.satisfied)

    def _require_episode(self, method: str) -> Episode:
        if self.episode is None:
            raise RuntimeError(f"{method}() before the first reset(): call env.reset(seed=...)")
        return self.episode

    def record_members(self, members: dict[str, str]) -> None:
        """Record in the trace which member of a mixed team plays each agent (before the first
        step; every agent named once)."""
        self._require_episode("record_members")
        if sorted(members) != sorted(self.possible_agents):
            raise ValueError(
                f"members name agents {sorted(members)}; the episode's agents are "
                f"{list(self.possible_agents)}"
            )
        if self.tick:
            raise ValueError("members are recorded before the first step")
        self.recorder.members({a: str(members[a]) for a in self.possible_agents})

    def task_info(self) -> TaskInfo:
        """What teams get at reset; under full observability it holds the privileged view."""
        ep, view = self._require_episode("task_info"), None
        if self.options.observability == "full":
            cannot = tuple(self.task.capability(k).cannot for k in range(self.n_agents))
            view = PrivilegedView(
                tuple(ep.checklist),
                ep.heavy,
                cannot,
                satisfied=lambda: tuple(self.satisfied),
                world=lambda: self.world,
                tick=lambda: self.tick,
            )
        agents = self.possible_agents
        return task_info(
            self.task, self.seed, self.options, self.instruction, agents, view, scene=ep.scene
        )

    def render(self):
        from benchmark.sim.render import top_down

        self._require_episode("render")
        return top_down(self.world)

    def close(self) -> None:
        self.agents = []


def make_env(
    task: TaskRef, scene: str | None = None, n_agents: int = 2, seed: int = 0, **options: Any
) -> CollabEnv:
    """A :class:`CollabEnv` for ``task``: a registered id, a spec, or the path of a task file
    (``.yaml``, anywhere; see :func:`benchmark.tasks.spec.resolve_task`). ``scene=None``
    picks one by seed. Keyword options are :class:`EnvOptions` fields; unknown ones raise
    ValueError. As PettingZoo has it, the episode starts at ``env.reset(seed=...)`` (``seed``
    here is the one a reset without a seed uses), not here."""
    return CollabEnv(
        task, scene=scene, n_agents=n_agents, seed=seed, options=EnvOptions().updated(**options)
    )
