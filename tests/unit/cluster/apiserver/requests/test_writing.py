"""A write's options read from its request once: the directive, the manager, dry run and force."""

from __future__ import annotations

import pytest
from aiohttp import web
from aiohttp.test_utils import make_mocked_request
from multidict import CIMultiDict

from trainyard.cluster.server.apiserver import errors
from trainyard.cluster.server.apiserver.requests.writing import WriteOptions, field_validation, write_options


def request(query: str, agent: str = "kubectl/v1.32.0 (linux/amd64)") -> web.Request:
    return make_mocked_request(
        "PATCH", f"/api/v1/namespaces/ns/configmaps/c?{query}", CIMultiDict({"User-Agent": agent})
    )


def test_unknown_field_validation_directive() -> None:
    with pytest.raises(errors.ApiError) as caught:
        field_validation("Loud", "PatchOptions")
    assert caught.value.code == 422
    assert caught.value.message == (
        'PatchOptions.meta.k8s.io "" is invalid: fieldValidation: Unsupported value: "Loud": '
        'supported values: "", "Ignore", "Strict", "Warn"'
    )
    assert field_validation(None, "CreateOptions") == "Warn"


def test_a_write_is_managed_by_its_client_unless_it_names_a_manager() -> None:
    options = write_options(request("dryRun=All&force=true"), "UpdateOptions")
    assert options == WriteOptions(dry_run=True, field_validation="Warn", manager="kubectl", warnings=[])
    named = write_options(request("fieldManager=me&fieldValidation=Strict"), "UpdateOptions")
    assert (named.manager, named.field_validation, named.dry_run) == ("me", "Strict", False)


def test_an_apply_takes_its_field_manager_and_force() -> None:
    options = write_options(request("fieldManager=me&force=true"), "PatchOptions", applying=True)
    assert (options.manager, options.force) == ("me", True)


def test_each_request_collects_its_own_warnings() -> None:
    first = write_options(request(""), "CreateOptions")
    second = write_options(request(""), "CreateOptions")
    assert first.warnings == [] and first.warnings is not second.warnings


def test_the_directive_is_checked_before_the_manager() -> None:
    with pytest.raises(errors.ApiError) as caught:
        write_options(request(f"fieldValidation=Loud&fieldManager={'m' * 129}"), "CreateOptions")
    assert caught.value.code == 422
