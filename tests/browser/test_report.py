"""Browser tests of the HTML report: healthy and faulty synthetic runs (make_synthetic_run) and a
diverging one written here, each reported by the real CLI and opened in headless Debian
chromium. Every chart must be drawn with readable axes, the findings shown first, nothing may
go to the network and the console must stay clean."""
import json
import math
import pathlib
import re
import shutil
import tempfile

import pytest

from .conftest import (ARTIFACTS, check_charts, chart_facts, cli_path, colour_pixels, open_page,
                      run, screenshot, tool_path)

REPORT_BUDGET = 5 * 1024 * 1024  # bytes; docs/report.md (the C++ test holds 3 MiB for 50k steps)
CRITICAL = (220, 38, 38)         # marker colour of a critical finding (#dc2626)


def write_diverging_run(run_dir: pathlib.Path) -> None:
    """400 steps: the loss falls from 2.5 to 0.4, then grows to ~1e30 and is NaN from step 390
    on (with the exploding_tensor finding there); grad_norm holds zeros, values near 1 and one
    spike of 3e28, which rules out a log axis."""
    from trainscope import _core
    _core.create_or_open_run(str(run_dir), name="diverging", command=["train.py", "--lr", "10"],
                             config_json="{}", framework="test")
    w = _core.Writer(str(run_dir), "worker-0")
    t0 = _core.now_us()
    w.add_event("run_start", json.dumps({"worker": "worker-0"}), t0)
    for i in range(400):
        start = t0 + i * 100_000
        if i < 300:
            loss = 2.3 * math.exp(-i / 120) + 0.2
        elif i < 390:
            loss = 0.4 * 10 ** ((i - 300) / 89 * 30.4)  # 0.4 → 1e30
        else:
            loss = float("nan")
        grad = 3e28 if i == 350 else 0.0 if i % 5 == 0 else 1 + 0.5 * math.sin(i / 9)
        w.add_step(i, 0, i, start, start + 95_000)
        w.add_scalar("losses/loss", i, 0, i, loss, start + 95_000)
        w.add_scalar("grad_norm", i, 0, i, grad, start + 95_000)
    w.add_rule_event("exploding_tensor", "IssuesFound", step=390, tensors=["losses/loss"],
                     message="losses/loss is NaN", wall_us=t0 + 390 * 100_000 + 95_000)
    w.add_event("run_end", json.dumps({"worker": "worker-0", "steps": 400}), t0 + 40_000_000)
    assert w.close() is None


@pytest.fixture(scope="module")
def runs():
    """Reports of the healthy, faulty and diverging runs: {kind: report.html}, plus the work dir."""
    cli, synth = cli_path(), tool_path("make_synthetic_run", "TS_SYNTH_BIN")
    if synth is None:
        pytest.fail("make_synthetic_run not built: build first (./dev build) or set TS_SYNTH_BIN")
    work = pathlib.Path(tempfile.mkdtemp(prefix="ts-report-test-"))
    env = {"TRAINSCOPE_HOME": str(work / "home")}
    for kind in ("healthy", "faulty"):
        run([synth, work / kind, "--kind", kind, "--steps", "3000"])
        run([cli, "report", work / kind, "--instance", "g5.2xlarge"], env)
    write_diverging_run(work / "diverging")
    run([cli, "report", work / "diverging"], env)
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    yield {"work": work, "env": env, "cli": cli,
           **{k: work / k / "report" / "report.html" for k in ("healthy", "faulty", "diverging")}}
    shutil.rmtree(work, ignore_errors=True)


def test_faulty_run_findings_first_every_chart_drawn_no_console_errors(browser, runs):
    html = runs["faulty"]
    assert html.stat().st_size < REPORT_BUDGET
    page, problems = open_page(browser, html.as_uri())
    charts = check_charts(page, 8)
    ids = {c["id"] for c in charts}
    assert "grad-heatmap" in ids, "gradient heat map present"
    assert "step-hist" in ids, "step-time histogram present"
    # The rule firings are drawn as markers: the critical one in red on the loss chart.
    assert colour_pixels(page, 'figure[data-chart="losses"]', CRITICAL) > 50
    # Findings come first and carry severity colours and recommendations.
    assert page.eval_on_selector("main section", "s => s.id") == "findings"
    findings = page.eval_on_selector_all(".finding", """els => els.map(e => ({
        rule: e.dataset.rule, cls: e.className, rec: e.querySelector('.rec').textContent,
        color: getComputedStyle(e).borderLeftColor }))""")
    assert len(findings) == 4
    assert findings[0]["rule"] == "exploding_tensor"
    assert "critical" in findings[0]["cls"]
    assert findings[0]["color"] == "rgb(220, 38, 38)"
    loader = next(f for f in findings if f["rule"] == "dataloader")
    assert re.search(r"raise num_workers from 2 to \d+ and set pin_memory=True", loader["rec"])
    assert "4 findings" in page.text_content(".verdict")
    # Cost section with the stop saving and the instance advice.
    cost = page.text_content("#cost")
    assert "automatic stop" in cost
    assert "input pipeline" in cost
    # Profiled window links to the stored trace.
    assert page.get_attribute("#profile a", "href") == "../profile/trace-worker-0.json"
    assert "decode_jpeg" in page.text_content("#profile")
    screenshot(browser, page, "report-faulty")
    assert problems.console == []
    assert problems.external == []


def test_healthy_run_no_findings_charts_drawn_no_console_errors(browser, runs):
    page, problems = open_page(browser, runs["healthy"].as_uri())
    check_charts(page, 8)
    assert page.locator(".finding").count() == 0
    assert "No rule fired" in page.text_content("#findings .ok")
    assert "healthy" in page.text_content(".verdict")
    assert page.locator("#profile").count() == 0, "no profiled window section without data"
    screenshot(browser, page, "report-healthy")
    assert problems.console == []
    assert problems.external == []


def test_diverging_loss_is_drawn_on_a_log_axis_with_readable_labels(browser, runs):
    page, problems = open_page(browser, runs["diverging"].as_uri())
    charts = {c["id"]: c for c in check_charts(page, 3)}
    loss = charts["losses"]
    assert loss["scale"] == "log"
    assert "log scale" in loss["caption"]
    assert re.search(r"Log scale: the values span 30 orders of magnitude", loss["note"])
    texts = [lab["text"] for lab in loss["labels"]]
    assert "1" in texts and any(re.fullmatch(r"1e(25|30)", t) for t in texts), texts
    for lab in loss["labels"]:  # check_charts checked them too; say it here where it matters
        assert lab["inside"] and not lab["overflows"], lab
    assert colour_pixels(page, 'figure[data-chart="losses"]', CRITICAL) > 50, "finding marker"
    # grad_norm has zeros (no log axis) and one spike of 3e28: the axis shows the bulk.
    grad = next(c for c in charts.values() if c["caption"].startswith("grad_norm"))
    assert grad["scale"] == "clip"
    assert "clipped" in grad["caption"]
    assert re.search(r"1 point beyond it is marked ▲", grad["note"])
    assert max(float(lab["text"].replace(",", "")) for lab in grad["labels"]) < 10
    screenshot(browser, page, "report-diverging")
    assert problems.console == []
    assert problems.external == []


def test_non_finite_values_do_not_break_a_chart(browser, runs):
    """Charts fed NaN/Inf strings, nulls, an empty series and a single point still draw (the C++
    side writes NaN as null; the dashboard's data may hold anything)."""
    page, problems = open_page(browser, runs["healthy"].as_uri())
    page.evaluate("""() => {
      const box = document.createElement('section');
      box.id = 'odd';
      document.getElementById('app').prepend(box);
      const x = [...Array(50).keys()];
      const v = x.map((i) => (i % 7 === 3 ? 'nan' : i % 11 === 5 ? 'inf' : i % 13 === 0 ? null : Math.sqrt(i + 1)));
      v[20] = Infinity; v[21] = NaN; v[22] = '-Infinity';
      TSCharts.line(box, { id: 'odd-values', title: 'odd', xLabel: 'step', unit: '', x, series: [{ label: 'v', values: v }] });
      TSCharts.line(box, { id: 'odd-empty', title: 'empty', xLabel: 'step', unit: '', x: [], series: [{ label: 'v', values: [] }] });
      const one = TSCharts.line(box, { id: 'odd-one', title: 'one', xLabel: 'time (s)', unit: '%', x: [3], series: [{ label: 'v', values: [40] }] });
      TSCharts.update(one, { x: [3, 4, 5], series: [{ label: 'v', values: [40, 'nan', 45] }] });
    }""")
    facts = {c["id"]: c for c in chart_facts(page, "#odd figure.ts-chart")}
    assert set(facts) == {"odd-values", "odd-empty", "odd-one"}
    assert facts["odd-values"]["drawn"] > 200
    assert re.search(r"\d+ NaN/Inf values are not drawn", facts["odd-values"]["note"])
    assert facts["odd-one"]["drawn"] > 5  # two points either side of the NaN
    assert "1 NaN/Inf value is not drawn" in facts["odd-one"]["note"]
    assert problems.console == []


def test_compare_page_renders_both_runs_and_what_changed(browser, runs):
    out = runs["work"] / "compare.html"
    text = run([runs["cli"], "compare", runs["work"] / "faulty", runs["work"] / "healthy",
                "--html", out], runs["env"])
    assert "rule dataloader no longer fires" in text
    page, problems = open_page(browser, out.as_uri())
    assert page.locator("#compare tbody tr").count() >= 8
    assert "data wait share fell" in page.text_content("#changes")
    assert "dataloader" in page.text_content("#recurring")
    screenshot(browser, page, "report-compare")
    assert problems.console == []
    assert problems.external == []


@pytest.mark.parametrize("ranks", [4, 12])
def test_every_rank_is_drawn_in_the_step_time_and_loss_charts(browser, runs, ranks):
    """Up to 8 ranks one line per rank; beyond, the median with the min-max band and the slowest
    rank (docs/report.md, "Every rank"). Checked on the page's legends and drawn canvases."""
    work, cli = runs["work"], runs["cli"]
    synth = tool_path("make_synthetic_run", "TS_SYNTH_BIN")
    run_dir = work / f"ranks-{ranks}"
    run([synth, run_dir, "--ranks", str(ranks), "--steps", "600"])
    run([cli, "report", run_dir], runs["env"])
    page, problems = open_page(browser, (run_dir / "report" / "report.html").as_uri())
    charts = {c["id"]: c for c in check_charts(page, 6)}
    assert "step-time-ranks" in charts and "losses" in charts
    for chart in ("step-time-ranks", "losses"):
        legend = page.text_content(f'figure[data-chart="{chart}"] .ts-legend')
        if ranks <= 8:
            for r in range(ranks):
                assert f"rank {r}" in legend, (chart, r, legend)
        else:
            assert "median of ranks" in legend and "min of ranks" in legend, legend
            assert "max of ranks" in legend, legend
    screenshot(browser, page, f"report-ranks-{ranks}")
    assert problems.console == []
    assert problems.external == []
