"""Reported metrics: Katib's collector formats parsed, and a trial's ``status.observation`` built.

``parse_text`` reads what Katib's StdOut and File (TEXT) collectors read: every match of the
filters (default ``name=value``) whose name is asked for, the line's leading RFC 3339 timestamp when
it has one (``parseLogsInTextFormat`` in ``pkg/metricscollector/v1beta1/file-metricscollector``).
``parse_json`` reads the File collector's JSON format, one object per line. ``observation`` is the
Trial's ``status.observation`` as Katib's trial controller writes it (``getMetrics``): min, max and
latest of each metric as strings, ``unavailable`` for one never reported.
"""

from __future__ import annotations

import functools
import json
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from trainyard.api.katib import DEFAULT_FILTER, UNAVAILABLE_METRIC_VALUE
from trainyard.controller.search import Direction, MetricValue

TIMESTAMP_KEY = "timestamp"
STRATEGIES = ("min", "max", "latest")

# Go's time.RFC3339Nano, which Katib parses a line's first word with.
_RFC3339 = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:\d{2})", re.ASCII)
_EPOCH = datetime.min.replace(tzinfo=UTC)


def parse_text(
    lines: Iterable[str], names: Sequence[str], filters: Sequence[str] = (DEFAULT_FILTER,)
) -> list[MetricValue]:
    """Every value of ``names`` in ``lines``, in order. Filters are Katib's ``metricsFormat``: the
    first group is the name, the second the value; none given means Katib's default. A value that
    is not a finite number (``loss=nan`` matches with an empty value) is not a report."""
    wanted = set(names)
    patterns = [_compile(f) for f in (filters or (DEFAULT_FILTER,))]
    out: list[MetricValue] = []
    for line in lines:
        first = line.split(" ", 1)[0]
        timestamp = first if " " in line and _timestamp(first) is not None else None
        for pattern in patterns:
            for match in pattern.finditer(line):
                if pattern.groups < 2:
                    continue
                name = (match.group(1) or "").strip()
                value = _number((match.group(2) or "").strip())
                if name in wanted and value is not None:
                    out.append(MetricValue(name=name, value=value, timestamp=timestamp))
    return out


def parse_json(lines: Iterable[str], names: Sequence[str]) -> list[MetricValue]:
    """The File collector's JSON format: one object a line, a metric a key, ``timestamp`` optional
    (RFC 3339, or seconds since the epoch). Katib takes string values only; numbers are read too. A
    line that is not a JSON object (a stray print) is skipped, where Katib's collector fails."""
    out: list[MetricValue] = []
    for line in lines:
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except ValueError:
            continue
        if not isinstance(obj, dict):
            continue
        timestamp = _json_timestamp(obj.get(TIMESTAMP_KEY))
        for name in names:
            raw = obj.get(name)
            if isinstance(raw, bool) or not isinstance(raw, (str, int, float)):
                continue
            value = _number(str(raw).strip())
            if value is not None:
                out.append(MetricValue(name=name, value=value, timestamp=timestamp))
    return out


def observation(values: Sequence[MetricValue], names: Sequence[str]) -> dict[str, Any]:
    """A Trial's ``status.observation``: ``{"metrics": [{name, min, max, latest}]}`` in ``names``' order.

    Latest is the value with the newest timestamp (reports without one count as the oldest; among
    equals, the last reported), as Katib's trial controller picks it.
    """
    none = UNAVAILABLE_METRIC_VALUE
    metrics: dict[str, dict[str, str]] = {n: {"name": n, "min": none, "max": none, "latest": none} for n in names}
    lows: dict[str, float] = {}
    highs: dict[str, float] = {}
    newest: dict[str, datetime] = {}
    for v in values:
        metric = metrics.get(v.name)
        if metric is None:
            continue
        if v.name not in lows or v.value < lows[v.name]:
            lows[v.name] = v.value
            metric["min"] = format_number(v.value)
        if v.name not in highs or v.value > highs[v.name]:
            highs[v.name] = v.value
            metric["max"] = format_number(v.value)
        when = (_timestamp(v.timestamp) if v.timestamp else None) or _EPOCH
        if v.name not in newest or when >= newest[v.name]:
            newest[v.name] = when
            metric["latest"] = format_number(v.value)
    return {"metrics": [metrics[n] for n in names]}


def objective_value(observation: Mapping[str, Any], name: str, strategy: str = "latest") -> float | None:
    """The value of ``name`` in an observation by its metric strategy (min, max, latest); None when the
    metric is missing or ``unavailable``."""
    if strategy not in STRATEGIES:
        raise ValueError(f"metric strategy {strategy!r}: supported values: {', '.join(STRATEGIES)}")
    for metric in observation.get("metrics") or ():
        if isinstance(metric, Mapping) and metric.get("name") == name:
            return _number(str(metric.get(strategy, UNAVAILABLE_METRIC_VALUE)))
    return None


def best(trials: Sequence[tuple[str, float | None]], direction: Direction) -> int | None:
    """The index of the best ``(name, value)``; the first of equals, as Katib's currentOptimalTrial."""
    found: int | None = None
    for i, (_, value) in enumerate(trials):
        if value is None or not math.isfinite(value):
            continue
        if found is None:
            found = i
            continue
        top = trials[found][1]
        assert top is not None
        if (value > top) if direction is Direction.MAXIMIZE else (value < top):
            found = i
    return found


def check_filters(filters: Sequence[str]) -> list[tuple[str, str]]:
    """Katib's webhook check of ``metricsFormat``: ``(index, message)`` for a filter that does not
    compile or has fewer than two groups (the name and the value)."""
    problems: list[tuple[str, str]] = []
    for i, f in enumerate(filters):
        try:
            pattern = _compile(f)
        except re.error as e:
            problems.append((f"[{i}]", f"{f!r} is not a regular expression: {e}"))
            continue
        if pattern.groups < 2:
            problems.append((f"[{i}]", f"{f!r} must have two groups: the metric's name, then its value"))
    return problems


def format_number(value: float) -> str:
    """A value as the observation writes it: shortest round-trip form, whole numbers without ``.0``."""
    if value.is_integer() and abs(value) < 1e16:
        return str(int(value))
    return repr(value)


@functools.lru_cache(maxsize=64)
def _compile(pattern: str) -> re.Pattern[str]:
    # Go's regexp (RE2) classes are ASCII: \d and \w match what they match there.
    return re.compile(pattern, re.ASCII)


def _number(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def _timestamp(text: str) -> datetime | None:
    if not _RFC3339.fullmatch(text):
        return None
    head, _, rest = text.partition(".")
    if rest:
        digits = re.match(r"\d+", rest, re.ASCII)
        assert digits is not None
        # Python keeps microseconds; Go's nanoseconds are cut to them (ordering within 1 µs is lost).
        text = f"{head}.{digits.group()[:6].ljust(6, '0')}{rest[digits.end() :]}"
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None


def _json_timestamp(raw: object) -> str | None:
    if isinstance(raw, str):
        return raw if raw and _timestamp(raw) is not None else None
    if isinstance(raw, (int, float)) and not isinstance(raw, bool) and math.isfinite(raw):
        try:
            when = datetime.fromtimestamp(raw, tz=UTC)
        except (OverflowError, OSError, ValueError):
            return None
        # RFC3339Nano as Go writes it: the fraction without trailing zeros.
        text = when.strftime("%Y-%m-%dT%H:%M:%S")
        fraction = f"{when.microsecond:06d}".rstrip("0")
        return f"{text}.{fraction}Z" if fraction else f"{text}Z"
    return None
