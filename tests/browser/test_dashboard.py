"""Live dashboard end to end: a stand-in training (tests/tools/live_writer) writes a run while
`trainscope serve` serves it and Debian chromium watches the page:
  - the charts update while we watch (their data-point count grows) and are really drawn,
  - the rule badge goes from InProgress to IssuesFound when the injected fault fires,
  - the stop button (with its confirmation) stops the training: the writer process exits.
Env: TRAINSCOPE_BIN (the CLI), optional TRAINSCOPE_LIVE_WRITER."""
import pathlib
import re
import secrets
import shutil
import tempfile
import urllib.error
import urllib.request

import pytest

from .conftest import ROOT, Proc, check_charts, cli_path, open_page, screenshot, tool_path, until

URL = re.compile(r"http://127\.0\.0\.1:\d+/")


def serve(runs: pathlib.Path, token: str) -> tuple[Proc, str]:
    """Starts `trainscope serve` on a free port; returns it and its URL."""
    p = Proc([cli_path(), "serve", runs, "--port", "0", "--token", token,
              "--web-root", ROOT / "web"])
    url = until(lambda: (URL.search(p.stdout) or [None])[0], "trainscope serve to listen")
    return p, url


def points(page, chart_id: str) -> int:
    return page.evaluate("""(id) => {
      const fig = document.querySelector(`figure[data-chart="${id}"]`);
      return fig ? Number(fig.dataset.points || 0) : 0;
    }""", chart_id)


@pytest.fixture
def work():
    d = pathlib.Path(tempfile.mkdtemp(prefix="ts-dash-"))
    yield d
    shutil.rmtree(d, ignore_errors=True)


def test_dashboard_follows_a_live_training_shows_the_rule_firing_and_stops_it(browser, work):
    writer_bin = tool_path("live_writer", "TRAINSCOPE_LIVE_WRITER")
    if writer_bin is None:
        pytest.skip("live_writer test tool not built")
    runs = work / "runs"
    runs.mkdir()
    token = "dash-" + secrets.token_hex(6)
    writer = Proc([writer_bin, runs / "job", "--steps", "0", "--step-ms", "100",
                   "--fault-step", "70", "--max-seconds", "170", "--name", "job"])
    server = None
    try:
        server, url = serve(runs, token)
        until(lambda: (runs / "job" / "run.json").exists(), "the run")
        origin = url.rstrip("/")
        page, problems = open_page(browser, url + "?token=" + token + "#/",
                                   local=lambda u: u.startswith(origin + "/"))

        # The run list shows the live run and links to it.
        page.wait_for_selector('a[data-run="job"]')
        page.click('a[data-run="job"]')
        page.wait_for_selector("#run-state")
        assert page.text_content("#run-state") == "live"

        # Charts update while we watch.
        page.wait_for_function("""() => Number(document.querySelector(
            'figure[data-chart="step_time"]')?.dataset.points || 0) >= 2""")
        first, first_loss = points(page, "step_time"), points(page, "scalar:losses/loss")
        page.wait_for_function("""(n) => Number(document.querySelector(
            'figure[data-chart="step_time"]').dataset.points) >= n + 5""", arg=first,
                               timeout=30000)
        assert points(page, "scalar:losses/loss") > first_loss, "loss chart grows"
        assert points(page, "system:gpu") > 0, "GPU chart drawn"
        assert page.query_selector('figure[data-chart="step_time"] canvas'), "chart canvas"
        check_charts(page, 3)  # drawn, with readable y labels, after the updates

        # The rule is in progress, then the injected fault fires (step 70).
        rule = '.rule[data-rule="loss_not_decreasing"]'
        page.wait_for_selector(rule)
        assert page.get_attribute(rule, "data-status") == "InProgress"
        page.wait_for_selector(rule + '[data-status="IssuesFound"]', timeout=60000)
        assert re.search(r"loss_not_decreasing: IssuesFound", page.text_content("#events"))
        screenshot(browser, page, "dashboard-live")

        # Stop: the button asks first; cancelling does nothing, confirming stops the training.
        page.click("#stop")
        page.wait_for_selector("#confirm:not([hidden])")
        page.click("#confirm-cancel")
        assert page.is_hidden("#confirm")
        assert writer.p.poll() is None, "still training after cancel"
        page.click("#stop")
        page.fill("#confirm-reason", "playwright says stop")
        page.click("#confirm-ok")
        assert writer.wait(30) == 0, "the training exits by itself"
        assert "stopped: playwright says stop" in writer.stdout
        page.wait_for_function(
            "() => document.querySelector('#run-state')?.textContent === 'ended'", timeout=30000)
        assert "playwright says stop" in page.text_content("#stop-state")

        assert problems.external == [], "no request leaves the server"
        assert [e for e in problems.console if e.startswith("pageerror")] == [], "no page errors"
        page.close()
    finally:
        writer.stop()
        if server:
            server.stop()


def status(url: str, headers=None) -> int:
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers or {})) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code


def test_requests_without_the_token_are_refused(work):
    server, url = serve(work, "tok")
    try:
        assert status(url + "api/runs") == 401
        assert status(url + "api/runs?token=nope") == 401
        assert status(url + "api/runs", {"Authorization": "Bearer tok"}) == 200
        assert status(url + "static/dashboard/..%2f..%2fpackage.json") == 403
        # The chart library is served from the embedded copy of Debian's dygraphs.
        assert status(url + "static/dygraphs/dygraph.min.js", {"Authorization": "Bearer tok"}) == 200
    finally:
        server.stop()


def test_the_event_list_says_where_a_nan_began(browser, work):
    # a real training whose NaN began in a named module (tests/python/test_nan_origin.py's);
    # the dashboard's event list shows the nonfinite_origin event's words, not its JSON
    import torch
    from torch import nn

    import trainscope as ts
    runs = work / "runs"
    hook = ts.Hook(str(runs / "nan"), system_monitor_interval_ms=0,
                   rules=[ts.Rule("exploding_tensor", actions=["stop_training"])])
    model = nn.Sequential(nn.Linear(4, 4), nn.Linear(4, 1))
    hook.register_module(model)
    crit = hook.register_loss(nn.MSELoss())
    with torch.no_grad():
        model[1].weight.fill_(float("inf"))
    crit(model(torch.randn(3, 4)), torch.randn(3, 1))
    hook.close()
    token = "dash-" + secrets.token_hex(6)
    server = None
    try:
        server, url = serve(runs, token)
        origin = url.rstrip("/")
        page, problems = open_page(browser, url + "?token=" + token + "#/",
                                   local=lambda u: u.startswith(origin + "/"))
        page.wait_for_selector('a[data-run="nan"]')
        page.click('a[data-run="nan"]')
        said = "parameter 1.weight (4 Inf of 4 non-finite) was already non-finite"
        page.wait_for_function("(s) => (document.querySelector('#events')?.textContent || '')"
                               ".includes(s)", arg=said, timeout=30000)
        assert '"bad_input"' not in page.text_content("#events")
        assert [e for e in problems.console if e.startswith("pageerror")] == []
    finally:
        if server is not None:
            server.stop()
