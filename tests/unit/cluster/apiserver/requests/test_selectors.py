"""Label and field selector grammar and matching, as the API server applies them on list/watch."""

from __future__ import annotations

import pytest

from trainyard.cluster.server.apiserver.requests.selectors import (
    FieldSelector,
    LabelSelector,
    SelectorError,
    check_field_selector,
    label_selector_from_spec,
    parse_field_selector,
    parse_label_selector,
)

WEB = {"app": "web", "tier": "frontend", "env": "prod"}
DB = {"app": "db", "env": "dev"}
BARE: dict[str, str] = {}

# (selector, labels, expected match)
LABEL_MATCH_CASES = [
    ("", WEB, True),
    ("   ", BARE, True),
    ("app=web", WEB, True),
    ("app=web", DB, False),
    ("app==web", WEB, True),
    ("app!=web", WEB, False),
    ("app!=web", DB, True),
    ("app!=web", BARE, True),
    ("app in (web,db)", DB, True),
    ("app in (web, api)", DB, False),
    ("app in (web)", BARE, False),
    ("app notin (web)", DB, True),
    ("app notin (web,db)", DB, False),
    ("app notin (web)", BARE, True),
    ("tier", WEB, True),
    ("tier", DB, False),
    ("!tier", DB, True),
    ("!tier", WEB, False),
    ("app=web,env=prod", WEB, True),
    ("app=web,env=dev", WEB, False),
    ("  app = web ,  env in ( prod , dev ) , !missing ", WEB, True),
    ("app=", {"app": ""}, True),
    ("app=", BARE, False),
    ("app in (web,)", {"app": ""}, True),
    ("example.com/team=ml", {"example.com/team": "ml"}, True),
    ("in=x", {"in": "x"}, True),
    ("x in (in,notin)", {"x": "notin"}, True),
    ("replicas>2", {"replicas": "3"}, True),
    ("replicas>2", {"replicas": "2"}, False),
    ("replicas<2", {"replicas": "1"}, True),
    ("replicas<2", {"replicas": "abc"}, False),
    ("replicas<2", BARE, False),
]


@pytest.mark.parametrize(
    ("text", "labels", "expected"),
    LABEL_MATCH_CASES,
    ids=[f"{text.strip() or 'empty'}|{labels}" for text, labels, _ in LABEL_MATCH_CASES],
)
def test_label_selector_matches(text: str, labels: dict[str, str], expected: bool) -> None:
    assert parse_label_selector(text).matches(labels) is expected


CANONICAL_CASES = [
    ("", ""),
    ("tier=frontend,app=web", "app=web,tier=frontend"),
    ("app==web", "app=web"),
    ("b notin (z, y, y), a in (c,b)", "a in (b,c),b notin (y,z)"),
    ("!gpu , zone", "!gpu,zone"),
    ("app!=web", "app!=web"),
    ("n>1", "n>1"),
]


@pytest.mark.parametrize(("text", "expected"), CANONICAL_CASES, ids=[c[0] or "empty" for c in CANONICAL_CASES])
def test_label_selector_canonical_string(text: str, expected: str) -> None:
    selector = parse_label_selector(text)
    assert str(selector) == expected
    # The canonical form parses back to an equal selector.
    assert parse_label_selector(str(selector)) == selector


def test_label_selector_equality_ignores_term_order() -> None:
    assert parse_label_selector("a=1,b=2") == parse_label_selector("b=2, a=1")
    assert parse_label_selector("").empty
    assert not parse_label_selector("a").empty


LABEL_ERROR_CASES = [
    ("app=web,", "expected: ! or identifier"),
    (",app=web", "found ','"),
    ("app in web", "expected: '('"),
    ("app in ()", "values set can't be empty"),
    ("app in (a b)", "expected: ',' or ')'"),
    ("app in (a", "found ''"),
    ("app == = web", "found '='"),
    ("app web", "expected: in, notin, =, ==, !=, gt, lt"),
    ("!", "expected: identifier"),
    ("!app=web", "expected: ',' or 'end of string'"),
    ("-app=web", "name part must consist of"),
    ("a b c=d", "expected: in, notin"),
    ("app=-web", "Invalid value: '-web'"),
    ("app=" + "v" * 64, "no more than 63 characters"),
    ("Example.com/team=ml", "prefix part must be a lowercase RFC 1123 subdomain"),
    ("/team=ml", "prefix part must be non-empty"),
    ("n>x", "must be an integer"),
    ("n>", "must be an integer"),
]


@pytest.mark.parametrize(("text", "fragment"), LABEL_ERROR_CASES, ids=[c[0][:30] for c in LABEL_ERROR_CASES])
def test_label_selector_errors(text: str, fragment: str) -> None:
    with pytest.raises(SelectorError) as info:
        parse_label_selector(text)
    message = str(info.value)
    assert message.startswith("unable to parse requirement: ")
    assert fragment in message


# (matchLabels, matchExpressions, labels, expected)
SPEC_CASES = [
    (None, None, WEB, True),
    ({}, [], BARE, True),
    ({"app": "web"}, None, WEB, True),
    ({"app": "web"}, None, DB, False),
    (None, [{"key": "env", "operator": "In", "values": ["prod", "dev"]}], DB, True),
    (None, [{"key": "env", "operator": "NotIn", "values": ["prod"]}], WEB, False),
    (None, [{"key": "tier", "operator": "Exists"}], WEB, True),
    (None, [{"key": "tier", "operator": "DoesNotExist", "values": []}], WEB, False),
    ({"app": "web"}, [{"key": "tier", "operator": "Exists"}], WEB, True),
    ({"app": "db"}, [{"key": "tier", "operator": "Exists"}], DB, False),
]


@pytest.mark.parametrize(
    ("match_labels", "match_expressions", "labels", "expected"),
    SPEC_CASES,
    ids=[f"{ml}|{me}|{labels}" for ml, me, labels, _ in SPEC_CASES],
)
def test_label_selector_from_spec(
    match_labels: dict[str, str] | None,
    match_expressions: list[dict[str, object]] | None,
    labels: dict[str, str],
    expected: bool,
) -> None:
    assert label_selector_from_spec(match_labels, match_expressions).matches(labels) is expected


def test_label_selector_from_spec_renders_like_the_query_parameter() -> None:
    selector = label_selector_from_spec({"app": "web"}, [{"key": "env", "operator": "In", "values": ["prod", "dev"]}])
    assert str(selector) == "app=web,env in (dev,prod)"
    assert selector == parse_label_selector(str(selector))


SPEC_ERROR_CASES = [
    ({"app": "bad value"}, None, "Invalid value"),
    (
        None,
        [{"key": "env", "operator": "Like", "values": ["x"]}],
        "'Like' is not a valid label selector operator",
    ),
    (None, [{"key": "env", "operator": "In", "values": []}], "values set can't be empty"),
    (None, [{"key": "env", "operator": "In"}], "values set can't be empty"),
    (None, [{"key": "env", "operator": "Exists", "values": ["x"]}], "values set must be empty"),
    (None, [{"operator": "Exists"}], "matchExpressions[0].key: Required value"),
    (None, [{"key": "env", "operator": "In", "values": "prod"}], "must be a list of strings"),
]


@pytest.mark.parametrize(
    ("match_labels", "match_expressions", "fragment"),
    SPEC_ERROR_CASES,
    ids=[fragment for *_, fragment in SPEC_ERROR_CASES],
)
def test_label_selector_from_spec_errors(
    match_labels: dict[str, str] | None,
    match_expressions: list[dict[str, object]] | None,
    fragment: str,
) -> None:
    with pytest.raises(SelectorError) as info:
        label_selector_from_spec(match_labels, match_expressions)
    assert fragment in str(info.value)


POD = {
    "metadata.name": "web-1",
    "metadata.namespace": "default",
    "status.phase": "Running",
    "spec.nodeName": "",
}

# (selector, fields, expected)
FIELD_MATCH_CASES = [
    ("", POD, True),
    ("metadata.name=web-1", POD, True),
    ("metadata.name==web-1", POD, True),
    ("metadata.name=web-2", POD, False),
    ("metadata.name!=web-2", POD, True),
    ("status.phase=Running,metadata.namespace=default", POD, True),
    ("status.phase=Running,metadata.namespace=kube-system", POD, False),
    ("metadata.name=web-1,metadata.name=web-1", POD, True),
    ("metadata.name=web-1,metadata.name=web-2", POD, False),
    ("spec.nodeName=", POD, True),
    ("spec.nodeName!=", POD, False),
    ("spec.restartPolicy=", POD, True),
    ("spec.restartPolicy=Always", POD, False),
    ("involvedObject.name=a\\,b", {"involvedObject.name": "a,b"}, True),
    ("involvedObject.name=a\\=b", {"involvedObject.name": "a=b"}, True),
    ("metadata.name=web-1,", POD, True),
]


@pytest.mark.parametrize(
    ("text", "fields", "expected"),
    FIELD_MATCH_CASES,
    ids=[c[0] or "empty" for c in FIELD_MATCH_CASES],
)
def test_field_selector_matches(text: str, fields: dict[str, str], expected: bool) -> None:
    assert parse_field_selector(text).matches(fields) is expected


def test_field_selector_keys_and_pinned_values() -> None:
    selector = parse_field_selector(
        "involvedObject.namespace=default,involvedObject.uid=u1,involvedObject.name=web,type!=Normal"
    )
    assert selector.keys == frozenset({"involvedObject.namespace", "involvedObject.uid", "involvedObject.name", "type"})
    assert selector.required_value("involvedObject.name") == "web"
    assert selector.required_value("type") is None
    assert parse_field_selector("").keys == frozenset()
    assert parse_field_selector("").empty
    assert str(parse_field_selector("a==x,b!=y\\,z")) == "a=x,b!=y\\,z"
    assert isinstance(selector, FieldSelector)


FIELD_ERROR_CASES = [
    ("metadata.name", "invalid selector: 'metadata.name'; can't understand 'metadata.name'"),
    ("a=b=c", "unescaped character '='"),
    ("a=b\\x", "invalid escape sequence"),
    ("a=b\\", "invalid escape sequence"),
]


@pytest.mark.parametrize(("text", "message"), FIELD_ERROR_CASES, ids=[c[0] for c in FIELD_ERROR_CASES])
def test_field_selector_errors(text: str, message: str) -> None:
    with pytest.raises(SelectorError) as info:
        parse_field_selector(text)
    assert message in str(info.value)


SUPPORTED = ("metadata.name", "metadata.namespace", "status.phase", "spec.nodeName")

CHECK_CASES = [
    ("", None),
    ("metadata.name=a,metadata.name=a", None),
    ("status.phase!=Succeeded,spec.nodeName=n1", None),
    ("spec.foo=bar", "field label not supported: spec.foo"),
    ("metadata.name=a,status.bogus=x", "field label not supported: status.bogus"),
]


@pytest.mark.parametrize(("text", "error"), CHECK_CASES, ids=[c[0] or "empty" for c in CHECK_CASES])
def test_check_field_selector(text: str, error: str | None) -> None:
    selector = parse_field_selector(text)
    if error is None:
        check_field_selector(selector, SUPPORTED)
    else:
        with pytest.raises(SelectorError) as info:
            check_field_selector(selector, SUPPORTED)
        assert str(info.value) == error


def test_selector_error_is_a_value_error() -> None:
    assert issubclass(SelectorError, ValueError)
    assert LabelSelector().matches({"anything": "goes"})
