"""Reading untrusted text under bounds: what every parse of an upload shares.

A hostile upload can be small and still cost the server without limit once parsed: a YAML
alias stands for millions of values, a deep nest overflows a recursive parser, a byte of
``[]`` is tens of bytes of Python objects, an integer of thousands of digits overflows a
database column, and formatting a refusal can itself repr a structure of any size. Here:

* :func:`json_values` bounds the values of a JSON text before it is parsed, :func:`parse_json`
  refuses a repeated key (:class:`RepeatedKey`) and non-numbers such as ``NaN``;
* :func:`load_yaml` reads YAML without anchors or aliases and at most a given depth;
* :data:`KINDS`, :func:`require` and :func:`closed` check fields by kind, each with a range
  or length, and refuse unknown fields by name;
* :func:`shown` describes a value in a refusal without ever formatting all of it;
* :func:`invisible_character` finds control and Unicode format (Cf) characters, which can make
  one name render as another.

Refusals are :class:`~leaderboard.core.archive.BundleError` (422) naming the field.
"""

from __future__ import annotations

import json
import math
import re
import unicodedata
from collections.abc import Mapping
from typing import Any

import yaml

from leaderboard.core.archive import BundleError

# Every integer fits a signed 64-bit column; reals are finite and at most 1e18 in size.
INT_RANGE = (-(2**63), 2**63 - 1)
REAL_MAX = 1e18
MAX_FIELD_CHARS = 1000  # a name, key, id or version
MAX_MAP_ENTRIES = 64  # a mapping of names (a mixed team: one member per agent)
MAX_TEXT_CHARS = 100_000  # a longer text, such as a trace's instruction


def fail(field: str, message: str) -> BundleError:
    """The 422 refusal of ``field``."""
    return BundleError(422, field, message)


def _is_int(value: Any) -> bool:
    return (
        isinstance(value, int)
        and not isinstance(value, bool)
        and INT_RANGE[0] <= value <= INT_RANGE[1]
    )


def _is_number(value: Any) -> bool:
    if isinstance(value, float):
        return math.isfinite(value) and abs(value) <= REAL_MAX
    return _is_int(value)


def shown(value: Any, limit: int = 60) -> str:
    """A short description of an untrusted value for a refusal: a string's first ``limit``
    characters, a number, or the type of anything else; never a whole repr (a value can be
    built to make its repr enormous)."""
    if isinstance(value, str):
        return repr(value[:limit]) + ("..." if len(value) > limit else "")
    if isinstance(value, bool) or value is None:
        return repr(value)
    if isinstance(value, int):
        return repr(value) if abs(value) < 10**21 else f"an integer of {len(str(value))} digits"
    if isinstance(value, float):
        return repr(value)
    return {dict: "an object", list: "a list"}.get(type(value), f"a {type(value).__name__}")


# kind -> whether a value is of it
KINDS = {
    "string": lambda v: isinstance(v, str) and len(v) <= MAX_FIELD_CHARS,
    "string or null": lambda v: v is None or (isinstance(v, str) and len(v) <= MAX_FIELD_CHARS),
    "text": lambda v: isinstance(v, str) and len(v) <= MAX_TEXT_CHARS,
    "integer": _is_int,
    "boolean": lambda v: isinstance(v, bool),
    "number": _is_number,
    "number or null": lambda v: v is None or _is_number(v),
    "object": lambda v: isinstance(v, dict),
    "string map": lambda v: (
        isinstance(v, dict)
        and len(v) <= MAX_MAP_ENTRIES
        and all(KINDS["string"](k) and KINDS["string"](x) for k, x in v.items())
    ),
    "list": lambda v: isinstance(v, list),
}
_WITHIN = {
    "integer": " within the documented range",
    "number": " within the documented range",
    "string": f" of at most {MAX_FIELD_CHARS} characters",
    "string or null": f" of at most {MAX_FIELD_CHARS} characters",
    "text": f" of at most {MAX_TEXT_CHARS} characters",
    "string map": f" (strings to strings, at most {MAX_MAP_ENTRIES} entries)",
}


def check_kind(value: Any, kind: str, where: str) -> None:
    """Refuse ``value`` at ``where`` unless it is of ``kind`` (a key of :data:`KINDS`)."""
    if not KINDS[kind](value):
        raise fail(where, f"expected {kind}{_WITHIN.get(kind, '')}, got {shown(value)}")


def require(obj: dict[str, Any], spec: Mapping[str, str], path: str) -> None:
    """Every field of ``spec`` (name -> kind of :data:`KINDS`) is in ``obj`` with its kind;
    ``path`` formats a field's name into its path (``"manifest.track.{}"``)."""
    for name, kind in spec.items():
        if name not in obj:
            raise fail(path.format(name), "missing")
        check_kind(obj[name], kind, path.format(name))


def closed(
    obj: dict[str, Any],
    known: Mapping[str, str],
    path: str,
    extra: re.Pattern[str] | None = None,
    max_extra: int = 0,
) -> None:
    """``obj`` holds only fields of ``known`` (kinds checked when present) and at most
    ``max_extra`` numbers whose names match ``extra``; an unknown field is refused, named."""
    unknown = []
    extras = 0
    for name, value in obj.items():
        if name in known:
            check_kind(value, known[name], path.format(name))
        elif extra is not None and extra.fullmatch(name):
            extras += 1
            check_kind(value, "number or null", path.format(name))
        else:
            unknown.append(name)
    if unknown:
        names = ", ".join(shown(n, 40) for n in sorted(unknown)[:5])
        more = f" and {len(unknown) - 5} more" if len(unknown) > 5 else ""
        raise fail(path.format(unknown[0]), f"unknown field(s) {names}{more}")
    if extras > max_extra:
        raise fail(path.format("*"), f"{extras} extra numbers, at most {max_extra}")


def in_range(value: Any, kind: str, bounds: tuple[float, float], where: str) -> None:
    """Refuse ``value`` at ``where`` unless it is of ``kind`` and within ``bounds``."""
    lo, hi = bounds
    if not KINDS[kind](value) or not lo <= value <= hi:
        raise fail(
            where,
            f"expected {'an integer' if kind == 'integer' else 'a number'} "
            f"from {lo:g} to {hi:g}, got {shown(value)}",
        )


def invisible_character(value: str) -> str | None:
    """The first control or Unicode format (Cf) character of ``value``, as ``a Unicode format
    (Cf) character U+202E (RIGHT-TO-LEFT OVERRIDE)``; None when there is none."""
    for c in value:
        category = unicodedata.category(c)
        if category in ("Cc", "Cf"):
            kind = "a control" if category == "Cc" else "a Unicode format (Cf)"
            return f"{kind} character U+{ord(c):04X} ({unicodedata.name(c, 'unnamed')})"
    return None


def one_line(value: str, where: str) -> None:
    """Refuse ``value`` at ``where`` when it holds a control or format character."""
    found = invisible_character(value)
    if found is not None:
        raise fail(where, f"expected one line without control or format characters; holds {found}")


class RepeatedKey(ValueError):
    """A JSON object repeats a key."""


def unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object's fields (``object_pairs_hook`` of ``json.loads``), refusing a repeated
    key with :class:`RepeatedKey`: readers disagree on which copy wins, so a trace could say
    one thing to the verifier and another to a reader."""
    obj = dict(pairs)
    if len(obj) != len(pairs):
        seen: set[str] = set()
        repeated = next(k for k, _ in pairs if k in seen or seen.add(k))
        raise RepeatedKey(f"the key {shown(repeated, 40)} appears twice in one object")
    return obj


def json_values(data: bytes) -> int:
    """An upper bound on the JSON values in ``data``: every value but the first follows a
    ``,``, ``:``, ``[`` or ``{`` (counting those inside strings too only overestimates)."""
    return data.count(b",") + data.count(b":") + data.count(b"[") + data.count(b"{") + 1


def _refuse_constant(name: str) -> None:
    raise ValueError(f"{name} is not a JSON number")


def parse_json(data: bytes, where: str) -> Any:
    """``data`` parsed as UTF-8 JSON without repeated keys or ``NaN``/``Infinity``; a 422
    naming ``where`` otherwise (a nest too deep for the parser included). Bound its values
    with :func:`json_values` first."""
    try:
        return json.loads(
            data.decode("utf-8"), parse_constant=_refuse_constant, object_pairs_hook=unique_keys
        )
    except (UnicodeDecodeError, ValueError, RecursionError) as err:
        raise fail(where, f"not valid JSON: {str(err)[:200]}") from err


class _BoundedLoader(yaml.SafeLoader):
    """YAML's safe loader without anchors or aliases (one alias can stand for millions of
    values) and at most ``max_depth`` levels deep (the composer recurses once per level)."""

    depth = 0
    max_depth = 8

    def compose_node(self, parent: Any, index: Any) -> Any:
        event = self.peek_event()
        if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None) is not None:
            raise yaml.MarkedYAMLError(
                problem="anchors and aliases are not accepted", problem_mark=event.start_mark
            )
        if self.depth >= self.max_depth:
            raise yaml.MarkedYAMLError(
                problem=f"nested more than {self.max_depth} levels deep",
                problem_mark=event.start_mark,
            )
        self.depth += 1
        try:
            return super().compose_node(parent, index)
        finally:
            self.depth -= 1


def load_yaml(data: bytes, where: str, max_depth: int) -> Any:
    """``data`` parsed as UTF-8 YAML by the safe loader, without anchors or aliases and at
    most ``max_depth`` levels deep; a 422 naming ``where`` otherwise. Bound its size first."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise fail(where, f"not valid YAML: {err}") from err
    loader = _BoundedLoader(text)
    loader.max_depth = max_depth
    try:
        return loader.get_single_data()
    except (yaml.YAMLError, RecursionError) as err:
        raise fail(where, f"not valid YAML: {str(err)[:300]}") from err
    finally:
        loader.dispose()
