"""The cluster-only operator flags: the webhook's and the wait-for-master init container's."""

from __future__ import annotations

from pathlib import Path

import pytest

from trainyard.frameworks.network import WaitForMaster
from trainyard.frameworks.pytorch.flags import wait_for_master
from trainyard.operator import flags
from trainyard.operator.flags import OperatorOptions
from trainyard.operator.webhook import WebhookSettings, has_certificates


def parse(*argv: str) -> OperatorOptions:
    return flags.parse(argv)


def test_defaults_are_upstreams_where_upstream_has_one() -> None:
    options = parse()

    assert options.webhook == WebhookSettings(port=9443, cert_dir=Path("/tmp/k8s-webhook-server/serving-certs"))
    assert wait_for_master(options.plugin_flags) == WaitForMaster(image="busybox:1.36", max_tries=100)


def test_flags_set_the_settings() -> None:
    options = parse(
        "--webhook-server-port",
        "10250",
        "--webhook-cert-dir",
        "/certs",
        "--pytorch-init-container-image",
        "mirror.local/busybox:1.36",
        "--pytorch-init-container-max-tries",
        "7",
    )

    settings = options.webhook
    assert (settings.port, settings.cert_dir, settings.cert_file) == (10250, Path("/certs"), Path("/certs/tls.crt"))
    assert wait_for_master(options.plugin_flags) == WaitForMaster(image="mirror.local/busybox:1.36", max_tries=7)


def test_empty_image_disables_the_init_container() -> None:
    assert wait_for_master(parse("--pytorch-init-container-image", "").plugin_flags) is None


def test_max_tries_below_one_is_refused() -> None:
    with pytest.raises(SystemExit, match="at least 1"):
        wait_for_master(parse("--pytorch-init-container-max-tries", "0").plugin_flags)


def test_webhook_is_off_without_certificates(tmp_path: Path) -> None:
    settings = WebhookSettings(cert_dir=tmp_path)
    assert not has_certificates(settings)

    (tmp_path / "tls.crt").write_text("x")
    assert not has_certificates(settings)
    (tmp_path / "tls.key").write_text("x")
    assert has_certificates(settings)
