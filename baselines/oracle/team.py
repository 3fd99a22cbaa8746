"""The ``oracle`` team: full observability and a central greedy planner; the upper reference.

Checklist atoms are assigned to agents greedily to minimise the makespan (longest estimated
job first, each to the agent that would finish it earliest); atoms needing a joint lift get two
agents. Each agent then works through its atoms with the reactive recipes of
:mod:`baselines.oracle.recipes`. With one agent it is the single-agent reference used for
speedup. When walks of several agents get stuck against each other, all but the lowest index
walk off (``explore``) before trying again, so that a narrow passage clears.

It reads the episode's scoring state through the read-only privileged view
(:class:`~benchmark.env.views.PrivilegedView`: checklist, satisfied atoms, heavy objects,
capabilities and a world snapshot at every decision), never the environment. A step that failed
for a reason that cannot change is never issued again: when an atom's recipe comes back to it,
the atom is given up. An atom it has no way to pursue at all (no skill brings it about, or
nothing in the scene lets its recipe reach it) raises
:class:`~baselines.goal_routes.UnpursuableGoal` naming the atom, rather than waiting out the
episode.
"""

from __future__ import annotations

from typing import Any

from baselines.oracle.recipes import Recipes, direct_skill
from benchmark.agents import Team
from benchmark.env.skills import SkillFailure
from benchmark.env.views import PrivilegedView, TaskInfo
from benchmark.skills import joint_skills
from benchmark.tasks.goals import Atom, matches
from benchmark.teamkit.privileged import World

STEP_COST = 4  # estimated ticks for each interaction in a job
GIVE_UP_AFTER = 4
# Ticks during which an agent whose walk got stuck behind others counts as stuck (about two of
# the env's give-ups, so that agents stuck against each other overlap).
STUCK_MEMORY = 16


class OracleTeam(Team):
    """Central planner over all agents (needs ``observability='full'``)."""

    deterministic = True  # scripted from the privileged view: a verifier can re-run it

    def reset(self, agent_ids: list[str], task_info: TaskInfo) -> None:
        if task_info.privileged is None:
            raise ValueError(
                "the oracle needs full observability (env option observability='full')"
            )
        if agent_ids != [f"agent_{k}" for k in range(len(agent_ids))]:
            raise ValueError(
                f"the oracle plays agent_0 to agent_<m-1> (its plan indexes the world's agents "
                f"by name), not {agent_ids}: in a mixed team, give it the first agents"
            )
        self.view: PrivilegedView = task_info.privileged
        self.checklist = self.view.checklist
        self.heavy = self.view.heavy
        self.world: World = self.view.world()
        self.satisfied = self.view.satisfied()
        self.agents = agent_ids
        self.assigned: dict[int, list[int]] = {}  # atom -> agents
        self.queue: list[list[int]] = [[] for _ in agent_ids]
        self.failures: dict[tuple[int, int], int] = {}
        self.recipes = Recipes(self.world, self.heavy, self.checklist)
        self.dropped: set[int] = set()
        self.working: dict[int, int] = {}  # agent -> the atom its last step was for
        self.last_step: dict[int, tuple[str, int]] = {}  # agent -> (its last step, what it held)
        self.futile: set[tuple[str, int]] = set()  # (step, held object) that can never work
        self.stuck_at: dict[int, int] = {}  # agent -> tick its last walk got stuck behind others

    # ------------------------------------------------------------------ assignment
    def _cell(self, index: int) -> tuple[int, int]:
        return self.recipes.cell(index)

    def _cost(self, start: tuple[int, int], atom: Atom) -> tuple[int, tuple[int, int]]:
        """Estimated ticks of ``atom`` from ``start`` and where the agent ends."""
        world = self.world
        subject = world.index_of.get(atom.subject, -1)
        if subject < 0:
            subject = next((s.index for s in world.specs if s.object_type == atom.subject), -1)
        here = self._cell(subject) if subject >= 0 else start
        cost = abs(here[0] - start[0]) + abs(here[1] - start[1]) + STEP_COST
        if atom.target and atom.predicate == "inside":
            target = self.recipes.target_receptacle(atom, here)
            if target >= 0:
                there = self._cell(target)
                cost += abs(there[0] - here[0]) + abs(there[1] - here[1]) + STEP_COST
                here = there
        return cost, here

    def _assign(self) -> None:
        world = self.world
        pending = [
            i
            for i in range(len(self.checklist))
            if not self.satisfied[i] and i not in self.assigned and i not in self.dropped
        ]
        if not pending:
            return
        load = [0.0] * len(self.agents)
        ends = [(a.i, a.j) for a in world.agents]
        for k, q in enumerate(self.queue):
            for i in q:
                c, ends[k] = self._cost(ends[k], self.checklist[i])
                load[k] += c
        jobs = sorted(pending, key=lambda i: -self._cost(ends[0], self.checklist[i])[0])
        for i in jobs:
            atom = self.checklist[i]
            able = [k for k in range(len(self.agents)) if self._able(k, atom)] or list(
                range(len(self.agents))
            )
            options = sorted(able, key=lambda k: load[k] + self._cost(ends[k], atom)[0])
            team = options[:2] if self._heavy(atom) and len(options) >= 2 else options[:1]
            for k in team:
                c, ends[k] = self._cost(ends[k], atom)
                load[k] += c
                self.queue[k].append(i)
            self.assigned[i] = team

    def _able(self, k: int, atom: Atom) -> bool:
        """Whether agent ``k``'s capabilities allow the skills ``atom`` is likely to need."""
        cannot = self.view.cannot[k]
        if not cannot:
            return True
        world = self.world
        direct = direct_skill(atom.predicate, atom.value)
        needs = {
            "inside": {"pickup", "put"},
            "isSliced": {"pickup", "slice"},
        }.get(atom.predicate, {direct} if direct else {"pickup", "put", "toggle_on"})
        if self._heavy(atom):
            needs = {*joint_skills(), "put"}
        subject = world.index_of.get(atom.subject, -1)
        target = world.index_of.get(atom.target or "", -1)
        if (
            (subject >= 0 and world.enclosed(subject))
            or atom.predicate not in ("inside", "isToggled", "isOpen")
            or (target >= 0 and world.specs[target].openable)
            or (target < 0 and any(s.openable for s in world.specs if s.object_type == atom.target))
        ):
            needs = needs | {"open"}
        return not (needs & cannot)

    def _heavy(self, atom: Atom) -> bool:
        index = self.world.index_of.get(atom.subject, -1)
        return index in self.heavy

    # ------------------------------------------------------------------ acting
    def act(self, observations: dict[str, dict[str, Any]]) -> dict[str, str]:
        self.world, self.satisfied = self.view.world(), self.view.satisfied()
        self.recipes.look(self.world)
        for i, ok in enumerate(self.satisfied):
            if ok and i in self.assigned:
                for k in self.assigned.pop(i):
                    self.queue[k] = [j for j in self.queue[k] if j != i]
        deciding = [k for k, a in enumerate(self.agents) if observations[a]["needs_decision"]]
        tick = self.world.tick
        for k in deciding:
            obs = observations[self.agents[k]]
            if not obs["last_success"]:
                self._failed(k, obs["failure"])
                if obs["failure"]["reason"] == SkillFailure.STUCK:
                    self.stuck_at[k] = tick
        self._assign()
        actions = {}
        for k in deciding:
            step = "explore" if self._backs_off(k, tick) else self._next(k, deciding) or "wait"
            self.last_step[k] = (step, self.world.agents[k].held)
            actions[self.agents[k]] = step
        return actions

    def _backs_off(self, k: int, tick: int) -> bool:
        """Whether agent ``k``, whose walk just got stuck, walks off instead of trying again:
        it does when an agent of lower index got stuck lately too. Agents stuck against each
        other in a narrow passage (one carrying east, one heading west, an idle one between
        them) would otherwise try again and again forever; the lowest index keeps its way."""
        if self.stuck_at.get(k) != tick:
            return False
        return any(j < k and tick - t <= STUCK_MEMORY for j, t in self.stuck_at.items() if j != k)

    def _failed(self, k: int, failure: dict[str, Any]) -> None:
        """Agent ``k``'s last step failed: remember it when it can never work; give its atom
        up after repeated failures otherwise."""
        if failure["permanent"] and k in self.last_step:
            self.futile.add(self.last_step[k])
            return
        i = self.working.get(k, -1)
        if i < 0 or i in self.dropped or i not in self.assigned:
            return
        self.failures[(k, i)] = self.failures.get((k, i), 0) + 1
        if self.failures[(k, i)] > GIVE_UP_AFTER * 3:
            self._drop(i)

    def _drop(self, i: int) -> None:
        self.dropped.add(i)
        for k in self.assigned.pop(i, []):
            self.queue[k] = [j for j in self.queue[k] if j != i]

    def _next(self, k: int, deciding: list[int]) -> str | None:
        cannot = self.view.cannot[k]
        self.working.pop(k, None)
        while self.queue[k]:
            i = next((j for j in self.queue[k] if not self._closes_too_soon(j)), -1)
            if i < 0:
                return self._make_room(k)
            if self.satisfied[i]:
                self.queue[k].remove(i)
                continue
            step = self.recipes.step(k, self.checklist[i], self.assigned.get(i, [k]), deciding)
            if step is not None and step.split()[0] in cannot:
                self._hand_back(k, i)
                continue
            if (step, self.world.agents[k].held) in self.futile:
                step = None
            if step is not None:
                self.working[k] = i
                return step
            self._drop(i)
        held = self.world.agents[k].held
        if held >= 0 and not all(self.satisfied):
            return self.recipes.free_hands(k) or "wait"
        if all(self.satisfied):
            return "done"
        return self._make_room(k)

    def _closes_too_soon(self, i: int) -> bool:
        """Whether atom ``i`` closes a receptacle that another atom still to be done puts
        something in (closing the fridge while a teammate carries food to it would shut it
        in front of them, again and again)."""
        atom = self.checklist[i]
        index = self.world.index_of.get(atom.subject, -1)
        if atom.predicate != "isOpen" or atom.value or index < 0:
            return False
        return any(
            not done
            and j not in self.dropped
            and other.predicate == "inside"
            and other.value
            and other.target is not None
            and matches(self.world, index, other.target)
            for j, (other, done) in enumerate(zip(self.checklist, self.satisfied, strict=True))
        )

    def _hand_back(self, k: int, i: int) -> None:
        """Agent ``k`` cannot do atom ``i``: give it to the others."""
        self.queue[k] = [j for j in self.queue[k] if j != i]
        team = [j for j in self.assigned.pop(i, []) if j != k]
        others = [j for j in range(len(self.agents)) if j != k and j not in team]
        if others or team:
            helper = (team or others)[0]
            self.queue[helper].append(i)
            self.assigned[i] = [helper, *team[1:]] if team else [helper]
        else:
            self._drop(i)

    def _make_room(self, k: int) -> str:
        """An idle agent near a busy one walks off to look around, so it blocks nobody."""
        world = self.world
        a = world.agents[k]
        for j, b in enumerate(world.agents):
            # An agent of another team in a mixed team (j past this team's own) may be busy.
            busy = j >= len(self.queue) or self.queue[j]
            if j != k and busy and abs(a.i - b.i) + abs(a.j - b.j) <= 3:
                return "explore"
        return "wait"
