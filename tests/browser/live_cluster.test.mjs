// The whole path in headless Chromium: a simulated GPU cluster (uplink-kubesim, 2 nodes of 8
// GPUs, with workloads), a real uplink-console, and real agents (inventory and cluster roles)
// talking to both. The page shows the connection waiting, then active once the inventory
// agent reports (no reload); the namespace scope is set and `kubectl get pods -A` runs through
// the cluster agent in the page's kubectl console; rotating the token in the page makes the
// old agent's next report refused. Every process started here is stopped, pass or fail.
//
//   node live_cluster.test.mjs --bin BUILD/bin [--kubectl /usr/bin/kubectl]
//                              [--chromium /usr/bin/chromium] [--screenshots DIR]
import { spawn, execFileSync } from 'node:child_process';
import { mkdtempSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import assert from 'node:assert/strict';
import { chromium } from 'playwright-core';

function option(name, fallback) {
  const at = process.argv.indexOf('--' + name);
  return at > 0 && at + 1 < process.argv.length ? process.argv[at + 1] : fallback;
}
const binDir = option('bin') && resolve(option('bin'));
const kubectlPath = option('kubectl', '/usr/bin/kubectl');
const chromiumPath = option('chromium', '/usr/bin/chromium');
const screenshots = option('screenshots', join(tmpdir(), 'uplink-browser-screenshots'));
if (!binDir) {
  console.error('usage: node live_cluster.test.mjs --bin DIR [--kubectl PATH] [--chromium PATH] [--screenshots DIR]');
  process.exit(2);
}
mkdirSync(screenshots, { recursive: true });

const password = 'correct horse battery staple';
const email = 'admin@example.com';
const dir = mkdtempSync(join(tmpdir(), 'uplink-live-'));
const children = [];  // {name, process, log}
let browser = null;

// Starts a child whose output is kept for the failure report; stopped in `stopAll`.
function start(name, argv) {
  const child = { name, log: '' };
  child.process = spawn(argv[0], argv.slice(1), { cwd: dir, stdio: ['ignore', 'pipe', 'pipe'],
                                                 env: { ...process.env, HOME: dir, KUBECONFIG: '' } });
  child.process.stdout.on('data', (chunk) => { child.log += chunk; });
  child.process.stderr.on('data', (chunk) => { child.log += chunk; });
  // A binary that cannot start is a failure of the step waiting on it, not a crash of the test.
  child.process.on('error', (error) => { child.log += String(error) + '\n'; });
  child.exited = new Promise((done) => {
    child.process.on('exit', done);
    child.process.on('error', done);
  });
  children.push(child);
  return child;
}

async function stopAll() {
  for (const child of children) {
    if (child.process.exitCode === null && child.process.signalCode === null) child.process.kill('SIGTERM');
  }
  for (const child of children) {
    const stopped = await Promise.race([child.exited.then(() => true),
                                        new Promise((r) => setTimeout(() => r(false), 10000))]);
    if (!stopped) child.process.kill('SIGKILL');
  }
}

async function waitUntil(what, check, seconds = 60) {
  for (let i = 0; i < seconds * 10; i++) {
    try {
      if (await check()) return;
    } catch { /* not yet */ }
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error('timed out waiting for ' + what);
}

async function freePort() {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });
}

async function call(base, method, path, credential, body) {
  const headers = { Authorization: 'Bearer ' + credential };
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  const response = await fetch(base + path, { method, headers,
                                               body: body === undefined ? undefined : JSON.stringify(body) });
  const text = await response.text();
  return { status: response.status, body: text ? JSON.parse(text) : null };
}

async function expectStatus(promise, status) {
  const reply = await promise;
  assert.equal(reply.status, status, JSON.stringify(reply.body));
  return reply.body;
}

function kubectl(kubeconfig, args) {
  return execFileSync(kubectlPath, ['--kubeconfig', kubeconfig, '--cache-dir', join(dir, 'kube-cache'), ...args],
                      { encoding: 'utf8', env: { ...process.env, HOME: dir, KUBECONFIG: '' } });
}

async function main() {
  const bin = (name) => join(binDir, name);

  // The cluster.
  const kubeconfig = join(dir, 'kubeconfig');
  start('uplink-kubesim', [bin('uplink-kubesim'), '--listen', '127.0.0.1:0', '--nodes', '2',
                           '--gpus-per-node', '8', '--workloads', '--kubeconfig-out', kubeconfig]);
  await waitUntil('uplink-kubesim to write its kubeconfig', () => readFileSync(kubeconfig, 'utf8').length > 0, 30);

  // The console, its admin's password and a connection made through the API.
  const apiKey = execFileSync(bin('uplink-console'), ['init', '--data-dir', join(dir, 'console'),
                                                      '--admin-email', email],
                              { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
  assert.match(apiKey, /^uk_/);
  const port = await freePort();
  const base = 'http://127.0.0.1:' + port;
  start('uplink-console', [bin('uplink-console'), 'serve', '--data-dir', join(dir, 'console'),
                           '--listen', '127.0.0.1:' + port, '--report-interval', '10s']);
  await waitUntil('uplink-console to answer /healthz', async () => (await fetch(base + '/healthz')).ok, 30);
  const me = await expectStatus(call(base, 'GET', '/api/v1/me', apiKey), 200);
  await expectStatus(call(base, 'POST', '/api/v1/users/' + me.user.id + '/password', apiKey, { password }), 200);
  const connection = await expectStatus(call(base, 'POST', '/api/v1/connections', apiKey,
                                             { agent_name: 'inventory', cluster_name: 'live-gpu' }), 201);
  const tokenFile = join(dir, 'agent-token');
  writeFileSync(tokenFile, connection.token + '\n', { mode: 0o600 });

  // The status ConfigMap the inventory agent patches, made with real kubectl.
  kubectl(kubeconfig, ['-n', 'uplink-system', 'create', 'configmap', 'uplink-agent-status']);

  // Before any agent: the page says it waits.
  browser = await chromium.launch({ executablePath: chromiumPath, headless: true, args: ['--no-sandbox'] });
  const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
  const page = await context.newPage();
  const pageErrors = [];
  page.on('pageerror', (error) => pageErrors.push(error.message));
  page.on('dialog', (dialog) => dialog.accept());
  page.setDefaultTimeout(60000);
  const shot = (name) => page.screenshot({ path: join(screenshots, name + '.png'), fullPage: true });
  await page.goto(base + '/');
  await page.getByLabel('Email').fill(email);
  await page.getByLabel('Password', { exact: true }).fill(password);
  await page.getByRole('button', { name: 'Sign in' }).click();
  const row = page.locator('tr[data-connection="live-gpu"]');
  await row.waitFor();
  assert.equal((await row.locator('.badge').innerText()).trim(), 'Waiting for agent');
  await shot('live-waiting');

  // The inventory agent's first report turns the badge active without a reload.
  const inventory = start('uplink-agent inventory', [
    bin('uplink-agent'), 'inventory', '--console', base, '--token-file', tokenFile, '--kubeconfig', kubeconfig,
    '--namespace', 'uplink-system', '--status-configmap', 'uplink-agent-status', '--health-listen', '127.0.0.1:0']);
  await row.locator('.badge[data-status="active"]').waitFor();
  assert.equal((await row.locator('.badge').innerText()).trim(), 'active');
  assert.match(await row.innerText(), /16 \/ 16/);
  await shot('live-active');

  // The cluster agent runs the console's read-only kubectl.
  start('uplink-agent cluster', [
    bin('uplink-agent'), 'cluster', '--console', base, '--token-file', tokenFile, '--state-dir', join(dir, 'cluster-spool'),
    '--listen', '127.0.0.1:0', '--kubectl', kubectlPath, '--kubeconfig', kubeconfig, '--cache-dir', join(dir, 'kubectl-cache')]);

  // The namespace scope, set in the page; then `get pods -A` shows the crash-looping pod.
  await row.getByRole('link', { name: 'live-gpu' }).click();
  await page.getByRole('heading', { name: 'Nodes' }).waitFor();
  assert.equal(await page.locator('table.nodes tbody tr').count(), 2);
  await page.getByLabel(/^Namespaces/).fill('*');
  await page.getByRole('button', { name: 'Save scope' }).click();
  await page.getByText('Allowed: *').waitFor();
  const scope = await expectStatus(call(base, 'GET', '/api/v1/connections/' + connection.id + '/namespaces', apiKey), 200);
  assert.deepEqual(scope.namespaces, ['*']);
  await page.getByLabel('Command').fill('kubectl get pods -A');
  await page.getByRole('button', { name: 'Run' }).click();
  const ran = page.locator('.history li').first();
  await ran.locator('.status').filter({ hasText: /exit 0|refused/ }).waitFor();
  assert.equal((await ran.locator('.status').innerText()).trim(), 'exit 0', await ran.innerText());
  const pods = await ran.locator('pre.output').textContent();
  assert.match(pods, /NAMESPACE\s+NAME/);
  assert.match(pods, /CrashLoopBackOff/);
  await shot('live-kubectl');

  // Rotate in the page (password confirmed): the running inventory agent still holds the old
  // token, and its next report is refused.
  const oldPrefix = connection.token_prefix;
  await page.getByRole('link', { name: 'Agent tokens' }).click();
  await page.locator('tr[data-connection="live-gpu"]').getByRole('button', { name: 'Rotate' }).click();
  await page.getByLabel('Password', { exact: true }).fill(password);
  await page.getByRole('button', { name: 'Confirm' }).click();
  const newToken = (await page.locator('pre[data-token]').textContent()).trim();
  assert.match(newToken, /^agt_/);
  assert.ok(!newToken.startsWith(oldPrefix));
  await page.getByRole('button', { name: 'I stored the token' }).click();
  const rotatedRow = page.locator('tr[data-connection="live-gpu"]');
  await rotatedRow.locator('code', { hasText: newToken.slice(0, oldPrefix.length) }).waitFor();
  const refusedAt = inventory.log.length;
  await waitUntil('the old agent to be refused',
                  () => /401[^\n]*invalid_token/.test(inventory.log.slice(refusedAt)), 60);
  await expectStatus(call(base, 'GET', '/api/v1/agent/whoami', connection.token), 401);
  await expectStatus(call(base, 'GET', '/api/v1/agent/whoami', newToken), 200);
  await shot('live-rotated');
  assert.deepEqual(pageErrors, []);
  console.log('live cluster browser test passed; screenshots in ' + screenshots);
}

let failed = false;
try {
  await main();
} catch (error) {
  failed = true;
  console.error(error);
  for (const child of children) console.error('--- ' + child.name + ' ---\n' + child.log.slice(-3000));
} finally {
  if (browser) await browser.close().catch(() => {});
  await stopAll();
  rmSync(dir, { recursive: true, force: true });
}
process.exit(failed ? 1 : 0);
