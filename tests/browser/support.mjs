// Helpers shared by the browser tests: command-line options, the processes a test starts, a
// console started and its admin given a password, Chromium and a signed-in page, screenshots
// at 1400 and 800 px with their text contrast checked, waiting, a free loopback port, calls to
// the console's JSON API, running a test, and the text on a page that is too faint to read.
import { execFileSync, spawn } from 'node:child_process';
import { mkdirSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { gzipSync } from 'node:zlib';
import assert from 'node:assert/strict';
import { chromium } from 'playwright-core';

export const adminEmail = 'admin@example.com';
export const adminPassword = 'correct horse battery staple';

// The value after `--name` on the command line, or `fallback`.
export function option(name, fallback) {
  const at = process.argv.indexOf('--' + name);
  return at > 0 && at + 1 < process.argv.length ? process.argv[at + 1] : fallback;
}

// The options every browser test takes: `--chromium` (default /usr/bin/chromium),
// `--screenshots` (made if missing), and the ones it `requires` (`console`, `bin`, ...), which
// it exits on with its usage when missing.
export function testOptions(requires, extra = []) {
  const script = basename(process.argv[1]);
  const options = { chromium: option('chromium', '/usr/bin/chromium'),
                    screenshots: option('screenshots', join(tmpdir(), 'uplink-browser-screenshots')) };
  for (const name of [...requires, ...extra]) options[name] = option(name);
  const missing = requires.filter((name) => !options[name]);
  if (missing.length) {
    console.error('usage: node ' + script + ' ' + requires.map((n) => '--' + n + ' PATH').join(' ') +
                  extra.map((n) => ' [--' + n + ' PATH]').join('') + ' [--chromium PATH] [--screenshots DIR]');
    process.exit(2);
  }
  mkdirSync(options.screenshots, { recursive: true });
  return options;
}

// The processes a test starts, each with its output kept for the failure report. `stopAll`
// ends them all, pass or fail.
export class Processes {
  constructor({ cwd, env } = {}) {
    this.cwd = cwd;
    this.env = env;
    this.children = [];  // {name, process, log, exited}
  }

  start(name, argv) {
    const child = { name, log: '' };
    child.process = spawn(argv[0], argv.slice(1), { cwd: this.cwd, env: this.env, stdio: ['ignore', 'pipe', 'pipe'] });
    child.process.stdout.on('data', (chunk) => { child.log += chunk; });
    child.process.stderr.on('data', (chunk) => { child.log += chunk; });
    // A binary that cannot start is a failure of the step waiting on it, not a crash of the test.
    child.process.on('error', (error) => { child.log += String(error) + '\n'; });
    child.exited = new Promise((done) => {
      child.process.on('exit', done);
      child.process.on('error', done);
    });
    this.children.push(child);
    return child;
  }

  // SIGTERM to every child still running; SIGKILL to any not gone 10 s later.
  async stopAll() {
    for (const child of this.children) {
      if (child.process.exitCode === null && child.process.signalCode === null) child.process.kill('SIGTERM');
    }
    for (const child of this.children) {
      const stopped = await Promise.race([child.exited.then(() => true),
                                          new Promise((r) => setTimeout(() => r(false), 10000))]);
      if (!stopped) child.process.kill('SIGKILL');
    }
  }

  // The last `characters` of each child's output, for the failure report.
  report(characters = 3000) {
    return this.children.map((child) => '--- ' + child.name + ' ---\n' + child.log.slice(-characters)).join('\n');
  }
}

// Polls `check` every 100 ms until it is true; a throw counts as "not yet". The limit is a
// hang guard, not a timing assertion.
export async function waitUntil(what, check, seconds = 60) {
  for (let i = 0; i < seconds * 10; i++) {
    try {
      if (await check()) return;
    } catch { /* not yet */ }
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error('timed out waiting for ' + what);
}

export async function freePort() {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });
}

// One API call: `credential` (an API key or agent token) as the bearer when given, the body as
// JSON, gzipped when `extraHeaders` asks for it. Resolves to {status, body}.
export async function call(base, method, path, credential, body, extraHeaders = {}) {
  const headers = { ...extraHeaders };
  if (credential) headers.Authorization = 'Bearer ' + credential;
  let payload;
  if (body !== undefined) {
    headers['Content-Type'] = 'application/json';
    payload = JSON.stringify(body);
    if (headers['Content-Encoding'] === 'gzip') payload = gzipSync(payload);
  }
  const response = await fetch(base + path, { method, headers, body: payload });
  const text = await response.text();
  return { status: response.status, body: text ? JSON.parse(text) : null };
}

export async function expectStatus(promise, status) {
  const reply = await promise;
  assert.equal(reply.status, status, JSON.stringify(reply.body));
  return reply.body;
}

// Every visible piece of text on the page whose contrast against its background (the first
// opaque background up its ancestors) is under 4.5:1, as WCAG 2 computes it. Disabled controls
// are exempt (WCAG 1.4.3); charts are canvases, checked by their own colours.
export function lowContrastText(page) {
  return page.evaluate(() => {
    const parse = (css) => css.match(/[\d.]+/g).map(Number);
    const luminance = ([r, g, b]) => {
      const linear = [r, g, b].map((v) => {
        const c = v / 255;
        return c <= 0.03928 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4;
      });
      return 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2];
    };
    const background = (element) => {
      for (let e = element; e; e = e.parentElement) {
        const color = parse(getComputedStyle(e).backgroundColor);
        if (color.length < 4 || color[3] === 1) return color;
      }
      return [255, 255, 255];
    };
    const failures = [];
    const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
      const element = node.parentElement;
      if (!node.textContent.trim() || !element.checkVisibility() || element.closest(':disabled')) continue;
      const text = luminance(parse(getComputedStyle(element).color));
      const back = luminance(background(element));
      const ratio = (Math.max(text, back) + 0.05) / (Math.min(text, back) + 0.05);
      if (ratio < 4.5) failures.push(node.textContent.trim().slice(0, 40) + ': ' + ratio.toFixed(2));
    }
    return failures;
  });
}

// A real uplink-console on a free loopback port with its store in `dataDir`: initialised
// (the admin's API key kept), serving with `args`, and the admin given `adminPassword` through
// the API. `restart(args)` stops it cleanly and serves again on the same port and store.
export async function startConsole(processes, binary, dataDir, args = []) {
  const apiKey = execFileSync(binary, ['init', '--data-dir', dataDir, '--admin-email', adminEmail],
                              { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
  assert.match(apiKey, /^uk_/);
  const port = await freePort();
  const base = 'http://127.0.0.1:' + port;
  const served = { apiKey, base, port, server: null };
  const serve = async (serveArgs) => {
    served.server = processes.start('uplink-console', [binary, 'serve', '--data-dir', dataDir,
                                                       '--listen', '127.0.0.1:' + port, ...serveArgs]);
    await waitUntil('uplink-console to answer /healthz', async () => (await fetch(base + '/healthz')).ok, 30);
  };
  served.stop = async () => {
    served.server.process.kill('SIGTERM');
    await served.server.exited;
  };
  served.restart = async (serveArgs = args) => {
    await served.stop();
    await serve(serveArgs);
  };
  await serve(args);
  const me = await expectStatus(call(base, 'GET', '/api/v1/me', apiKey), 200);
  await expectStatus(call(base, 'POST', '/api/v1/users/' + me.user.id + '/password', apiKey,
                          { password: adminPassword }), 200);
  return served;
}

// Headless Chromium from Debian (nothing downloaded).
export function launchChromium(path) {
  return chromium.launch({ executablePath: path, headless: true, args: ['--no-sandbox'] });
}

// A page of a new browser context: its script errors collected in `page.errors`, confirmation
// dialogs accepted.
export async function newPage(browser, contextOptions = {}) {
  const context = await browser.newContext({ viewport: { width: 1400, height: 900 }, ...contextOptions });
  const page = await context.newPage();
  page.errors = [];
  page.on('pageerror', (error) => page.errors.push(error.message));
  page.on('dialog', (dialog) => dialog.accept());
  return page;
}

// Signs in through the form.
export async function signIn(page, base, email = adminEmail, password = adminPassword) {
  await page.goto(base + '/');
  await page.getByLabel('Email').fill(email);
  await page.getByLabel('Password', { exact: true }).fill(password);
  await page.getByRole('button', { name: 'Sign in' }).click();
}

// What a chart (a `figure.chart` locator) drew in a series colour ([r, g, b], default the first
// series' #2563eb), give or take anti-aliasing: how many pixels, and the widest run of canvas
// columns without any between columns with some (a gap in the line).
export function chartPixels(chart, colour = [37, 99, 235]) {
  return chart.locator('canvas').evaluate((canvas, [r, g, b]) => {
    const { width, height } = canvas;
    const { data } = canvas.getContext('2d').getImageData(0, 0, width, height);
    const columns = new Array(width).fill(0);
    let count = 0;
    for (let i = 0; i < data.length; i += 4) {
      if (Math.abs(data[i] - r) < 40 && Math.abs(data[i + 1] - g) < 40 && Math.abs(data[i + 2] - b) < 40) {
        count++;
        columns[(i / 4) % width]++;
      }
    }
    const drawn = columns.map((c, x) => (c > 0 ? x : -1)).filter((x) => x >= 0);
    let widestGap = 0;
    for (let k = 1; k < drawn.length; k++) widestGap = Math.max(widestGap, drawn[k] - drawn[k - 1] - 1);
    return { count, widestGap, width };
  }, colour);
}

// Resolves once the page has drawn two more frames: what a resize set off (ResizeObserver
// callbacks, charts redrawn) is on screen.
export function nextFrames(page) {
  return page.evaluate(() => new Promise((done) => requestAnimationFrame(() => requestAnimationFrame(done))));
}

// Screenshots of the page at 1400 and 800 px wide (NAME-1400.png, NAME-800.png in `dir`),
// each checked for faint text; the page is left at 1400 px.
export async function screenshots(page, dir, name) {
  for (const width of [1400, 800]) {
    await page.setViewportSize({ width, height: 900 });
    await nextFrames(page);  // charts follow their box's new width in the next frame
    await page.screenshot({ path: join(dir, name + '-' + width + '.png'), fullPage: true });
    assert.deepEqual(await lowContrastText(page), [], name + ' at ' + width + ' px');
  }
  await page.setViewportSize({ width: 1400, height: 900 });
}

// Runs a test's `main`. Pass or fail, the browser (`browser()` returns it, or null if it never
// started) is closed, every process stopped and `dir` removed; a failure prints the error and
// the processes' last `reportBytes` of output, and the exit status says which it was.
export async function runTest(main, { processes, browser, dir, reportBytes }) {
  let failed = false;
  try {
    await main();
  } catch (error) {
    failed = true;
    console.error(error);
    console.error(processes.report(reportBytes));
  } finally {
    await browser()?.close().catch(() => {});
    await processes.stopAll();
    rmSync(dir, { recursive: true, force: true });
  }
  process.exit(failed ? 1 : 0);
}

