"""The ``heuristic`` team: decentralised scripted agents that talk.

Each agent sees only its own observations and the messages it receives. It reads the task's
goal clauses (public task information), remembers what it has seen, and:

* works on goal objects it knows about, announcing ``claim <id>`` so that others leave them alone,
  for every predicate of the goal language (:mod:`baselines.heuristic.goals`): fetches them to
  their receptacle or out of it, switches, opens or closes them, slices them with a knife it
  fetches first, cooks them in a heat source, washes or fills them under a running faucet,
  brews coffee; a goal on objects that only slicing makes (``inside(TomatoSliced, Plate)``)
  starts by slicing their source; an ``any``/``count>=k`` clause is left alone once it has
  seen enough objects satisfy it;
* lifts a heavy object with one partner (:mod:`baselines.heuristic.lift`): a ``pickup``
  refused as ``too_heavy`` makes it ask ``help lift <id>``; a teammate with free hands answers
  ``coming <id>`` (one answer per object, the lower index wins), both say ``ready <id>`` once
  they see it and lift every tick until the lifts meet; whichever of the two holds it then
  carries it to its receptacle like any other object;
* for rearrangement goals (``inside(X, @home)``) learns each object's home from the
  ``belongs`` field of the receptacles it sees or from a teammate's ``home <id> in
  <receptacleId>``, tells the others each home it sees once, and carries the objects it knows
  to be away back home; when a few observations in a row show nothing new it goes to look at
  the receptacles that could hold one (:mod:`baselines.heuristic.homes`);
* reports discoveries, ``found <id> in <receptacleId>``, and searched containers,
  ``searched <id>``, so that nobody opens the same drawer twice;
* otherwise opens closed containers it has not searched (in rearrangement also any closed
  receptacle that could hold a goal object, a toilet say), closes them again once nothing wanted
  is left inside (a tidy housemate) unless a goal wants them open, and explores;
* never repeats an action that failed for a reason that cannot change (the observation's
  ``failure.permanent``): it leaves that object alone instead;
* raises :class:`~baselines.goal_routes.UnpursuableGoal` when it sees an object of an ``all``
  (or objectId) clause whose state no skill brings about (``isDirty(Bowl)=true`` on a clean
  bowl). For ``any``/``count>=k`` clauses of that kind it only looks: objects it has not seen
  may satisfy them.

With communication off the same agents duplicate searches and chase the same objects, and a
heavy object is lifted only when two of them happen to wait at it at the same time, which is
what the comm-ablation measures.

Behaviour options (:class:`HeuristicTeam`'s keyword arguments, every agent of the team alike;
:mod:`baselines.heuristic.style`) make variants of it, partners a focal agent has not trained
with; the defaults are the team above:

* ``silent=true``: it never sends a message;
* ``chatty=true``: it reports every object it sees, and with nothing new to say repeats its
  earlier news (``found``, ``searched``, ``home``, ``done``), so it talks at every decision;
* ``explore_order=reversed|farthest``: the closed containers it searches, those in view first,
  go from the last objectId, or from the farthest from where it stands (``default``: from the
  first objectId);
* ``slow=k``: after every action other than ``wait`` it waits its next ``k`` decisions;
* ``deaf=true``: it ignores every message it receives (claims, finds, searches, homes,
  deliveries, lift requests);
* ``greedy_nearest=true``: it ignores teammates' claims and takes the nearest goal object.
"""

from __future__ import annotations

from typing import Any

from baselines.heuristic.acting import Steps
from baselines.heuristic.choosing import Chooser
from baselines.heuristic.goals import GoalReader
from baselines.heuristic.lift import LiftCrew
from baselines.heuristic.memory import Memory
from baselines.heuristic.messages import Herald
from baselines.heuristic.style import Style
from benchmark.agents import Team
from benchmark.env.views import TaskInfo
from benchmark.tasks.goals import Clause, parse_clause
from benchmark.teamkit import object_facts
from benchmark.teamkit import type_of_id as _type


class HeuristicAgent:
    """One agent: its memory (:mod:`~baselines.heuristic.memory`), its messages
    (:mod:`~baselines.heuristic.messages`), its side of the joint lift
    (:mod:`~baselines.heuristic.lift`), its choice of work (:mod:`~baselines.heuristic.choosing`)
    and the steps it takes (:mod:`~baselines.heuristic.acting`), played in its ``style``
    (:mod:`~baselines.heuristic.style`; the default: the team's usual play)."""

    def __init__(
        self, name: str, goal: list[Clause], teammates: list[str], style: Style | None = None
    ) -> None:
        self.name = name
        self.goal = goal
        self.teammates = teammates
        self.style = style = style or Style()
        self.reader = GoalReader(goal, object_facts())
        self.herald = Herald(style.silent, style.chatty)
        self.lift = LiftCrew(name, teammates, self.herald.outbox)  # heavy objects: a partner
        self.memory = Memory(name, goal, self.lift, heeds_claims=not style.greedy_nearest)
        self.chooser = Chooser(
            name, goal, self.memory, self.herald, self.reader.makes, style.greedy_nearest
        )
        self.steps = Steps(
            name, goal, self.memory, self.herald, self.lift, self.reader, style.explore_order
        )
        self.last_action = ""  # its last action, without the message
        self.waits = 0  # decisions it still waits (a slow agent, after an action)

    def observe(self, obs: dict[str, Any]) -> None:
        """Take in an observation: what is in view (reporting what a goal needs), where
        things belong, how its last action went, and the messages it received (none when
        deaf)."""
        self.memory.observe(obs)
        self.herald.report(obs["visible"], self.reader.relevant)
        self.herald.outbox.extend(self.memory.homes.see(obs))
        self._learn(obs)
        for msg in () if self.style.deaf else obs["messages"]:
            self.lift.hear(msg["sender"], msg["text"], self.memory.tick)
            self.memory.hear(msg["sender"], msg["text"])

    def _learn(self, obs: dict[str, Any]) -> None:
        """Learn from the result of its last action: a failure, a slice, a joint lift (after
        which one of the two lifters carries the object)."""
        action = self.last_action
        if not obs["last_success"]:
            self.memory.failed(obs["failure"], action, obs["holding"])
            self.lift.failed(obs["failure"]["reason"], action.partition(" ")[2])
        elif action.startswith("slice ") and action[6:] in self.memory.seen:
            self.memory.seen[action[6:]]["state"] = "sliced"
        elif action.startswith("lift "):
            oid = action[5:]
            holder = self.lift.lifted(oid, obs["holding"])
            self.memory.claim(oid, holder)
            if holder == self.name:
                self.chooser.hold(oid)

    def decide(self, obs: dict[str, Any]) -> str:
        """Its next action, with the next message waiting. An action that cannot work with
        what it holds is not taken: the object it is about is given up and it chooses again.
        A slow agent waits its next ``slow`` decisions after every action but ``wait``."""
        if self.waits:
            self.waits -= 1
            self.last_action = "wait"
            self.chooser.renew()
            return self.herald.attach("wait")
        action = self._choose(obs)
        futile = self.memory.futile
        for _ in range(len(futile)):
            if (action, obs["holding"]) not in futile:
                break
            self.memory.avoid.add(action.partition(" ")[2])
            action = self._choose(obs)
        if (action, obs["holding"]) in futile:
            action = "explore"
        self.last_action = action
        if action != "wait":
            self.waits = self.style.slow
        self.chooser.renew()
        return self.herald.attach(action)

    def _choose(self, obs: dict[str, Any]) -> str:
        """In order: its part in a joint lift; closing a container it searched; delivering
        what it holds (unless a knife for a slice to do); the first work open to it, in view
        first; searching."""
        visible = {o["objectId"]: o for o in obs["visible"]}
        holding = obs["holding"]
        lifting = self.lift.step(self.memory.tick, holding, set(visible))
        if lifting is not None:
            return lifting
        tidy = self.steps.tidy(visible)
        if tidy is not None:
            return tidy
        todo = self.chooser.ranked(self.chooser.todo(holding), visible)
        knife = _type(holding) in self.steps.tools
        if holding and not (knife and any(v == "slice" for _, _, v in todo)):
            return self.steps.deliver(holding, visible)
        for c, oid, v in todo:
            if holding and v != "slice":  # a knife in hand is for slicing
                continue
            self.chooser.take(oid)
            return self.steps.work_on(c, oid, v, visible, knife)
        self.chooser.drop()
        return self.steps.search(visible)


class HeuristicTeam(Team):
    """One :class:`HeuristicAgent` per agent; no shared state except messages.

    Args:
        silent, chatty, explore_order, slow, deaf, greedy_nearest: the behaviour options of
            every agent of the team (the module docstring; :mod:`baselines.heuristic.style`).
            The defaults are its usual play; a value an option does not take is a ValueError
            naming the option.
    """

    deterministic = True  # scripted from its observations: a verifier can re-run it

    def __init__(
        self,
        silent: bool = False,
        chatty: bool = False,
        explore_order: str = "default",
        slow: int = 0,
        deaf: bool = False,
        greedy_nearest: bool = False,
    ) -> None:
        self.style = Style(silent, chatty, explore_order, slow, deaf, greedy_nearest)
        self.agents: dict[str, HeuristicAgent] = {}

    def reset(self, agent_ids: list[str], task_info: TaskInfo) -> None:
        goal = [parse_clause(text) for text in task_info.goal]
        self.agents = {a: HeuristicAgent(a, goal, agent_ids, self.style) for a in agent_ids}

    def act(self, observations: dict[str, dict[str, Any]]) -> dict[str, str]:
        actions = {}
        for name, agent in self.agents.items():
            obs = observations[name]
            if obs["needs_decision"]:
                agent.observe(obs)
                actions[name] = agent.decide(obs)
        return actions

    def close(self) -> None:
        self.agents = {}
