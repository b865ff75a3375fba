// Shared helpers for the browser tests: find the binaries, launch Debian's chromium through
// playwright-core, collect console errors and off-machine requests.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { execFileSync } from 'node:child_process';
import { chromium } from '../../web/node_modules/playwright-core/index.mjs';

export const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
export const artifacts = path.join(repoRoot, 'test-artifacts');

// The CLI (env TRAINSCOPE_BIN, else build/tools/cli/trainscope) and the synthetic-run writer
// (env TS_SYNTH_BIN, else <build>/tests/tools/make_synthetic_run next to the CLI's build).
export function binaries() {
  const cli = process.env.TRAINSCOPE_BIN || path.join(repoRoot, 'build/tools/cli/trainscope');
  const synth = process.env.TS_SYNTH_BIN ||
    path.resolve(path.dirname(cli), '../../tests/tools/make_synthetic_run');
  for (const b of [cli, synth]) {
    if (!fs.existsSync(b)) throw new Error(`missing ${b}: build first (./dev build) or set TRAINSCOPE_BIN / TS_SYNTH_BIN`);
  }
  return { cli, synth };
}

export function tempDir(prefix) {
  return fs.mkdtempSync(path.join(os.tmpdir(), prefix));
}

export function run(bin, args, env = {}) {
  return execFileSync(bin, args, { encoding: 'utf8', env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
}

export async function launch() {
  const profile = tempDir('ts-chromium-');
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: '/usr/bin/chromium',
    headless: true,
    viewport: { width: 1280, height: 900 },
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
  return {
    context,
    async close() {
      await context.close();
      fs.rmSync(profile, { recursive: true, force: true });
    },
  };
}

// Opens `url` in a new page and records console errors, page errors and any request that
// leaves the machine (a report must open without network).
export async function openPage(context, url) {
  const page = await context.newPage();
  const problems = { console: [], external: [] };
  page.on('console', (m) => { if (m.type() === 'error') problems.console.push(m.text()); });
  page.on('pageerror', (e) => problems.console.push('pageerror: ' + e.message));
  page.on('request', (r) => { if (!r.url().startsWith('file:') && !r.url().startsWith('data:')) problems.external.push(r.url()); });
  await page.goto(url, { waitUntil: 'load' });
  return { page, problems };
}
