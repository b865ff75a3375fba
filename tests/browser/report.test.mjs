// Browser test of the HTML report: generates a healthy and a faulty synthetic run with the
// real CLI, opens each report in headless Debian chromium and checks that every chart rendered,
// the findings are shown, nothing went to the network and the console stayed clean.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { binaries, tempDir, run, launch, openPage, artifacts } from './helpers.mjs';

let bins, work, browser;
const env = {};

before(async () => {
  bins = binaries();
  work = tempDir('ts-report-test-');
  env.TRAINSCOPE_HOME = path.join(work, 'home');
  for (const kind of ['healthy', 'faulty']) {
    run(bins.synth, [path.join(work, kind), '--kind', kind, '--steps', '3000']);
    run(bins.cli, ['report', path.join(work, kind), '--instance', 'g5.2xlarge'], env);
  }
  fs.mkdirSync(artifacts, { recursive: true });
  browser = await launch();
});

after(async () => {
  if (browser) await browser.close();
  if (work) fs.rmSync(work, { recursive: true, force: true });
});

async function checkCharts(page) {
  const charts = await page.$$eval('figure.ts-chart', (figs) => figs.map((f) => {
    const c = f.querySelector('canvas');
    const r = c ? c.getBoundingClientRect() : null;
    return { id: f.dataset.chart, canvas: !!c, w: r ? r.width : 0, h: r ? r.height : 0 };
  }));
  assert.ok(charts.length >= 8, `expected many charts, got ${charts.length}`);
  for (const c of charts) {
    assert.ok(c.canvas, `chart ${c.id} has no canvas`);
    assert.ok(c.w > 100 && c.h > 50, `chart ${c.id} is ${c.w}x${c.h}`);
  }
  return charts;
}

test('faulty run: findings on top, every chart drawn, no console errors', async () => {
  const html = path.join(work, 'faulty', 'report', 'report.html');
  assert.ok(fs.statSync(html).size < 5 * 1024 * 1024);
  const { page, problems } = await openPage(browser.context, pathToFileURL(html).href);
  const charts = await checkCharts(page);
  assert.ok(charts.some((c) => c.id === 'grad-heatmap'), 'gradient heat map present');
  assert.ok(charts.some((c) => c.id === 'step-hist'), 'step-time histogram present');
  // Findings come first and carry severity colours and recommendations.
  const firstSection = await page.$eval('main section', (s) => s.id);
  assert.equal(firstSection, 'findings');
  const findings = await page.$$eval('.finding', (els) => els.map((e) => ({
    rule: e.dataset.rule, cls: e.className, rec: e.querySelector('.rec').textContent,
    color: getComputedStyle(e).borderLeftColor })));
  assert.equal(findings.length, 4);
  assert.equal(findings[0].rule, 'exploding_tensor');
  assert.match(findings[0].cls, /critical/);
  assert.equal(findings[0].color, 'rgb(220, 38, 38)');
  const loader = findings.find((f) => f.rule === 'dataloader');
  assert.match(loader.rec, /raise num_workers from 2 to \d+ and set pin_memory=True/);
  assert.match(await page.textContent('.verdict'), /4 findings/);
  // Cost section with the stop saving and the instance advice.
  const cost = await page.textContent('#cost');
  assert.match(cost, /automatic stop/);
  assert.match(cost, /input pipeline/);
  // Profiled window links to the stored trace.
  const href = await page.getAttribute('#profile a', 'href');
  assert.equal(href, '../profile/trace-worker-0.json');
  assert.match(await page.textContent('#profile'), /decode_jpeg/);
  await page.screenshot({ path: path.join(artifacts, 'report-faulty.png'), fullPage: true });
  assert.deepEqual(problems.console, []);
  assert.deepEqual(problems.external, []);
});

test('healthy run: no findings, charts drawn, no console errors', async () => {
  const html = path.join(work, 'healthy', 'report', 'report.html');
  const { page, problems } = await openPage(browser.context, pathToFileURL(html).href);
  await checkCharts(page);
  assert.equal(await page.locator('.finding').count(), 0);
  assert.match(await page.textContent('#findings .ok'), /No rule fired/);
  assert.match(await page.textContent('.verdict'), /healthy/);
  assert.equal(await page.locator('#profile').count(), 0, 'no profiled window section without data');
  await page.screenshot({ path: path.join(artifacts, 'report-healthy.png'), fullPage: true });
  assert.deepEqual(problems.console, []);
  assert.deepEqual(problems.external, []);
});

test('compare page renders both runs and what changed', async () => {
  const out = path.join(work, 'compare.html');
  const text = run(bins.cli, ['compare', path.join(work, 'faulty'), path.join(work, 'healthy'), '--html', out], env);
  assert.match(text, /rule dataloader no longer fires/);
  const { page, problems } = await openPage(browser.context, pathToFileURL(out).href);
  assert.ok((await page.locator('#compare tbody tr').count()) >= 8);
  assert.match(await page.textContent('#changes'), /data wait share fell/);
  assert.match(await page.textContent('#recurring'), /dataloader/);
  await page.screenshot({ path: path.join(artifacts, 'report-compare.png'), fullPage: true });
  assert.deepEqual(problems.console, []);
});
