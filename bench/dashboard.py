"""Dashboard figures in a real browser: a 1,000-job list's render time, a report's way to an open chart.

Issue 40's goals: "a 1,000-job list renders in <= 1 s; a report reaches an open chart in <= 2 s".
A plane of its own (``yard up`` in a temporary home) serves the dashboard; headless Debian
Chromium, driven by Playwright with the browser test's flags, logs in with ``yard dashboard``'s
one-time link and measures:

1. the jobs list with 1,000 PyTorchJobs that never run a pod (``spec.runPolicy.suspend: true``,
   created through the API, the operator left to settle them first): from navigation to
   ``/dashboard/#/`` until the 1,000th ``tr[data-job]`` is in the document and the next frame is
   painted (in the page: ``performance.now()``, whose origin is the navigation's start); and the
   render alone, from the jobs stream's ``snapshot`` event reaching the page (a listener the
   benchmark adds to every ``EventSource`` before the app's own) to that same frame: parsing,
   the app's batching frame, sorting and Preact's render of 1,000 rows. The first load is cold
   (no cached assets), the rest warm; the server's ``GET /dashboard/api/jobs`` of the same rows
   is timed beside them.
2. report -> chart: a job's page open with its loss chart; the benchmark writes a new report into
   the job's status as the status server does (a merge patch of the status subresource with
   ``status.trainingProgress``) and times, in wall-clock milliseconds on this one machine, from
   just before the write until the chart's ``figure[data-metric="loss"]`` ``data-points`` grows
   (a ``MutationObserver`` in the page stamps it). Ten reports; median and max.

Prints figures and their ratio to the goals; asserts nothing. ``--jobs N`` and ``--reports N``
change the sizes.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import ssl
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from playwright.sync_api import Page, sync_playwright

REPO = Path(__file__).resolve().parents[1]
GOAL_LIST_S = 1.0
GOAL_CHART_S = 2.0
JOBS = "/apis/kubeflow.org/v1/namespaces/default/pytorchjobs"
CHROMIUM_FLAGS = [  # as tests/e2e/test_dashboard_browser.py
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
WAIT_MS = 120_000

# Added to every page before its own scripts: when the jobs stream's snapshot arrives, and when
# the list first holds `want` rows (then, a frame later, when that frame has been painted).
LIST_PROBE = """
(() => {
  const want = %d;
  const b = (window.__bench = {});
  const Original = window.EventSource;
  window.EventSource = class extends Original {
    constructor(...args) {
      super(...args);
      this.addEventListener('snapshot', () => { if (b.snapshot == null) b.snapshot = performance.now(); });
    }
  };
  const seen = new MutationObserver(() => {
    if (b.dom != null || document.querySelectorAll('tr[data-job]').length < want) return;
    b.dom = performance.now();
    seen.disconnect();
    requestAnimationFrame(() => setTimeout(() => { b.painted = performance.now(); }, 0));
  });
  seen.observe(document, { childList: true, subtree: true });
})();
"""

# Stamps (wall clock, ms) the moment the loss chart draws more points than it does now.
CHART_PROBE = """
() => {
  const figure = document.querySelector('figure[data-metric="loss"]');
  const before = Number(figure.getAttribute('data-points'));
  window.__grown = null;
  const seen = new MutationObserver(() => {
    const now = document.querySelector('figure[data-metric="loss"]');
    if (now && Number(now.getAttribute('data-points')) > before) {
      window.__grown = Date.now();
      seen.disconnect();
    }
  });
  seen.observe(document.body, { subtree: true, attributes: true, childList: true, attributeFilter: ['data-points'] });
  return before;
}
"""


# -- the plane and its API -------------------------------------------------------------------------


@dataclass
class Plane:
    home: Path
    url: str
    yard: Callable[..., subprocess.CompletedProcess[str]]
    context: ssl.SSLContext
    token: str

    def call(self, method: str, path: str, body: Any = None, content_type: str = "application/json") -> Any:
        data = json.dumps(body).encode() if body is not None else None
        headers = {"Authorization": f"Bearer {self.token}", "Content-Type": content_type}
        request = urllib.request.Request(self.url + path, data=data, method=method, headers=headers)
        with urllib.request.urlopen(request, context=self.context, timeout=60) as answer:
            return json.loads(answer.read() or b"{}")


@contextmanager
def plane() -> Iterator[Plane]:
    with tempfile.TemporaryDirectory(prefix="yard-bench-dashboard-") as tmp:
        home = Path(tmp)
        env = {**os.environ, "PYTHONPATH": f"{REPO / 'src'}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
        env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"

        def yard(*args: str) -> subprocess.CompletedProcess[str]:
            argv = [sys.executable, "-m", "trainyard.cli.main", "--home", str(home), *args]
            return subprocess.run(argv, check=True, env=env, cwd=REPO, capture_output=True, text=True)

        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        yard("up", "--port", str(port), "--workspace", str(home))
        try:
            url = json.loads((home / "plane.json").read_text())["url"]
            context = ssl.create_default_context(cafile=str(home / "pki" / "ca.crt"))
            yield Plane(home, url, yard, context, (home / "pki" / "token").read_text().strip())
        finally:
            subprocess.run(
                [sys.executable, "-m", "trainyard.cli.main", "--home", str(home), "down"],
                check=False,
                env=env,
                cwd=REPO,
                capture_output=True,
            )


def suspended_job(name: str) -> dict[str, Any]:
    container = {"name": "pytorch", "image": "python:3.11", "command": ["python3", "-c", "pass"]}
    master = {"replicas": 1, "restartPolicy": "Never", "template": {"spec": {"containers": [container]}}}
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"runPolicy": {"suspend": True}, "pytorchReplicaSpecs": {"Master": master}},
    }


def create_jobs(api: Plane, count: int) -> float:
    started = time.perf_counter()
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda i: api.call("POST", JOBS, suspended_job(f"bench-{i:04d}")), range(count)))
    return time.perf_counter() - started


def settle(api: Plane, count: int, timeout: float = 180.0) -> bool:
    """Wait until the operator has marked every job Suspended, so the list is measured at rest."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        items = api.call("GET", JOBS)["items"]
        done = sum(
            any(c.get("type") == "Suspended" and c.get("status") == "True" for c in conditions(j)) for j in items
        )
        if done >= count:
            return True
        time.sleep(0.5)
    return False


def conditions(job: dict[str, Any]) -> list[dict[str, Any]]:
    return list((job.get("status") or {}).get("conditions") or [])


def report(api: Plane, name: str, epoch: int) -> None:
    """One report, written as the status server writes it: a merge patch of the status subresource."""
    progress = {
        "currentEpoch": epoch,
        "totalEpochs": 100,
        "progressPercentage": epoch,
        "metrics": {"loss": round(2.0 / (epoch + 1), 5), "accuracy": round(1 - 1.0 / (epoch + 1), 5)},
        "lastUpdateTime": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
    }
    body = {"status": {"trainingProgress": progress}}
    api.call("PATCH", f"{JOBS}/{name}/status", body, "application/merge-patch+json")


# -- the measurements ------------------------------------------------------------------------------


def login(api: Plane, page: Page) -> None:
    printed = api.yard("dashboard", "--no-browser").stdout
    link = next(line for line in printed.splitlines() if "/dashboard/login?token=" in line).strip()
    page.goto(link)
    page.get_by_role("navigation", name="Main").wait_for()


def list_load(page: Page, url: str) -> dict[str, float]:
    page.goto("about:blank")
    page.goto(url + "/dashboard/#/")
    page.wait_for_function("window.__bench && window.__bench.painted != null", timeout=WAIT_MS)
    found: dict[str, float] = page.evaluate("window.__bench")
    return {"total": found["painted"] / 1000, "render": (found["painted"] - found["snapshot"]) / 1000}


def api_jobs(api: Plane, cookies: list[Any]) -> float:
    cookie = "; ".join(f"{c['name']}={c['value']}" for c in cookies if c["name"] == "yard-dashboard")
    request = urllib.request.Request(api.url + "/dashboard/api/jobs", headers={"Cookie": cookie})
    started = time.perf_counter()
    with urllib.request.urlopen(request, context=api.context, timeout=60) as answer:
        answer.read()
    return time.perf_counter() - started


def chart_latency(api: Plane, page: Page, name: str, reports: int) -> list[float]:
    page.goto(f"{api.url}/dashboard/#/jobs/default/pytorchjobs/{name}")
    page.locator('figure[data-metric="loss"]').wait_for()
    seconds = []
    for epoch in range(2, reports + 2):
        page.evaluate(CHART_PROBE)
        began = time.time() * 1000
        report(api, name, epoch)
        page.wait_for_function("window.__grown != null", timeout=WAIT_MS)
        seconds.append((page.evaluate("window.__grown") - began) / 1000)
    return seconds


def ratio(value: float, goal: float) -> str:
    return f"(goal {goal:g} s: {value / goal:.2f}x)"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--loads", type=int, default=5, help="page loads of the list (the first one cold)")
    parser.add_argument("--reports", type=int, default=10)
    args = parser.parse_args()
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        raise SystemExit("Debian's chromium is not installed: `make test` installs it (apt-get install chromium)")
    if not (REPO / "src" / "trainyard" / "dashboard" / "static" / "index.html").is_file():
        raise SystemExit("the dashboard's front end is not built: `make install` (npm run build in web/)")
    print(f"trainyard dashboard benchmark, {datetime.now(UTC):%Y-%m-%d %H:%M} UTC, load {os.getloadavg()[0]:.2f}")
    with plane() as api, sync_playwright() as driver:
        took = create_jobs(api, args.jobs)
        print(f"created {args.jobs} suspended PyTorchJobs in {took:.1f} s")
        if not settle(api, args.jobs):
            print("  (the operator had not marked them all Suspended within 180 s; measuring anyway)")
        browser = driver.chromium.launch(executable_path=chromium, args=CHROMIUM_FLAGS)
        context = browser.new_context(ignore_https_errors=True, viewport={"width": 1400, "height": 900})
        context.add_init_script(LIST_PROBE % args.jobs)
        page = context.new_page()
        page.set_default_timeout(WAIT_MS)
        login(api, page)
        loads = [list_load(page, api.url) for _ in range(args.loads)]
        served = statistics.median(api_jobs(api, context.cookies()) for _ in range(3))
        cold, warm = loads[0], loads[1:] or loads
        total = statistics.median(x["total"] for x in warm)
        render = statistics.median(x["render"] for x in warm)
        head = f"jobs list, {args.jobs} jobs"
        print(f"{head}, cold load: {cold['total']:.2f} s navigation to rows {ratio(cold['total'], GOAL_LIST_S)}")
        print(f"{head}: {total:.2f} s navigation to rows, median of {len(warm)} {ratio(total, GOAL_LIST_S)}")
        print(f"{head}: {render:.2f} s to render from the snapshot's arrival {ratio(render, GOAL_LIST_S)}")
        print(f"  GET /dashboard/api/jobs ({args.jobs} rows) answered in {served:.3f} s (median of 3)")

        api.call("POST", JOBS, suspended_job("bench-chart"))
        report(api, "bench-chart", 1)
        latencies = chart_latency(api, page, "bench-chart", args.reports)
        median, worst = statistics.median(latencies), max(latencies)
        print(f"report -> chart: {median:.2f} s median of {len(latencies)} {ratio(median, GOAL_CHART_S)}")
        print(f"report -> chart: {worst:.2f} s max {ratio(worst, GOAL_CHART_S)}")
        print("  each: " + " ".join(f"{x:.2f}" for x in latencies))
        browser.close()


if __name__ == "__main__":
    main()
