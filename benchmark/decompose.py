"""LLM task decomposition: instruction + known objects + capabilities -> a subtask DAG.

The LLM answers with JSON (``id``, ``skill``, ``target``, ``after``, ``agent``). Parsing is
robust (code fences, prose around the JSON, single quotes) and never raises: failures come back
as a :class:`Decomposition` with ``ok=False`` and the reasons. The DAG is validated against the
scene (known ids, valid skills and agents, capabilities, acyclic ``after``). The constrained mode
chooses every subtask by scoring valid candidates, so ids and skills are valid by construction.
:func:`quality` scores a plan against the episode's checklist.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from benchmark.goals import Atom
from benchmark.llm.base import LLM, Chat, Sampling
from benchmark.metrics import balance
from benchmark.sim.catalog import type_of_id
from benchmark.skill_names import PLAN_SKILLS


@dataclass(frozen=True)
class Subtask:
    id: str
    skill: str
    target: str
    after: tuple[str, ...]
    agent: str

    @property
    def action(self) -> str:
        return f"{self.skill} {self.target}"


@dataclass
class Decomposition:
    """A plan, or why there is none. ``invalid`` counts subtasks dropped in validation."""

    ok: bool
    subtasks: list[Subtask] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    invalid: int = 0
    raw: str = ""


def build_prompt(
    template: str,
    instruction: str,
    objects: Sequence[str],
    agents: Sequence[str],
    capabilities: dict[str, Sequence[str]],
) -> Chat:
    limits = "; ".join(f"{a} cannot {', '.join(c)}" for a, c in capabilities.items() if c) or "none"
    text = template.format(
        agents=", ".join(agents),
        instruction=instruction,
        objects="\n".join(f"{o}: {type_of_id(o)}" for o in objects),
        capabilities=limits,
    )
    return [{"role": "user", "content": text}]


def extract_json(text: str) -> list | None:
    """The first JSON list (or {"subtasks": [...]}) in ``text``, tolerating fences and quotes."""
    cleaned = re.sub(r"```(?:json)?", "", text)
    for opener, closer in (("[", "]"), ("{", "}")):
        start = cleaned.find(opener)
        while start >= 0:
            depth = 0
            for k in range(start, len(cleaned)):
                depth += {opener: 1, closer: -1}.get(cleaned[k], 0)
                if depth == 0:
                    chunk = cleaned[start : k + 1]
                    for loader in (json.loads, ast.literal_eval):
                        try:
                            value = loader(chunk)
                        except (ValueError, SyntaxError, MemoryError, RecursionError):
                            continue
                        if isinstance(value, dict):
                            value = value.get("subtasks") or value.get("plan")
                        if isinstance(value, list):
                            return value
                    break
            start = cleaned.find(opener, start + 1)
    return None


def validate(
    items: list, known: set[str], agents: Sequence[str], capabilities: dict[str, Sequence[str]]
) -> Decomposition:
    """Keep the valid subtasks; report why the others were dropped."""
    out: list[Subtask] = []
    errors: list[str] = []
    for k, item in enumerate(items):
        if not isinstance(item, dict):
            errors.append(f"subtask {k} is not an object")
            continue
        sid = str(item.get("id") or f"s{k + 1}")
        skill, target, agent = item.get("skill"), item.get("target"), item.get("agent")
        after = item.get("after") or []
        if skill not in PLAN_SKILLS:
            errors.append(f"{sid}: unknown skill {skill!r}")
        elif target not in known:
            errors.append(f"{sid}: unknown target {target!r}")
        elif agent not in agents:
            errors.append(f"{sid}: unknown agent {agent!r}")
        elif skill in capabilities.get(agent, ()):
            errors.append(f"{sid}: {agent} cannot {skill}")
        elif not isinstance(after, list):
            errors.append(f"{sid}: 'after' must be a list")
        else:
            out.append(Subtask(sid, skill, target, tuple(str(a) for a in after), agent))
    ids = {s.id for s in out}
    out = [
        Subtask(s.id, s.skill, s.target, tuple(a for a in s.after if a in ids), s.agent)
        for s in out
    ]
    if _has_cycle(out):
        errors.append("the 'after' relations form a cycle")
        out = [Subtask(s.id, s.skill, s.target, (), s.agent) for s in out]
    return Decomposition(ok=bool(out), subtasks=out, errors=errors, invalid=len(items) - len(out))


def _has_cycle(subtasks: list[Subtask]) -> bool:
    deps = {s.id: set(s.after) for s in subtasks}
    done: set[str] = set()
    while deps:
        ready = [k for k, d in deps.items() if d <= done]
        if not ready:
            return True
        for k in ready:
            done.add(k)
            del deps[k]
    return False


def decompose(
    llm: LLM,
    template: str,
    instruction: str,
    objects: Sequence[str],
    agents: Sequence[str],
    capabilities: dict[str, Sequence[str]],
    sampling: Sampling | None = None,
) -> Decomposition:
    """Free-form decomposition: one generation, parsed and validated."""
    chat = build_prompt(template, instruction, objects, agents, capabilities)
    text = llm.generate([chat], sampling or Sampling(max_tokens=256))[0].text
    items = extract_json(text)
    if items is None:
        return Decomposition(ok=False, errors=["no JSON list of subtasks in the reply"], raw=text)
    result = validate(items, set(objects), agents, capabilities)
    result.raw = text
    return result


def constrained_decompose(
    llm: LLM,
    template: str,
    instruction: str,
    objects: Sequence[str],
    agents: Sequence[str],
    capabilities: dict[str, Sequence[str]],
    max_steps: int = 8,
) -> Decomposition:
    """Choose each next subtask (and its agent) by scoring every valid candidate; stop when
    ``done`` scores best. Valid ids and skills by construction."""
    relevant = [o for o in objects if type_of_id(o).lower() in instruction.lower()] or list(
        objects
    )[:20]
    candidates = [f"{s} {o}" for o in relevant for s in PLAN_SKILLS]
    chat = build_prompt(template, instruction, objects, agents, capabilities)
    chosen: list[Subtask] = []
    last: dict[str, str] = {}
    for step in range(max_steps):
        so_far = "\n".join(f"{s.agent}: {s.action}" for s in chosen)
        prompt = [
            *chat,
            {"role": "assistant", "content": "Plan so far:\n" + so_far},
            {"role": "user", "content": "Next subtask (or done):"},
        ]
        options = [c for c in candidates if c not in {s.action for s in chosen}] + ["done"]
        scores = llm.score(prompt, options)
        best = options[max(range(len(options)), key=lambda k: scores[k])]
        if best == "done":
            break
        skill = best.split(" ", 1)[0]
        able = [a for a in agents if skill not in capabilities.get(a, ())]
        if not able:
            candidates = [c for c in candidates if not c.startswith(skill + " ")]
            continue
        agent_scores = llm.score(
            [
                *prompt,
                {"role": "assistant", "content": best},
                {"role": "user", "content": "Which robot does it?"},
            ],
            able,
        )
        agent = able[max(range(len(able)), key=lambda k: agent_scores[k])]
        sid = f"s{step + 1}"
        chosen.append(
            Subtask(
                sid, skill, best.split(" ", 1)[1], (last[agent],) if agent in last else (), agent
            )
        )
        last[agent] = sid
    return Decomposition(ok=bool(chosen), subtasks=chosen, errors=[] if chosen else ["empty plan"])


def quality(
    plan: Decomposition, checklist: Sequence[Atom], agents: Sequence[str]
) -> dict[str, float]:
    """Validity (valid / proposed subtasks), atom coverage (atoms whose object or target a
    subtask acts on), parallelism (critical path / subtasks: lower is more parallel) and
    assignment balance (:func:`benchmark.metrics.balance` of the subtasks per agent)."""
    n = len(plan.subtasks)
    proposed = n + plan.invalid
    targets = {s.target for s in plan.subtasks}
    types = {type_of_id(t) for t in targets}

    def covered(atom: Atom) -> bool:
        keys = [atom.subject] + ([atom.target] if atom.target else [])
        return any(k in targets or k in types for k in keys)

    depth: dict[str, int] = {}
    for s in plan.subtasks:  # subtasks come in an order where dependencies precede
        depth[s.id] = 1 + max((depth.get(a, 0) for a in s.after), default=0)
    per_agent = [sum(s.agent == a for s in plan.subtasks) for a in agents]
    return {
        "validity": n / proposed if proposed else 0.0,
        "coverage": sum(covered(a) for a in checklist) / len(checklist) if checklist else 0.0,
        "parallelism": max(depth.values()) / n if n else 1.0,
        "balance": balance(per_agent) if per_agent else 0.0,
    }
