"""LLM task decomposition: instruction + known objects + capabilities -> a subtask DAG.

The LLM answers with JSON (``id``, ``agent``, ``skill``, ``target``, ``after``). Parsing is
robust (code fences, prose around the JSON, single quotes, a list cut short by the token limit)
and never raises: failures come back as a :class:`Decomposition` with ``ok=False`` and the
reasons. The DAG is validated against the scene (known ids, valid skills and agents,
capabilities, acyclic ``after``).

Two decodings are valid by construction. :func:`grammar_decompose` decodes the whole plan in one
generation under :func:`plan_schema` (known ids, each agent's permitted skills, ``after`` naming
earlier subtasks only), on every backend. :func:`constrained_decompose` instead chooses every
subtask by scoring valid candidates (one ``score`` call per step and candidate list).
:func:`quality` scores a plan against the episode's checklist.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from benchmark.llm.base import LLM, Chat, Constraint, ConstraintError, Sampling
from benchmark.metrics.episode import balance
from benchmark.sim.catalog import type_of_id
from benchmark.skills import plan_menu, plan_skills
from benchmark.tasks.goals import Atom


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
    """A plan, or why there is none. ``invalid`` counts subtasks dropped in validation;
    ``constrained``: the reply was decoded under the plan schema; ``truncated``: the reply hit
    the token limit (only its complete subtasks were kept)."""

    ok: bool
    subtasks: list[Subtask] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    invalid: int = 0
    raw: str = ""
    constrained: bool = False
    truncated: bool = False


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
        skills=plan_menu(),
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


def complete_items(text: str) -> list | None:
    """The complete objects of a JSON list cut short (``[{...}, {...}, {"id": "s3", ...``), or
    None when ``text`` holds no list of objects."""
    start = text.find("[")
    if start < 0:
        return None
    decoder, items, pos = json.JSONDecoder(), [], start + 1
    while True:
        while pos < len(text) and text[pos] in " \t\r\n,":
            pos += 1
        if pos >= len(text) or text[pos] != "{":
            break
        try:
            value, pos = decoder.raw_decode(text, pos)
        except json.JSONDecodeError:
            break
        items.append(value)
    return items or None


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
        if skill not in plan_skills():
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
    gen = llm.generate([chat], sampling or Sampling(max_tokens=256))[0]
    result = _parse_plan(gen.text, objects, agents, capabilities)
    result.truncated = gen.finish_reason == "length"
    return result


def plan_schema(
    objects: Sequence[str],
    agents: Sequence[str],
    capabilities: dict[str, Sequence[str]],
    max_subtasks: int = 8,
    max_after: int = 3,
) -> dict:
    """The JSON schema of a plan: a list of 1 to ``max_subtasks`` subtasks, the k-th being
    ``{"id": "s<k>", "agent": a, "skill": s, "target": t, "after": [...]}`` with ``s`` a plan
    skill ``a`` may use, ``t`` one of ``objects`` and ``after`` up to ``max_after`` ids of earlier
    subtasks (so the plan is acyclic by construction). Raises
    :class:`~benchmark.llm.base.ConstraintError` when no plan is possible (no object, or no
    agent that may use a plan skill)."""
    if not objects:
        raise ConstraintError("plan schema: no known objects to plan over")
    if max_subtasks < 1:
        raise ConstraintError(f"plan schema: max_subtasks={max_subtasks} must be at least 1")
    able = {a: [s for s in plan_skills() if s not in capabilities.get(a, ())] for a in agents}
    able = {a: skills for a, skills in able.items() if skills}
    if not able:
        raise ConstraintError(f"plan schema: none of {list(agents)} may use a plan skill")
    # Agents with the same skills share one branch (a smaller grammar).
    groups: dict[tuple[str, ...], list[str]] = {}
    for a, skills in able.items():
        groups.setdefault(tuple(skills), []).append(a)

    def item(k: int) -> dict:
        earlier = [f"s{j}" for j in range(1, k)]
        after = (
            {"type": "array", "items": {"enum": earlier}, "maxItems": min(max_after, k - 1)}
            if earlier
            else {"type": "array", "maxItems": 0}
        )
        variants = [
            {
                "type": "object",
                "properties": {
                    "id": {"const": f"s{k}"},
                    "agent": {"enum": who},
                    "skill": {"enum": list(skills)},
                    "target": {"$ref": "#/$defs/target"},
                    "after": after,
                },
                "required": ["id", "agent", "skill", "target", "after"],
                "additionalProperties": False,
            }
            for skills, who in groups.items()
        ]
        return variants[0] if len(variants) == 1 else {"anyOf": variants}

    return {
        "$defs": {"target": {"enum": list(dict.fromkeys(objects))}},
        "type": "array",
        "prefixItems": [item(k) for k in range(1, max_subtasks + 1)],
        "items": False,
        "minItems": 1,
    }


def grammar_decompose(
    llm: LLM,
    template: str,
    instruction: str,
    objects: Sequence[str],
    agents: Sequence[str],
    capabilities: dict[str, Sequence[str]],
    sampling: Sampling | None = None,
    max_subtasks: int = 8,
) -> Decomposition:
    """Grammar-constrained decomposition: one generation under :func:`plan_schema`, then the
    same parsing and validation as :func:`decompose` (which a backend that could not apply the
    schema needs; ``constrained`` says whether the reply was decoded under it and conforms).
    With no plan possible (no known object) the LLM is not called."""
    try:
        schema = plan_schema(objects, agents, capabilities, max_subtasks)
    except ConstraintError as err:
        return Decomposition(ok=False, errors=[str(err)])
    chat = build_prompt(template, instruction, objects, agents, capabilities)
    constraint = Constraint(schema, "plan")
    gen = llm.generate([chat], sampling or Sampling(max_tokens=480), constraints=[constraint])[0]
    result = _parse_plan(gen.text, objects, agents, capabilities)
    result.truncated = gen.finish_reason == "length"
    # Text the schema rejects was not decoded under it, whatever the backend said (a server
    # that accepts the schema and ignores it); a cut plan is a valid prefix.
    conforms = result.truncated or (result.ok and result.invalid == 0 and not result.errors)
    result.constrained = gen.constrained and conforms
    return result


def _parse_plan(
    text: str,
    objects: Sequence[str],
    agents: Sequence[str],
    capabilities: dict[str, Sequence[str]],
) -> Decomposition:
    items = extract_json(text)
    if items is None:
        items = complete_items(text)
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
    candidates = [f"{s} {o}" for o in relevant for s in plan_skills()]
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
) -> dict[str, float | None]:
    """Validity (valid / proposed subtasks; 0 when the reply proposed none), atom coverage
    (atoms whose object or target a subtask acts on), parallelism (critical path / subtasks:
    lower is more parallel) and assignment balance (:func:`benchmark.metrics.episode.balance` of the
    subtasks per agent). A plan without subtasks has no shape: its parallelism and balance are
    None (left out of means), not the values of a serial or one-sided plan."""
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
        "parallelism": max(depth.values()) / n if n else None,
        "balance": balance(per_agent) if n and per_agent else None,
    }
