// Live dashboard end to end: a stand-in training (tests/tools/live_writer) writes a run while
// `trainscope serve` serves it and Debian chromium (playwright-core) watches the page:
//   - the charts update while we watch (their data-point count grows),
//   - the rule badge goes from InProgress to IssuesFound when the injected fault fires,
//   - the stop button (with its confirmation) stops the training: the writer process exits.
// Env: TRAINSCOPE_BIN (the CLI), optional TRAINSCOPE_LIVE_WRITER.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const repo = path.resolve(here, '..', '..');
const { chromium } = await import(path.join(repo, 'web', 'node_modules', 'playwright-core', 'index.mjs'));

const bin = process.env.TRAINSCOPE_BIN;
function liveWriter() {
  const cands = [process.env.TRAINSCOPE_LIVE_WRITER,
    bin && path.resolve(path.dirname(bin), '..', '..', 'tests', 'tools', 'live_writer')];
  return cands.find((c) => c && fs.existsSync(c));
}

function start(cmd, args) {
  const p = spawn(cmd, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  p.out = '';
  p.err = '';
  p.stdout.on('data', (d) => { p.out += d; });
  p.stderr.on('data', (d) => { p.err += d; });
  p.exited = new Promise((resolve) => p.on('exit', (code, signal) => resolve({ code, signal })));
  return p;
}

async function until(fn, what, timeoutMs = 30000) {
  const deadline = Date.now() + timeoutMs;
  let last;
  while (Date.now() < deadline) {
    last = await fn();
    if (last) return last;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error('timed out waiting for ' + what);
}

test('dashboard follows a live training, shows the rule firing and stops it', { skip: !bin || !liveWriter() ? 'TRAINSCOPE_BIN / live_writer missing' : false, timeout: 180000 }, async () => {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'ts-dash-'));
  const profile = fs.mkdtempSync(path.join(os.tmpdir(), 'ts-chromium-'));
  const runs = path.join(tmp, 'runs');
  fs.mkdirSync(runs);
  const token = 'dash-' + Math.random().toString(36).slice(2);
  const writer = start(liveWriter(), [path.join(runs, 'job'), '--steps', '0', '--step-ms', '100',
    '--fault-step', '70', '--max-seconds', '170', '--name', 'job']);
  const serve = start(bin, ['serve', runs, '--port', '0', '--token', token, '--web-root', path.join(repo, 'web')]);
  let context;
  try {
    const url = await until(() => (/http:\/\/127\.0\.0\.1:\d+\//.exec(serve.out) || [null])[0], 'trainscope serve to listen');
    await until(() => fs.existsSync(path.join(runs, 'job', 'run.json')), 'the run');
    context = await chromium.launchPersistentContext(profile, {
      executablePath: '/usr/bin/chromium', headless: true,
      args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
        '--disable-background-networking', '--disable-component-update', '--disable-sync'],
    });
    const page = context.pages()[0] || await context.newPage();
    const origin = new URL(url).origin;
    const foreign = [];
    const errors = [];
    page.on('request', (r) => { if (!r.url().startsWith(origin)) foreign.push(r.url()); });
    page.on('pageerror', (e) => errors.push(String(e)));

    // The run list shows the live run and links to it.
    await page.goto(url + '?token=' + token + '#/');
    await page.waitForSelector('a[data-run="job"]');
    await page.click('a[data-run="job"]');
    await page.waitForSelector('#run-state');
    assert.equal(await page.textContent('#run-state'), 'live');

    // Charts update while we watch.
    const points = (id) => page.evaluate((sel) => {
      const fig = document.querySelector(sel);
      return fig ? Number(fig.dataset.points || 0) : 0;
    }, `figure[data-chart="${id}"]`);
    await page.waitForFunction(() => Number(document.querySelector('figure[data-chart="step_time"]')?.dataset.points || 0) >= 2);
    const first = await points('step_time');
    const firstLoss = await points('scalar:losses/loss');
    await page.waitForFunction((n) => Number(document.querySelector('figure[data-chart="step_time"]').dataset.points) >= n + 5, first, { timeout: 30000 });
    assert.ok(await points('scalar:losses/loss') > firstLoss, 'loss chart grows');
    assert.ok(await points('system:gpu') > 0, 'GPU chart drawn');
    assert.ok(await page.$('figure[data-chart="step_time"] canvas'), 'uPlot canvas present');

    // The rule is in progress, then the injected fault fires (step 70).
    const rule = '.rule[data-rule="loss_not_decreasing"]';
    await page.waitForSelector(rule);
    assert.equal(await page.getAttribute(rule, 'data-status'), 'InProgress');
    await page.waitForSelector(rule + '[data-status="IssuesFound"]', { timeout: 60000 });
    assert.match(await page.textContent('#events'), /loss_not_decreasing: IssuesFound/);

    // Stop: the button asks first; cancelling does nothing, confirming stops the training.
    await page.click('#stop');
    await page.waitForSelector('#confirm:not([hidden])');
    await page.click('#confirm-cancel');
    assert.equal(await page.isHidden('#confirm'), true);
    assert.equal(writer.exitCode, null, 'still training after cancel');
    await page.click('#stop');
    await page.fill('#confirm-reason', 'playwright says stop');
    await page.click('#confirm-ok');
    const exit = await Promise.race([writer.exited, new Promise((r) => setTimeout(() => r('timeout'), 30000))]);
    assert.deepEqual(exit, { code: 0, signal: null }, 'the training exits by itself');
    assert.match(writer.out, /stopped: playwright says stop/);
    await page.waitForFunction(() => document.querySelector('#run-state')?.textContent === 'ended', null, { timeout: 30000 });
    assert.match(await page.textContent('#stop-state'), /playwright says stop/);

    assert.deepEqual(foreign, [], 'no request leaves the server');
    assert.deepEqual(errors, [], 'no page errors');
  } finally {
    if (context) await context.close();
    if (writer.exitCode === null) writer.kill('SIGTERM');
    if (serve.exitCode === null) serve.kill('SIGTERM');
    await Promise.all([writer.exited, serve.exited]);
    fs.rmSync(tmp, { recursive: true, force: true });
    fs.rmSync(profile, { recursive: true, force: true });
  }
});

test('requests without the token are refused', { skip: !bin ? 'TRAINSCOPE_BIN missing' : false, timeout: 60000 }, async () => {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'ts-dash-'));
  const serve = start(bin, ['serve', tmp, '--port', '0', '--token', 'tok', '--web-root', path.join(repo, 'web')]);
  try {
    const url = await until(() => (/http:\/\/127\.0\.0\.1:\d+\//.exec(serve.out) || [null])[0], 'serve');
    assert.equal((await fetch(url + 'api/runs')).status, 401);
    assert.equal((await fetch(url + 'api/runs?token=nope')).status, 401);
    assert.equal((await fetch(url + 'api/runs', { headers: { Authorization: 'Bearer tok' } })).status, 200);
    assert.equal((await fetch(url + 'static/dashboard/..%2f..%2fpackage.json')).status, 403);
  } finally {
    serve.kill('SIGTERM');
    await serve.exited;
    fs.rmSync(tmp, { recursive: true, force: true });
  }
});
