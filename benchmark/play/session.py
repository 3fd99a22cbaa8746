"""One episode that people play: some agents are seats for people, the others AI partners.

The team is a :class:`~benchmark.agents.mixed.MixedTeam`: the human seats are one member,
:class:`~benchmark.play.human.HumanMember` (labelled ``human``), and the partners are members
built with :func:`~benchmark.agents.make_team` (``partners="heuristic"``, or a list of member
mappings as ``baseline=mixed`` takes them, for the agents that are not seats). The episode runs
on the environment's own tick model: whenever the agents that need a decision include seats,
it waits until every one of those seats has posted; then the partners decide on the same
observations and the environment steps, until a seat must decide again or the episode ends.

The trace is the environment's ordinary trace, its ``members`` naming ``human`` for the seats,
so it replays with :func:`benchmark.env.replay.replay`. With ``out_dir`` the finished episode is
written as a run directory writes it: ``traces/<key>.json`` and a row of
:func:`~benchmark.metrics.episode.episode_metrics` in ``episodes.jsonl``.

:meth:`PlaySession.from_challenge` plays an episode of a leaderboard challenge of a suite people
play (``focal: human``, the human-in-the-loop track): a person on ``agent_0``, the partner the
challenge assigns on the other agents. Its ``out_dir`` becomes a run directory as
``python -m benchmark.run`` writes one (``config.yaml``, ``manifest.json``, rows in the
runner's shape), which ``python -m leaderboard.client.pack`` packs once every episode is played.
"""

from __future__ import annotations

import re
import secrets
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from benchmark.agents.mixed import MixedTeam
from benchmark.env import make_env
from benchmark.env.messaging import OBJECT_ID
from benchmark.llm.resources import LLMPool, LLMResources
from benchmark.metrics.episode import episode_metrics
from benchmark.play.choices import Choice, FormError, StaleForm, seat_skills, valid_actions
from benchmark.play.human import LABEL, HumanMember
from benchmark.play.view import SightMap, map_png
from benchmark.results.challenge import Challenge, Partner, load_challenge
from benchmark.results.run_dir import RunDirectory
from benchmark.results.suite import EpisodeRef, Suite, episode_key, load_suite, suite_episodes

HUMAN_TEAM = "benchmark.play.human:HumanMember"


def partner_members(partners: str | Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The partners as mixed-team members: a team name plays every agent that is not a seat;
    a list of member mappings is taken as it is."""
    if isinstance(partners, str):
        if not partners:
            raise ValueError("partners: name a team (heuristic, oracle, ...) or list members")
        return [{"baseline": partners, "label": partners}]
    if not isinstance(partners, Sequence) or not partners:
        raise ValueError(f"partners must be a team name or a list of members, got {partners!r}")
    return [dict(m) for m in partners]


@dataclass(frozen=True)
class Answer:
    """The challenge episode a session plays: the challenge file, its suite, the episode."""

    path: Path
    challenge: Challenge
    suite: Suite
    ref: EpisodeRef

    @property
    def partner(self) -> Partner:
        """The partner the challenge assigns to the episode."""
        ref = self.ref
        partner = self.challenge.partner_of(ref.task, ref.scene, ref.seed, ref.n_agents)
        if partner is None:
            raise ValueError(f"challenge {self.challenge.id} assigns no partner to {ref}")
        return partner

    def config(self, options: Mapping[str, Any]) -> dict[str, Any]:
        """The run directory's ``config.yaml``: what packing it reads."""
        return {
            "suite": {"name": self.suite.name, "version": self.suite.version},
            "baseline": {"name": LABEL},
            "challenge": str(self.path),
            "env": dict(options),
        }


@dataclass
class Seat:
    """A person's agent: its name and index, the token of its page, the messages it received
    (tick, sender, text, truncated) and the objectIds it has seen or been told of."""

    agent: str
    index: int
    token: str
    messages: list[tuple[int, str, str, bool]] = field(default_factory=list)
    seen: set[str] = field(default_factory=set)


class PlaySession:
    """One episode of ``task`` with people on the ``humans`` seats and ``partners`` on the
    other agents; env ``options`` are :class:`~benchmark.env.options.EnvOptions` fields."""

    def __init__(
        self,
        task: str,
        n_agents: int = 2,
        seed: int = 0,
        humans: Sequence[str] = ("agent_0",),
        partners: str | Sequence[Mapping[str, Any]] = "heuristic",
        scene: str | None = None,
        out_dir: str | Path | None = None,
        answer: Answer | None = None,
        **options: Any,
    ) -> None:
        self.answer, self.options = answer, dict(options)
        self.env = env = make_env(task, scene=scene, n_agents=n_agents, seed=seed, **options)
        if env.options.action_level != "skill":
            raise ValueError("people play at action_level=skill (the skill grammar) only")
        humans = list(dict.fromkeys(humans))
        strangers = [h for h in humans if h not in env.possible_agents]
        if not humans or strangers:
            raise ValueError(
                f"humans must name agents of the episode, {env.possible_agents}; got {humans}"
            )
        members = [{"baseline": HUMAN_TEAM, "agents": humans, "label": LABEL}]
        if len(humans) < n_agents:
            members += partner_members(partners)
        self.team = MixedTeam(members)
        self.human: HumanMember = self.team.teams[0]  # type: ignore[assignment]
        self.team.bind(LLMResources(llms=LLMPool()))
        self.seed, self.out_dir = seed, Path(out_dir) if out_dir is not None else None
        self.obs, _ = env.reset(seed=seed)
        self.team.reset(list(env.possible_agents), env.task_info())
        env.record_members(self.team.members())
        self.info = env.task_info()
        named = set(OBJECT_ID.findall(env.instruction))
        self.seats = {
            a: Seat(a, env.possible_agents.index(a), secrets.token_urlsafe(12), seen=set(named))
            for a in humans
        }
        self.sight = {a: SightMap(env.world) for a in humans}
        self.lock = threading.Lock()
        self.trace: dict[str, Any] | None = None
        self.row: dict[str, Any] | None = None
        self.trace_path: Path | None = None
        self.on_finish: Callable[[PlaySession], None] | None = None  # called once it has ended
        self._take_in(self.obs)
        self._advance()

    @classmethod
    def from_challenge(
        cls, path: str | Path, episode: int = 0, out_dir: str | Path | None = None, **options: Any
    ) -> PlaySession:
        """Episode ``episode`` (from 0, in the challenge's order) of the challenge file
        ``path``, of a suite people play: a person on ``agent_0``, the assigned partner on the
        other agents. ValueError when the suite is not one people play, the episode is not the
        challenge's, or ``out_dir`` already holds it."""
        path = Path(path).resolve()
        challenge = load_challenge(path)
        suite = load_suite(challenge.suite)
        if suite.focal != "human":
            raise ValueError(
                f"challenge {challenge.id} is for suite {suite.name}, which people do not play; "
                "run it with python -m benchmark.run"
            )
        refs = suite_episodes(suite, bool(options.get("comm", True)), challenge, references=False)
        if not 0 <= episode < len(refs):
            raise ValueError(
                f"episode: {episode} is not one of the challenge's episodes, 0 to {len(refs) - 1}"
            )
        ref = refs[episode]
        if out_dir is not None and ref.key(LABEL) in RunDirectory(out_dir).done():
            raise ValueError(f"episode {episode} ({ref.key(LABEL)}) was played into {out_dir}")
        answer = Answer(path, challenge, suite, ref)
        return cls(
            ref.task,
            n_agents=ref.n_agents,
            seed=ref.seed,
            humans=["agent_0"],
            partners=[answer.partner.member()],
            scene=ref.scene,
            out_dir=out_dir,
            answer=answer,
            **{**options, "split": ref.split, "challenge": challenge.id},
        )

    # ---------------------------------------------------------------- state of the episode
    @property
    def tick(self) -> int:
        return self.env.tick

    @property
    def over(self) -> bool:
        return self.trace is not None

    def seat(self, token: str) -> Seat:
        """The seat whose page token is ``token``; KeyError when there is none."""
        for seat in self.seats.values():
            if secrets.compare_digest(seat.token, token):
                return seat
        raise KeyError("no seat has this token")

    def deciding(self, agent: str) -> bool:
        """Whether the seat's agent must decide now and has not posted yet."""
        return (
            not self.over
            and bool(self.obs[agent]["needs_decision"])
            and agent not in self.human.posted
        )

    def waiting_for(self) -> list[str]:
        """The seats the episode waits for now."""
        return [a for a in self.seats if self.deciding(a)]

    def observation(self, agent: str) -> dict[str, Any]:
        """The seat's latest observation (what the environment gave it last)."""
        return self.obs[agent]

    def known(self, agent: str) -> list[str]:
        """The objectIds the seat's agent knows, sorted: seen or told of (under partial
        observability the environment's own record, which also holds what it glimpsed while a
        skill ran)."""
        seat = self.seats[agent]
        ids = set(seat.seen)
        if self.env.options.observability == "partial":
            ids |= self.env.known[seat.index]
        return sorted(ids)

    def choice(self, agent: str) -> Choice:
        """What the seat may post now (see :mod:`benchmark.play.choices`)."""
        obs = self.obs[agent]
        skills = seat_skills(self.info.cannot.get(agent, ()), bool(obs["holding"]))
        others = [a for a in self.env.possible_agents if a != agent]
        recipients = ("all", *others) if self.env.options.comm else ()
        return Choice(
            tuple(valid_actions(skills, self.known(agent))),
            recipients,
            self.env.options.token_cap,
        )

    def map_png(self, agent: str) -> bytes:
        """The seat's top-down map (see :mod:`benchmark.play.view`)."""
        with self.lock:
            seat, full = self.seats[agent], self.env.options.observability == "full"
            cells = self.sight[agent].update(self.env.visited[seat.index])
            return map_png(self.env.world, seat.index, full, set(cells), set(self.known(agent)))

    # ---------------------------------------------------------------- playing
    def post(self, agent: str, form: Mapping[str, str]) -> str:
        """Take a seat's decision form (``tick``, ``action``, ``to``, ``message``); the action
        line it decided. :class:`StaleForm` says why a form came at the wrong time (the episode
        is over, the form is for another tick, no decision is due), and :class:`FormError`
        what is wrong with the form (no tick, a decision that is not valid)."""
        with self.lock:
            if self.over:
                raise StaleForm("the episode is over: no more decisions are taken")
            raw = str(form.get("tick", "")).strip()
            if not re.fullmatch(r"[0-9]{1,9}", raw):
                raise FormError(f"the form has no valid tick ({raw!r}): reload the page")
            if int(raw) != self.tick:
                raise StaleForm(
                    f"this form is for tick {int(raw)}, but the episode is at tick {self.tick} "
                    "now: the form was stale, choose again"
                )
            if agent in self.human.posted:
                raise StaleForm(f"you already decided at tick {self.tick}: wait for the others")
            if not self.obs[agent]["needs_decision"]:
                raise StaleForm("your agent is still busy with its last action: nothing to decide")
            decision = self.choice(agent).decision(form)
            self.human.posted[agent] = decision
            self._advance()
            return decision

    def _advance(self) -> None:
        """Step while no seat must decide; stop when one must, or when the episode ends."""
        env = self.env
        while env.agents:
            if self.waiting_for():
                return
            actions = self.team.act(self.obs)
            self.obs, rewards, _, _, infos = env.step(actions)
            self.team.rewarded(rewards)
            self.human.posted = {}
            self._take_in(self.obs)
            if not env.agents:
                self._finish(next(iter(infos.values()))["trace"])

    def _take_in(self, observations: dict[str, dict[str, Any]]) -> None:
        tick = self.tick
        for agent, seat in self.seats.items():
            obs = observations[agent]
            seat.seen.update(o["objectId"] for o in obs["visible"])
            if obs["holding"]:
                seat.seen.add(obs["holding"])
            for m in obs["messages"]:
                seat.messages.append((tick, m["sender"], m["text"], bool(m["truncated"])))
                seat.seen.update(OBJECT_ID.findall(m["text"]))

    def _finish(self, trace: dict[str, Any]) -> None:
        self.trace = trace
        self.team.close()
        if self.answer is not None:
            self._finish_answer(trace, self.answer)
        else:
            self._finish_free(trace)
        if self.on_finish is not None:
            self.on_finish(self)

    def _finish_answer(self, trace: dict[str, Any], answer: Answer) -> None:
        """The row of a challenge episode, in the runner's shape, into a run directory."""
        ref, task = answer.ref, self.env.task
        level = task.source.level if task.source is not None else None
        self.row = {
            "key": ref.key(LABEL),
            "baseline": LABEL,
            "suite": answer.suite.name,
            "suite_version": answer.suite.version,
            "task": ref.task,
            "family": task.family,
            **({"level": level} if level is not None else {}),
            "task_version": task.version,
            "split": ref.split,
            "scene": trace["config"]["scene"],
            "seed": ref.seed,
            "n_agents": ref.n_agents,
            "comm": ref.comm,
            "reference": False,
            "status": "ok",
            **episode_metrics(trace),
            "trace_hash": trace["trace_hash"],
            "members": trace["members"],
            "partner": answer.partner.label,
        }
        if self.out_dir is not None:
            run = RunDirectory(self.out_dir)
            config = answer.config(self.options)
            (run.root / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
            run.write_manifest(config, answer.suite.version)
            self.row = run.record(self.row, trace)
            self.trace_path = run.root / self.row["trace_path"]

    def _finish_free(self, trace: dict[str, Any]) -> None:
        cfg = trace["config"]
        key = episode_key(
            LABEL,
            cfg["task"],
            cfg["options"].get("split") or "play",
            cfg["scene"],
            cfg["n_agents"],
            self.seed,
            bool(cfg["options"]["comm"]),
            False,
        )
        key += "/" + secrets.token_hex(4)  # several sessions may write to one directory
        self.row = {
            "key": key,
            "task": cfg["task"],
            "family": self.env.task.family,
            "seed": self.seed,
            "n_agents": cfg["n_agents"],
            "comm": bool(cfg["options"]["comm"]),
            "scene": cfg["scene"],
            "baseline": LABEL,
            "status": "ok",
            **episode_metrics(trace),
            "trace_hash": trace["trace_hash"],
            "members": trace["members"],
        }
        if self.out_dir is not None:
            run = RunDirectory(self.out_dir)
            self.row = run.record(self.row, trace)
            self.trace_path = run.root / self.row["trace_path"]
