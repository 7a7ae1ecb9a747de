"""A trial's ``successCondition`` and ``failureCondition``: the GJSON subset Katib's defaults and docs use.

Katib reads a trial's job with ``gjson.Get(job, expression)`` and takes the condition as met when
the result is an object or a non-empty array (``trial/util/job_util.go``); the first element found
gives the Trial's reason and message. This module evaluates the same expressions on the job as a
dict, for the forms Katib writes and documents:

* paths of keys and array indexes joined by ``.``: ``status.conditions.0``, ``status``;
* queries on an array: ``#(key=="value")#`` (every element that matches, an array) and
  ``#(key=="value")`` (the first, an element); the key may be a dotted path, the operator ``==`` or
  ``!=``, the value a double-quoted string, a number, ``true``, ``false`` or ``null``;
* ``|`` applies the rest of the expression to the result so far (after a ``#(...)#`` query, ``.``
  applies it to each element instead, as GJSON does).

So Katib's defaults ``status.conditions.#(type=="Complete")#|#(status=="True")#`` read "a
condition of type Complete whose status is True". Anything else (wildcards, modifiers such as
``@this``, multipaths, ``%`` patterns) is rejected by ``problem``, which admission calls, so an
unsupported expression never reaches a controller. Pure: no I/O.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

SUPPORTED = (
    'dotted paths (status.conditions.0), array queries #(key=="value")# (all matches) and '
    '#(key=="value") (the first), with == or !=, joined by "." or "|", as in '
    'status.conditions.#(type=="Complete")#|#(status=="True")#'
)
"""What an error names as the supported forms."""

_MISSING = object()
_QUERY = re.compile(
    r'^#\((?P<key>[A-Za-z0-9_\-.]+)\s*(?P<op>==|!=)\s*(?P<value>"(?:[^"\\]|\\.)*"|[^()]+?)\s*\)(?P<all>#?)$'
)
_KEY = re.compile(r"^[A-Za-z0-9_\-]+$")


class ConditionSyntaxError(ValueError):
    """An expression outside the supported subset; the message says what and names the supported forms."""


@dataclass(frozen=True)
class _Key:
    name: str


@dataclass(frozen=True)
class _Query:
    key: tuple[str, ...]
    negate: bool
    value: Any
    every: bool
    """``#(...)#``: every match (an array); else the first match."""


_Step = _Key | _Query


def _split(expression: str) -> list[tuple[str, str]]:
    """The segments, each with the separator before it (``.`` or ``|`` outside quotes and parentheses;
    ``""`` for the first)."""
    out: list[tuple[str, str]] = []
    depth, quoted, escaped, sep, start = 0, False, False, "", 0
    for i, ch in enumerate(expression):
        if quoted:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                quoted = False
            continue
        if ch == '"':
            quoted = True
        elif ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif ch in ".|" and depth == 0:
            out.append((sep, expression[start:i]))
            sep, start = ch, i + 1
    if quoted or depth:
        raise ConditionSyntaxError(f"unbalanced quotes or parentheses in {expression!r}; supported: {SUPPORTED}")
    out.append((sep, expression[start:]))
    return out


def _literal(text: str, expression: str) -> Any:
    try:
        value = json.loads(text)
    except ValueError:
        value = _MISSING
    if value is _MISSING or isinstance(value, (dict, list)):
        what = "is not a double-quoted string, number, true, false or null"
        raise ConditionSyntaxError(f"{text!r} in {expression!r} {what}; supported: {SUPPORTED}")
    return value


def parse(expression: str) -> list[tuple[str, _Step]]:
    """The steps of ``expression`` with their separators; raises ``ConditionSyntaxError`` outside the subset."""
    if not expression.strip():
        raise ConditionSyntaxError(f"an empty expression; supported: {SUPPORTED}")
    steps: list[tuple[str, _Step]] = []
    for sep, segment in _split(expression):
        query = _QUERY.match(segment)
        if query is not None:
            key = tuple(query["key"].split("."))
            value = _literal(query["value"], expression)
            steps.append((sep, _Query(key, query["op"] == "!=", value, bool(query["all"]))))
        elif _KEY.match(segment):
            steps.append((sep, _Key(segment)))
        else:
            what = "is not supported by trainyard"
            raise ConditionSyntaxError(f"{segment!r} in {expression!r} {what}; supported: {SUPPORTED}")
    return steps


def problem(expression: str) -> str | None:
    """Why ``expression`` cannot be evaluated here; None when it can."""
    try:
        parse(expression)
    except ConditionSyntaxError as exc:
        return str(exc)
    return None


def _lookup(value: Any, key: str) -> Any:
    if isinstance(value, Mapping):
        return value.get(key, _MISSING)
    if isinstance(value, Sequence) and not isinstance(value, str) and key.isdigit():
        index = int(key)
        return value[index] if index < len(value) else _MISSING
    return _MISSING


def _matches(element: Any, query: _Query) -> bool:
    found: Any = element
    for key in query.key:
        found = _lookup(found, key)
    if found is _MISSING:
        return query.negate  # GJSON: a missing key is "not equal"
    # JSON's true is no 1: a bool equals only a bool.
    equal = found == query.value and isinstance(found, bool) == isinstance(query.value, bool)
    return not equal if query.negate else equal


def _apply(value: Any, steps: list[tuple[str, _Step]]) -> Any:
    for i, (_sep, step) in enumerate(steps):
        if value is _MISSING:
            return _MISSING
        if isinstance(step, _Key):
            value = _lookup(value, step.name)
            continue
        if not isinstance(value, Sequence) or isinstance(value, (str, bytes)):
            return _MISSING
        matched = [e for e in value if _matches(e, step)]
        if not step.every:
            value = matched[0] if matched else _MISSING
            continue
        rest = steps[i + 1 :]
        if rest and rest[0][0] == ".":
            # GJSON: ``#(...)#.path`` maps the rest over each match and keeps what exists.
            mapped = [_apply(e, rest) for e in matched]
            return [m for m in mapped if m is not _MISSING]
        value = matched
    return value


def match(expression: str, obj: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """What the expression finds in ``obj`` when the condition holds (the first element of an array
    result, or the object found), else None; raises ``ConditionSyntaxError`` outside the subset."""
    found = _apply(obj, parse(expression))
    if isinstance(found, Mapping):
        return found
    if isinstance(found, list) and found:
        first = found[0]
        return first if isinstance(first, Mapping) else {}
    return None


def holds(expression: str, obj: Mapping[str, Any]) -> bool:
    """Whether the condition holds of the job ``obj``, as Katib's Trial controller decides it: the
    expression finds an object or a non-empty array. A scalar found (``status.succeeded``) does not."""
    return match(expression, obj) is not None
