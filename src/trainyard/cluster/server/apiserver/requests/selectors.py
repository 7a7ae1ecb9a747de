"""Label and field selectors of the Kubernetes list and watch API.

This module owns the grammar and the matching of the `labelSelector` and `fieldSelector`
query parameters, and the conversion of a `metav1.LabelSelector` object (`matchLabels` plus
`matchExpressions`, as found in Deployment, ReplicaSet and Job specs) into the same matcher.

Callers: the API server parses both query parameters on list, watch and deletecollection
requests (a `SelectorError` becomes a 400 BadRequest Status carrying its message), the store
filters objects with `matches`, and the controllers of the embedded cluster turn workload
`spec.selector` objects into matchers with `label_selector_from_spec`.

Pure: no I/O, standard library only.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum

__all__ = [
    "FieldSelector",
    "FieldTerm",
    "LabelOperator",
    "LabelSelector",
    "Requirement",
    "SelectorError",
    "check_field_selector",
    "label_selector_from_spec",
    "parse_field_selector",
    "parse_label_selector",
]


class SelectorError(ValueError):
    """A selector that cannot be parsed or is not supported; the message is meant for the user."""


# --------------------------------------------------------------------------------------------
# Label selectors
# --------------------------------------------------------------------------------------------


class LabelOperator(StrEnum):
    """The operator of one label requirement; the value is its spelling in the canonical form."""

    EQUALS = "="
    NOT_EQUALS = "!="
    IN = "in"
    NOT_IN = "notin"
    EXISTS = "exists"
    DOES_NOT_EXIST = "!"
    GREATER_THAN = ">"
    LESS_THAN = "<"


_NAME_PART = r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_NAME_RE = re.compile(rf"^{_NAME_PART}$")
_DNS_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS_SUBDOMAIN_RE = re.compile(rf"^{_DNS_LABEL}(\.{_DNS_LABEL})*$")
_INTEGER_RE = re.compile(r"^[+-]?[0-9]+$")

_NAME_HINT = (
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character"
)


def _label_key_problem(key: str) -> str | None:
    """Why `key` is not a qualified label name (`[prefix/]name`), or None when it is."""
    prefix, slash, name = key.rpartition("/")
    if slash and not prefix:
        return "prefix part must be non-empty"
    if prefix:
        if len(prefix) > 253:
            return "prefix part must be no more than 253 characters"
        if not _DNS_SUBDOMAIN_RE.match(prefix):
            return "prefix part must be a lowercase RFC 1123 subdomain"
    if not name:
        return "name part must be non-empty"
    if len(name) > 63:
        return "name part must be no more than 63 characters"
    if not _NAME_RE.match(name):
        return f"name part {_NAME_HINT}"
    return None


def _label_value_problem(value: str) -> str | None:
    """Why `value` is not a valid label value (the empty string is valid), or None."""
    if len(value) > 63:
        return "must be no more than 63 characters"
    if value and not _NAME_RE.match(value):
        return f"a valid label must be an empty string or {_NAME_HINT.removeprefix('must ')}"
    return None


def _requirement_error(message: str) -> SelectorError:
    return SelectorError(f"unable to parse requirement: {message}")


@dataclass(frozen=True)
class Requirement:
    """One term of a label selector, already validated.

    `values` is sorted and free of duplicates so that equal requirements compare equal and
    render identically.
    """

    key: str
    operator: LabelOperator
    values: tuple[str, ...] = ()

    @classmethod
    def build(cls, key: str, operator: LabelOperator, values: Collection[str] = ()) -> Requirement:
        """Validate the parts the way the API server does and build the requirement."""
        problem = _label_key_problem(key)
        if problem is not None:
            raise _requirement_error(f"key: Invalid value: {key!r}: {problem}")
        unique = tuple(sorted(set(values)))
        if operator in (LabelOperator.IN, LabelOperator.NOT_IN):
            if not unique:
                raise _requirement_error("for 'in', 'notin' operators, values set can't be empty")
        elif operator in (LabelOperator.EQUALS, LabelOperator.NOT_EQUALS):
            if len(unique) != 1:
                raise _requirement_error("exact-match compatibility requires one single value")
        elif operator in (LabelOperator.EXISTS, LabelOperator.DOES_NOT_EXIST):
            if unique:
                raise _requirement_error("values set must be empty for exists and does not exist")
        else:
            if len(unique) != 1:
                raise _requirement_error("for 'Gt', 'Lt' operators, exactly one value is required")
            if not _INTEGER_RE.match(unique[0]):
                raise _requirement_error(f"for 'Gt', 'Lt' operators, the value must be an integer: {unique[0]!r}")
        if operator not in (LabelOperator.GREATER_THAN, LabelOperator.LESS_THAN):
            for value in unique:
                problem = _label_value_problem(value)
                if problem is not None:
                    raise _requirement_error(f"values[0][{key}]: Invalid value: {value!r}: {problem}")
        return cls(key, operator, unique)

    def matches(self, labels: Mapping[str, str]) -> bool:
        present = self.key in labels
        value = labels.get(self.key, "")
        match self.operator:
            case LabelOperator.EQUALS:
                return present and value == self.values[0]
            case LabelOperator.NOT_EQUALS:
                # An absent label is "not equal": `env!=prod` selects unlabelled objects too.
                return not present or value != self.values[0]
            case LabelOperator.IN:
                return present and value in self.values
            case LabelOperator.NOT_IN:
                return not present or value not in self.values
            case LabelOperator.EXISTS:
                return present
            case LabelOperator.DOES_NOT_EXIST:
                return not present
            case LabelOperator.GREATER_THAN | LabelOperator.LESS_THAN:
                # Non-integer label values never match, as in the API server.
                if not present or not _INTEGER_RE.match(value):
                    return False
                if self.operator is LabelOperator.GREATER_THAN:
                    return int(value) > int(self.values[0])
                return int(value) < int(self.values[0])
        return False  # pragma: no cover - the match above is exhaustive

    def __str__(self) -> str:
        match self.operator:
            case LabelOperator.EXISTS:
                return self.key
            case LabelOperator.DOES_NOT_EXIST:
                return f"!{self.key}"
            case LabelOperator.IN | LabelOperator.NOT_IN:
                return f"{self.key} {self.operator.value} ({','.join(self.values)})"
            case _:
                return f"{self.key}{self.operator.value}{self.values[0]}"


@dataclass(frozen=True)
class LabelSelector:
    """A conjunction of label requirements, sorted by key; no requirement matches everything."""

    requirements: tuple[Requirement, ...] = ()

    def __post_init__(self) -> None:
        # Sorting here keeps equality and the string form independent of the input order;
        # the sort is stable so two terms on one key keep the order the user wrote.
        ordered = tuple(sorted(self.requirements, key=lambda r: r.key))
        object.__setattr__(self, "requirements", ordered)

    @property
    def empty(self) -> bool:
        """True when the selector has no requirement and so selects every object."""
        return not self.requirements

    def matches(self, labels: Mapping[str, str]) -> bool:
        return all(r.matches(labels) for r in self.requirements)

    def __str__(self) -> str:
        return ",".join(str(r) for r in self.requirements)


# Characters that end an identifier in the selector lexer; everything else (including
# '/', '.', '-', '_') may appear inside keys and values.
_SPECIAL = frozenset("=!(),<>")


@dataclass(frozen=True)
class _Token:
    kind: str  # "ident" or the operator / punctuation text itself, or "end"
    text: str


def _tokenize(text: str) -> list[_Token]:
    tokens: list[_Token] = []
    i = 0
    n = len(text)
    while i < n:
        ch = text[i]
        if ch.isspace():
            i += 1
        elif ch in "!=" and text[i + 1 : i + 2] == "=":
            tokens.append(_Token(ch + "=", ch + "="))
            i += 2
        elif ch in _SPECIAL:
            tokens.append(_Token(ch, ch))
            i += 1
        else:
            start = i
            while i < n and not text[i].isspace() and text[i] not in _SPECIAL:
                i += 1
            tokens.append(_Token("ident", text[start:i]))
    tokens.append(_Token("end", ""))
    return tokens


class _LabelParser:
    def __init__(self, text: str) -> None:
        self.tokens = _tokenize(text)
        self.pos = 0

    def peek(self) -> _Token:
        return self.tokens[self.pos]

    def take(self) -> _Token:
        token = self.tokens[self.pos]
        if token.kind != "end":
            self.pos += 1
        return token

    def expected(self, token: _Token, what: str) -> SelectorError:
        return _requirement_error(f"found '{token.text}', expected: {what}")

    def parse(self) -> LabelSelector:
        if self.peek().kind == "end":
            return LabelSelector()
        requirements = [self.requirement()]
        while True:
            token = self.take()
            if token.kind == "end":
                return LabelSelector(tuple(requirements))
            if token.kind != ",":
                raise self.expected(token, "',' or 'end of string'")
            requirements.append(self.requirement())

    def requirement(self) -> Requirement:
        token = self.take()
        if token.kind == "!":
            name = self.take()
            if name.kind != "ident":
                raise self.expected(name, "identifier")
            return Requirement.build(name.text, LabelOperator.DOES_NOT_EXIST)
        if token.kind != "ident":
            raise self.expected(token, "! or identifier")
        key = token.text
        op = self.peek()
        if op.kind in (",", "end"):
            return Requirement.build(key, LabelOperator.EXISTS)
        self.take()
        if op.kind in ("=", "=="):
            return Requirement.build(key, LabelOperator.EQUALS, (self.single_value(),))
        if op.kind == "!=":
            return Requirement.build(key, LabelOperator.NOT_EQUALS, (self.single_value(),))
        if op.kind == ">":
            return Requirement.build(key, LabelOperator.GREATER_THAN, (self.single_value(),))
        if op.kind == "<":
            return Requirement.build(key, LabelOperator.LESS_THAN, (self.single_value(),))
        # `in` and `notin` are keywords only in operator position, so a label may be named "in".
        if op.kind == "ident" and op.text in ("in", "notin"):
            operator = LabelOperator.IN if op.text == "in" else LabelOperator.NOT_IN
            return Requirement.build(key, operator, self.value_set())
        raise self.expected(op, "in, notin, =, ==, !=, gt, lt")

    def single_value(self) -> str:
        token = self.peek()
        # `a=` is legal and selects the empty value.
        if token.kind in (",", "end"):
            return ""
        self.take()
        if token.kind != "ident":
            raise self.expected(token, "identifier")
        return token.text

    def value_set(self) -> list[str]:
        token = self.take()
        if token.kind != "(":
            raise self.expected(token, "'('")
        values: list[str] = []
        want_value = True
        while True:
            token = self.take()
            if token.kind == "ident":
                if not want_value:
                    raise self.expected(token, "',' or ')'")
                values.append(token.text)
                want_value = False
            elif token.kind == ",":
                # An empty slot between commas is the empty label value.
                if want_value:
                    values.append("")
                want_value = True
            elif token.kind == ")":
                if want_value and values:
                    values.append("")
                return values
            else:
                raise self.expected(token, "identifier, ',' or ')'")


def parse_label_selector(text: str) -> LabelSelector:
    """Parse the `labelSelector` query parameter; the empty string selects everything."""
    return _LabelParser(text).parse()


_SPEC_OPERATORS: Mapping[str, LabelOperator] = {
    "In": LabelOperator.IN,
    "NotIn": LabelOperator.NOT_IN,
    "Exists": LabelOperator.EXISTS,
    "DoesNotExist": LabelOperator.DOES_NOT_EXIST,
}


def label_selector_from_spec(
    match_labels: Mapping[str, str] | None,
    match_expressions: Sequence[Mapping[str, object]] | None,
) -> LabelSelector:
    """Convert the two halves of a `metav1.LabelSelector` object into a matcher.

    Both halves absent gives the empty selector, which matches everything; a caller holding
    a *missing* selector object (as opposed to `{}`) must decide itself that it matches
    nothing, as the API machinery does.
    """
    requirements: list[Requirement] = []
    for label, value in (match_labels or {}).items():
        if not isinstance(label, str) or not isinstance(value, str):
            raise SelectorError(f"matchLabels: Invalid value: {label!r}: keys and values must be strings")
        requirements.append(Requirement.build(label, LabelOperator.EQUALS, (value,)))
    for index, expression in enumerate(match_expressions or ()):
        where = f"matchExpressions[{index}]"
        if not isinstance(expression, Mapping):
            raise SelectorError(f"{where}: Invalid value: must be an object")
        key = expression.get("key")
        operator_name = expression.get("operator")
        raw_values = expression.get("values")
        if not isinstance(key, str):
            raise SelectorError(f"{where}.key: Required value")
        if not isinstance(operator_name, str) or operator_name not in _SPEC_OPERATORS:
            raise SelectorError(f"{operator_name!r} is not a valid label selector operator")
        if raw_values is None:
            values: list[str] = []
        elif isinstance(raw_values, list) and all(isinstance(v, str) for v in raw_values):
            values = [str(v) for v in raw_values]
        else:
            raise SelectorError(f"{where}.values: Invalid value: must be a list of strings")
        requirements.append(Requirement.build(key, _SPEC_OPERATORS[operator_name], values))
    return LabelSelector(tuple(requirements))


# --------------------------------------------------------------------------------------------
# Field selectors
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class FieldTerm:
    """One `key=value` or `key!=value` term; `==` is stored as `=`."""

    key: str
    operator: str
    value: str

    def matches(self, fields: Mapping[str, str]) -> bool:
        # A field the object does not have reads as "", so `spec.nodeName=` selects
        # unscheduled pods exactly as on a real cluster.
        actual = fields.get(self.key, "")
        return actual == self.value if self.operator == "=" else actual != self.value

    def __str__(self) -> str:
        escaped = self.value.replace("\\", "\\\\").replace(",", "\\,").replace("=", "\\=")
        return f"{self.key}{self.operator}{escaped}"


@dataclass(frozen=True)
class FieldSelector:
    """A conjunction of field terms in the order written; duplicates are harmless."""

    terms: tuple[FieldTerm, ...] = ()

    @property
    def keys(self) -> frozenset[str]:
        return frozenset(term.key for term in self.terms)

    @property
    def empty(self) -> bool:
        return not self.terms

    def matches(self, fields: Mapping[str, str]) -> bool:
        return all(term.matches(fields) for term in self.terms)

    def required_value(self, key: str) -> str | None:
        """The value an equality term pins `key` to, if any.

        Lets the store answer `metadata.name=X` (kubectl wait/delete) with one lookup; the
        result still has to pass `matches`, which also enforces contradicting duplicates.
        """
        for term in self.terms:
            if term.key == key and term.operator == "=":
                return term.value
        return None

    def __str__(self) -> str:
        return ",".join(str(term) for term in self.terms)


def _split_unescaped(text: str, separator: str) -> Iterator[str]:
    """Split on `separator` where it is not preceded by a backslash escape."""
    start = 0
    i = 0
    while i < len(text):
        if text[i] == "\\":
            i += 2
            continue
        if text[i] == separator:
            yield text[start:i]
            start = i + 1
        i += 1
    yield text[start:]


def _unescape_field_value(value: str) -> str:
    out: list[str] = []
    escaped = False
    for ch in value:
        if escaped:
            if ch not in "\\,=":
                raise SelectorError(f"invalid field selector: invalid escape sequence: \\{ch}")
            out.append(ch)
            escaped = False
        elif ch == "\\":
            escaped = True
        elif ch in ",=":
            raise SelectorError(f"invalid field selector: unescaped character {ch!r} in value")
        else:
            out.append(ch)
    if escaped:
        raise SelectorError("invalid field selector: invalid escape sequence: \\")
    return "".join(out)


def _parse_field_term(term: str) -> FieldTerm:
    # The first operator found from the left wins; `!=` and `==` are tried before `=` so
    # that `a!=b` is not read as the key `a!` and `a==b` not as the value `=b`.
    for i in range(len(term)):
        for operator in ("!=", "==", "="):
            if term.startswith(operator, i):
                key = term[:i].strip()
                value = _unescape_field_value(term[i + len(operator) :].strip())
                return FieldTerm(key, "!=" if operator == "!=" else "=", value)
    raise SelectorError(f"invalid selector: '{term}'; can't understand '{term}'")


def parse_field_selector(text: str) -> FieldSelector:
    """Parse the `fieldSelector` query parameter; the empty string selects everything."""
    terms = [_parse_field_term(part) for part in _split_unescaped(text, ",") if part.strip()]
    return FieldSelector(tuple(terms))


def check_field_selector(sel: FieldSelector, supported: Collection[str]) -> None:
    """Reject keys the resource cannot be filtered on, with the API server's message."""
    for term in sel.terms:
        if term.key not in supported:
            raise SelectorError(f"field label not supported: {term.key}")
