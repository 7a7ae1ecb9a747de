"""The dashboard in a real browser: headless Debian Chromium driven by Playwright, on a plane of its own.

One walk through what a user does: log in with ``yard dashboard``'s one-time link, watch a running
job's progress move in the jobs list, open its page, read its log, see its loss chart gain a
point, delete it (confirming), and find it in the history with its stored log; then compare it
with a finished run on one chart; and a Katib Experiment's page: its trials (the best marked), the
objective per trial and every trial's curve. The screenshots in docs/images/ are taken here, so they show
the dashboard as it is. Training is a ``python -c`` loop reporting with ``trainyard.runtime``
(``dashboard_jobs``).
"""

from __future__ import annotations

import json
import shutil
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest
from dashboard_jobs import experiment, pytorchjob
from playwright.sync_api import Browser, Page, expect, sync_playwright

from conftest import REPO, Kubectl, Plane, eventually, own_plane

pytestmark = pytest.mark.e2e

SHOTS = REPO / "docs" / "images"
CHROMIUM_FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    # this machine's network is closed: Chromium's own background traffic would only be refused
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
WAIT_MS = 60_000

QUEUES = """
apiVersion: kueue.x-k8s.io/v1beta1
kind: ResourceFlavor
metadata: {name: default-flavor}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata: {name: team-a}
spec:
  namespaceSelector: {}
  resourceGroups:
    - coveredResources: [cpu, memory]
      flavors:
        - name: default-flavor
          resources:
            - {name: cpu, nominalQuota: 4}
            - {name: memory, nominalQuota: 8Gi}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: LocalQueue
metadata: {name: team-a, namespace: default}
spec: {clusterQueue: team-a}
"""


def chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    assert found, "Debian's chromium is not installed: `make test` installs it (apt-get install chromium)"
    return found


@pytest.fixture(scope="module")
def plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Plane]:
    yield from own_plane(tmp_path_factory, "dashboard")


@pytest.fixture(scope="module")
def kube(plane: Plane, tmp_path_factory: pytest.TempPathFactory) -> Kubectl:
    return Kubectl(plane, tmp_path_factory.mktemp("dashboard-kube-cache"))


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with sync_playwright() as driver:
        launched = driver.chromium.launch(executable_path=chromium(), args=CHROMIUM_FLAGS)
        yield launched
        launched.close()


def login_link(plane: Plane) -> str:
    printed = plane.yard("dashboard", "--no-browser").stdout
    return next(line for line in printed.splitlines() if "/dashboard/login?token=" in line).strip()


def new_page(browser: Browser, plane: Plane) -> Page:
    # The plane's certificate is signed by its own CA, which this browser profile does not know.
    context = browser.new_context(ignore_https_errors=True, viewport={"width": 1400, "height": 900})
    page = context.new_page()
    page.set_default_timeout(WAIT_MS)
    page.goto(login_link(plane))
    return page


def shot(page: Page, name: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / f"dashboard-{name}.png"), full_page=False)


def test_a_login_link_works_once_and_nothing_is_served_without_a_session(plane: Plane, browser: Browser) -> None:
    link = login_link(plane)
    context = browser.new_context(ignore_https_errors=True)
    page = context.new_page()
    page.set_default_timeout(WAIT_MS)
    page.goto(link)
    expect(page.get_by_role("navigation", name="Main")).to_be_visible()
    again = browser.new_context(ignore_https_errors=True).new_page()
    answer = again.goto(link)
    assert answer is not None and answer.status == 401, "a spent code opens no second session"
    data = again.goto(plane.url + "/dashboard/api/jobs")
    assert data is not None and data.status == 401
    assert "yard dashboard" in json.loads(data.text())["message"]
    for headers in ({}, {"Authorization": "Bearer not-the-owners"}):
        mint = urllib.request.Request(plane.url + "/dashboard/api/login-codes", method="POST", headers=headers)
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(mint, context=plane.ssl_context(), timeout=30)
        assert refused.value.code == 401, "only the kubeconfig's token mints a code"
    context.close()


def test_watch_a_job_train_then_delete_it_and_find_it_in_history(plane: Plane, kube: Kubectl, browser: Browser) -> None:
    kube("apply", "-f", "-", input=QUEUES)
    kube("create", "-f", "-", input=json.dumps(pytorchjob("digits-baseline", 8, 0.3)))
    kube("create", "-f", "-", input=json.dumps(pytorchjob("digits-long", 400, 0.6)))
    kube("create", "-f", "-", input=json.dumps(experiment("digits-search")))
    page = new_page(browser, plane)

    # the jobs list: the running job's progress moves without a reload
    row = page.locator('tr[data-job="default/pytorchjobs/digits-long"]')
    expect(row.locator('[data-col="state"]')).to_have_text("Running")
    progress = row.locator('[data-col="progress"]')
    expect(progress).not_to_have_text("")
    first = eventually(lambda: _percent(progress.inner_text()), what="a progress figure", timeout=90)
    eventually(lambda: (_percent(progress.inner_text()) or 0) > first, what="the progress to move", timeout=90)
    expect(page.locator('tr[data-job="default/pytorchjobs/digits-baseline"] [data-col="state"]')).to_have_text(
        "Succeeded"
    )
    shot(page, "jobs")

    # its page: the log, and a chart that gains a point as reports come
    row.locator('[data-col="name"] a').click()
    expect(page.locator("h1")).to_have_text("digits-long")
    pane = page.locator('[data-pod="digits-long-master-0"] pre')
    expect(pane).to_contain_text("epoch")
    chart = page.locator('figure[data-metric="loss"]')
    expect(chart).to_be_visible()
    seen = eventually(lambda: int(chart.get_attribute("data-points") or 0), what="chart points")
    eventually(lambda: int(chart.get_attribute("data-points") or 0) > seen, what="a new point on the chart")
    shot(page, "job")

    # delete it, confirming in the dialog
    uid = kube.json("get", "pytorchjob", "digits-long")["metadata"]["uid"]
    page.get_by_role("button", name="Delete").click()
    dialog = page.get_by_role("dialog")
    expect(dialog).to_be_visible()
    dialog.get_by_role("button", name="Confirm").click()
    eventually(lambda: kube.run("get", "pytorchjob", "digits-long").returncode != 0, what="the job to be deleted")

    # the history keeps it, with its log
    page.get_by_role("navigation", name="Main").get_by_role("link", name="History").click()
    stored = page.locator(f'tr[data-uid="{uid}"]')
    expect(stored).to_be_visible()
    baseline = kube.json("get", "pytorchjob", "digits-baseline")["metadata"]["uid"]
    expect(page.locator(f'tr[data-uid="{baseline}"]')).to_be_visible()
    shot(page, "history")
    stored.get_by_role("link").first.click()
    expect(page.locator("h1")).to_have_text("digits-long")
    expect(page.locator('[data-pod="digits-long-master-0"] pre')).to_contain_text("epoch")
    shot(page, "history-job")

    # compare the two runs' curves
    page.goto(f"{plane.url}/dashboard/#/compare?a={baseline}&b={uid}")
    compared = page.locator('figure[data-metric="loss"]')
    expect(compared).to_be_visible()
    eventually(lambda: int(compared.get_attribute("data-points") or 0) > 0, what="points on the compare chart")
    shot(page, "compare")

    page.get_by_role("navigation", name="Main").get_by_role("link", name="Queues").click()
    expect(page.get_by_text("team-a").first).to_be_visible()
    shot(page, "queues")

    page.get_by_role("navigation", name="Main").get_by_role("link", name="Runtimes").click()
    expect(page.get_by_text("torch-distributed").first).to_be_visible()
    shot(page, "runtimes")

    # a search's page: its trials, the best one marked, the objective per trial, every trial's curve
    page.goto(f"{plane.url}/dashboard/#/jobs/default/experiments/digits-search")
    expect(page.locator(".summary .state")).to_have_text("Succeeded", timeout=120_000)
    trials = page.locator('table[aria-label="Trials"] tbody tr')
    expect(trials).to_have_count(4)
    best = kube.json("get", "experiment", "digits-search")["status"]["currentOptimalTrial"]["bestTrialName"]
    expect(page.locator(f'tr[data-trial="{best}"]')).to_contain_text("best")
    per_trial = page.locator('figure[aria-label="Chart of loss against trial"]')
    expect(per_trial).to_have_attribute("data-points", "8")  # each trial's loss and the best so far
    expect(page.locator('figure[aria-label="Chart of loss against report"]')).to_have_attribute("data-points", "24")
    shot(page, "experiment")


def _percent(text: str) -> float | None:
    digits = "".join(ch for ch in text if ch.isdigit() or ch == ".")
    try:
        return float(digits)
    except ValueError:
        return None
