"""The subset of kubectl's JSONPath that the API server itself evaluates.

This module owns two things:

* `evaluate`, the JSONPath dialect of CRD `additionalPrinterColumns[].jsonPath` (server-side
  Table conversion for `kubectl get`): field access, `[n]`, `[start:end:step]`, `[*]`, `..`,
  unions, `['key.with.dots']` and `[?(@.a.b == "x")]` filters; and `leading_fields`, the part
  of an object an expression can read (so a Table decodes only that part of each object).
* `get_path` and `set_path`, the plain dotted paths of the CRD scale subresource
  (`specReplicasPath`, `statusReplicasPath`, `labelSelectorPath`).

Callers: the Table converter of the API server (printer columns) and the scale subresource
handler. A syntax error raises `JSONPathError`; an expression that does not match anything
is not an error and yields no values, because printer columns of a half-filled custom
resource must render as empty cells, not fail the whole `kubectl get`.

Pure: no I/O, standard library only.
"""

from __future__ import annotations

import copy
import functools
import operator
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["JSONPathError", "evaluate", "get_path", "leading_fields", "set_path"]


class JSONPathError(ValueError):
    """The expression is not valid JSONPath in the supported subset."""


@dataclass(frozen=True)
class _Field:
    name: str


@dataclass(frozen=True)
class _Wildcard:
    pass


@dataclass(frozen=True)
class _Recursive:
    """`..`: the current value and every value nested in it, outermost first."""


@dataclass(frozen=True)
class _Index:
    index: int


@dataclass(frozen=True)
class _Slice:
    start: int | None
    end: int | None
    step: int | None


@dataclass(frozen=True)
class _Union:
    parts: tuple[_Field | _Index, ...]


@dataclass(frozen=True)
class _Literal:
    value: str | int | float | bool | None


@dataclass(frozen=True)
class _Relative:
    """A path evaluated against the list element under test (`@...`)."""

    steps: tuple[_Step, ...]


@dataclass(frozen=True)
class _Filter:
    left: _Relative | _Literal
    operator: str | None  # None: keep elements for which `left` yields anything
    right: _Relative | _Literal | None


_Step = _Field | _Wildcard | _Recursive | _Index | _Slice | _Union | _Filter

# A field name runs until one of these; everything else, including '/' and '-', belongs to
# it, which is what label and annotation keys need. A backslash escapes the next character
# (`.metadata.labels.app\.kubernetes\.io/name`), as in kubectl.
_NAME_END = frozenset(".[]{}()$@,'\"=!<>&|")
_NUMBER_RE = re.compile(r"-?[0-9]+(\.[0-9]+)?([eE][+-]?[0-9]+)?")
_FILTER_OPERATORS = ("==", "!=", "<=", ">=", "<", ">")


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0

    def error(self, message: str) -> JSONPathError:
        return JSONPathError(f"invalid JSONPath {self.text!r} at position {self.pos}: {message}")

    def peek(self, size: int = 1) -> str:
        return self.text[self.pos : self.pos + size]

    def at_end(self) -> bool:
        return self.pos >= len(self.text)

    def skip_space(self) -> None:
        while not self.at_end() and self.text[self.pos].isspace():
            self.pos += 1

    def expect(self, literal: str) -> None:
        self.skip_space()
        if not self.text.startswith(literal, self.pos):
            raise self.error(f"expected {literal!r}")
        self.pos += len(literal)

    def steps(self) -> list[_Step]:
        steps: list[_Step] = []
        while True:
            if self.peek(2) == "..":
                self.pos += 2
                steps.append(_Recursive())
                if self.peek() != "[":
                    steps.append(self.member())
            elif self.peek() == ".":
                self.pos += 1
                if self.peek() != "[":
                    steps.append(self.member())
            elif self.peek() == "[":
                self.pos += 1
                steps.append(self.bracket())
            else:
                return steps

    def member(self) -> _Step:
        if self.peek() == "*":
            self.pos += 1
            return _Wildcard()
        chars: list[str] = []
        while not self.at_end():
            ch = self.text[self.pos]
            if ch == "\\" and self.pos + 1 < len(self.text):
                chars.append(self.text[self.pos + 1])
                self.pos += 2
                continue
            if ch.isspace() or ch in _NAME_END:
                break
            chars.append(ch)
            self.pos += 1
        if not chars:
            raise self.error("expected a field name")
        return _Field("".join(chars))

    def bracket(self) -> _Step:
        self.skip_space()
        ch = self.peek()
        if ch == "?":
            self.pos += 1
            self.expect("(")
            step = self.filter()
            self.expect(")")
            self.expect("]")
            return step
        if ch == "*":
            self.pos += 1
            self.expect("]")
            return _Wildcard()
        if ch in ("'", '"'):
            keys: list[_Field | _Index] = [_Field(self.quoted())]
            self.skip_space()
            while self.peek() == ",":
                self.pos += 1
                self.skip_space()
                keys.append(_Field(self.quoted()))
                self.skip_space()
            self.expect("]")
            return keys[0] if len(keys) == 1 else _Union(tuple(keys))
        end = self.text.find("]", self.pos)
        if end < 0:
            raise self.error("unterminated '['")
        body = self.text[self.pos : end]
        self.pos = end + 1
        if ":" in body:
            return self.slice(body)
        indices: list[_Field | _Index] = [_Index(self.integer(part)) for part in body.split(",")]
        return indices[0] if len(indices) == 1 else _Union(tuple(indices))

    def integer(self, text: str) -> int:
        try:
            return int(text.strip())
        except ValueError:
            raise self.error(f"invalid array index {text.strip()!r}") from None

    def slice(self, body: str) -> _Slice:
        parts = body.split(":")
        if len(parts) > 3:
            raise self.error(f"invalid slice {body!r}")
        bounds = [None if not part.strip() else self.integer(part) for part in parts]
        bounds += [None] * (3 - len(bounds))
        if bounds[2] == 0:
            raise self.error("slice step cannot be zero")
        return _Slice(bounds[0], bounds[1], bounds[2])

    def quoted(self) -> str:
        quote = self.peek()
        if quote not in ("'", '"'):
            raise self.error("expected a quoted string")
        self.pos += 1
        chars: list[str] = []
        while not self.at_end():
            ch = self.text[self.pos]
            if ch == "\\" and self.pos + 1 < len(self.text):
                chars.append(self.text[self.pos + 1])
                self.pos += 2
                continue
            self.pos += 1
            if ch == quote:
                return "".join(chars)
            chars.append(ch)
        raise self.error("unterminated string")

    def filter(self) -> _Filter:
        left = self.operand()
        self.skip_space()
        for op in _FILTER_OPERATORS:
            if self.text.startswith(op, self.pos):
                self.pos += len(op)
                return _Filter(left, op, self.operand())
        return _Filter(left, None, None)

    def operand(self) -> _Relative | _Literal:
        self.skip_space()
        ch = self.peek()
        if ch == "@":
            self.pos += 1
            return _Relative(tuple(self.steps()))
        if ch in ("'", '"'):
            return _Literal(self.quoted())
        number = _NUMBER_RE.match(self.text, self.pos)
        if number:
            self.pos = number.end()
            literal = number.group()
            return _Literal(float(literal) if number.group(1) or number.group(2) else int(literal))
        for word, value in (("true", True), ("false", False), ("null", None)):
            if self.text.startswith(word, self.pos):
                self.pos += len(word)
                return _Literal(value)
        raise self.error("expected '@', a string or a number in the filter")


@functools.lru_cache(maxsize=512)
def _compile(expr: str) -> tuple[_Step, ...]:
    text = expr.strip()
    # Printer columns are stored without braces, kubectl templates with them; accept both.
    if text.startswith("{") and text.endswith("}"):
        text = text[1:-1].strip()
    if not text:
        raise JSONPathError("empty JSONPath expression")
    parser = _Parser(text)
    if parser.peek() == "$":
        parser.pos += 1
    if parser.text[parser.pos :] == ".":
        return ()
    if not parser.at_end() and parser.peek() not in (".", "["):
        raise parser.error("expected '.' or '['")
    steps = parser.steps()
    parser.skip_space()
    if not parser.at_end():
        raise parser.error(f"unexpected {parser.peek()!r}")
    return tuple(steps)


def _descendants(value: object) -> list[object]:
    found = [value]
    children: list[object] = []
    if isinstance(value, dict):
        children = list(value.values())
    elif isinstance(value, list):
        children = value
    for child in children:
        found.extend(_descendants(child))
    return found


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _json_equal(a: object, b: object) -> bool:
    # Python says True == 1; JSON does not.
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if _is_number(a) and _is_number(b):
        return a == b
    if type(a) is not type(b):
        return False
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_json_equal(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_json_equal(x, y) for x, y in zip(a, b, strict=True))
    return a == b


_ORDERINGS: Mapping[str, Callable[[Any, Any], bool]] = {
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
}


def _compare(left: object, op: str, right: object) -> bool:
    if op == "==":
        return _json_equal(left, right)
    if op == "!=":
        return not _json_equal(left, right)
    # Ordering is defined between two numbers or two strings only; anything else (a number
    # against a string, a map) is simply not selected instead of being an error.
    if (_is_number(left) and _is_number(right)) or (isinstance(left, str) and isinstance(right, str)):
        return _ORDERINGS[op](left, right)
    return False


def _operand_values(operand: _Relative | _Literal, element: object) -> list[object]:
    if isinstance(operand, _Literal):
        return [operand.value]
    return _run(operand.steps, element)


def _keep(step: _Filter, element: object) -> bool:
    left = _operand_values(step.left, element)
    if step.operator is None or step.right is None:
        return bool(left)
    right = _operand_values(step.right, element)
    # Like kubectl, an element whose left side is missing is dropped even for `!=`, and a
    # side with several values compares with nothing.
    if len(left) != 1 or len(right) != 1:
        return False
    return _compare(left[0], step.operator, right[0])


def _apply(step: _Step, value: object) -> list[object]:
    if isinstance(step, _Field):
        return [value[step.name]] if isinstance(value, dict) and step.name in value else []
    if isinstance(step, _Index):
        if isinstance(value, list) and -len(value) <= step.index < len(value):
            return [value[step.index]]
        return []
    if isinstance(step, _Wildcard):
        if isinstance(value, dict):
            return list(value.values())
        return list(value) if isinstance(value, list) else []
    if isinstance(step, _Recursive):
        return _descendants(value)
    if isinstance(step, _Slice):
        return value[step.start : step.end : step.step] if isinstance(value, list) else []
    if isinstance(step, _Union):
        return [found for part in step.parts for found in _apply(part, value)]
    if isinstance(value, list):
        return [element for element in value if _keep(step, element)]
    return []


def _run(steps: tuple[_Step, ...], root: object) -> list[object]:
    values = [root]
    for step in steps:
        if type(step) is _Field and len(values) == 1:
            # Most steps of most paths: one field of one object, without the general dispatch
            # (a printer column is evaluated on every row of a Table).
            value = values[0]
            if not isinstance(value, dict) or step.name not in value:
                return []
            values = [value[step.name]]
            continue
        values = [found for value in values for found in _apply(step, value)]
        if not values:
            break
    return values


def evaluate(expr: str, obj: object) -> list[object]:
    """All values `expr` selects in `obj`, in document order; [] when nothing matches.

    Raises JSONPathError for an expression outside the supported syntax.
    """
    return _run(_compile(expr), obj)


def leading_fields(expr: str, most: int) -> tuple[str, ...]:
    """The names of the plain field steps ``expr`` starts with, at most ``most`` of them: what an
    evaluation can read is under that path. Empty when its first step is anything else (``..``,
    ``[*]``, a union, a filter) or it is the whole object. Raises JSONPathError as ``evaluate``."""
    names: list[str] = []
    for step in _compile(expr)[:most]:
        if not isinstance(step, _Field):
            break
        names.append(step.name)
    return tuple(names)


def _dotted_parts(dotted: str) -> list[str]:
    text = dotted.strip()
    text = text.removeprefix("$")
    if text in ("", "."):
        return []
    # CRD scale paths always start with '.', callers inside the project may omit it.
    parts = text.removeprefix(".").split(".")
    for part in parts:
        if not part or "[" in part or "]" in part:
            raise JSONPathError(f"invalid path {dotted!r}: only simple dotted field paths are supported")
    return parts


def get_path(obj: object, dotted: str) -> object | None:
    """The value at a simple dotted path such as `.spec.replicas`, or None when absent."""
    value = obj
    for part in _dotted_parts(dotted):
        if not isinstance(value, Mapping) or part not in value:
            return None
        value = value[part]
    return value


def set_path(obj: Mapping[str, object], dotted: str, value: object) -> dict[str, object]:
    """A deep copy of `obj` with `value` stored at the dotted path, creating missing maps.

    An intermediate field that holds something other than a map or null is an error rather
    than silently replaced, because that would destroy user data (the API server refuses it
    too).
    """
    parts = _dotted_parts(dotted)
    if not parts:
        raise JSONPathError(f"invalid path {dotted!r}: cannot replace the whole object")
    result: dict[str, object] = copy.deepcopy(dict(obj))
    node = result
    for depth, part in enumerate(parts[:-1]):
        child = node.get(part)
        # A null reads as absent, as it does everywhere else in the API.
        if child is None:
            child = node[part] = {}
        if not isinstance(child, dict):
            where = "." + ".".join(parts[: depth + 1])
            raise JSONPathError(f"value cannot be set because {where} is not a map")
        node = child
    node[parts[-1]] = copy.deepcopy(value)
    return result
