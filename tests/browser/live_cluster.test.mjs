// The whole path in headless Chromium: a simulated GPU cluster (uplink-kubesim, 2 nodes of 8
// GPUs, with workloads), a real uplink-console, and real agents (inventory and cluster roles)
// talking to both. The connection is created in the page's Tokens form and the agents run
// with the token the page shows once (taken with its Copy button). The page shows the
// connection waiting, then active once the inventory agent reports (no reload); the namespace
// scope is set and `kubectl get pods -A` runs through the cluster agent in the page's kubectl
// console; rotating the token in the page makes the old agent's next report refused; revoking
// it in the page shows it revoked. Every process started here is stopped, pass or fail.
//
//   node live_cluster.test.mjs --bin BUILD/bin [--kubectl /usr/bin/kubectl]
//                              [--chromium /usr/bin/chromium] [--screenshots DIR]
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import assert from 'node:assert/strict';
import {
  Processes, adminPassword as password, call, expectStatus, launchChromium, newPage, runTest, signIn, startConsole,
  testOptions, waitUntil,
} from './support.mjs';

const options = testOptions(['bin'], ['kubectl']);
const binDir = resolve(options.bin);
const kubectlPath = options.kubectl || '/usr/bin/kubectl';
const screenshots = options.screenshots;

const dir = mkdtempSync(join(tmpdir(), 'uplink-live-'));
// Children and kubectl see a private HOME and no inherited KUBECONFIG.
const childEnv = { ...process.env, HOME: dir, KUBECONFIG: '' };
const processes = new Processes({ cwd: dir, env: childEnv });
let browser = null;

function kubectl(kubeconfig, args) {
  return execFileSync(kubectlPath, ['--kubeconfig', kubeconfig, '--cache-dir', join(dir, 'kube-cache'), ...args],
                      { encoding: 'utf8', env: childEnv });
}

async function main() {
  const bin = (name) => join(binDir, name);

  // The cluster.
  const kubeconfig = join(dir, 'kubeconfig');
  processes.start('uplink-kubesim', [bin('uplink-kubesim'), '--listen', '127.0.0.1:0', '--nodes', '2',
                                     '--gpus-per-node', '8', '--workloads', '--kubeconfig-out', kubeconfig]);
  await waitUntil('uplink-kubesim to write its kubeconfig', () => readFileSync(kubeconfig, 'utf8').length > 0, 30);

  // The console and its admin's password, set through the API.
  const { apiKey, base } = await startConsole(processes, bin('uplink-console'), join(dir, 'console'),
                                              ['--report-interval', '10s']);

  // The status ConfigMap the inventory agent patches, made with real kubectl.
  kubectl(kubeconfig, ['-n', 'uplink-system', 'create', 'configmap', 'uplink-agent-status']);

  browser = await launchChromium(options.chromium);
  const page = await newPage(browser, { viewport: { width: 1280, height: 800 } });
  const context = page.context();
  const pageErrors = page.errors;
  page.setDefaultTimeout(60000);
  const shot = (name) => page.screenshot({ path: join(screenshots, name + '.png'), fullPage: true });
  await signIn(page, base);

  // The connection, created in the Tokens page (the password confirmed first); its token,
  // shown once, taken with the Copy button and written where the agents read it.
  await page.getByRole('link', { name: 'Agent tokens' }).click();
  await page.getByLabel('Agent name').fill('inventory');
  await page.getByLabel('Cluster name').fill('live-gpu');
  await page.getByRole('button', { name: 'Create token' }).click();
  await page.getByLabel('Password', { exact: true }).fill(password);
  await page.getByRole('button', { name: 'Confirm' }).click();
  const shownToken = (await page.locator('pre[data-token]').textContent()).trim();
  assert.match(shownToken, /^agt_[A-Za-z0-9_-]{43}$/);
  await context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: base });
  await page.getByRole('button', { name: 'Copy token' }).click();
  await page.getByText('Token copied.').waitFor();
  const token = await page.evaluate(() => navigator.clipboard.readText());
  assert.equal(token, shownToken);
  const tokenFile = join(dir, 'agent-token');
  writeFileSync(tokenFile, token + '\n', { mode: 0o600 });
  await page.getByRole('button', { name: 'I stored the token' }).click();
  // The card closes once the install choice is kept; the row was there before it.
  await page.locator('pre[data-token]').waitFor({ state: 'detached' });
  await page.locator('tr[data-connection="live-gpu"]').waitFor();
  assert.equal((await page.content()).includes(token), false);
  const listed = await expectStatus(call(base, 'GET', '/api/v1/connections', apiKey), 200);
  const connection = listed.connections.find((c) => c.cluster_name === 'live-gpu');
  assert.equal(connection.agent_name, 'inventory');
  assert.ok(token.startsWith(connection.token_prefix), connection.token_prefix);

  // Before any agent: the connections page says it waits.
  await page.getByRole('link', { name: 'Connections' }).click();
  const row = page.locator('tr[data-connection="live-gpu"]');
  await row.waitFor();
  assert.equal((await row.locator('.badge[data-status]').innerText()).trim(), 'Waiting for agent');
  await shot('live-waiting');

  // The inventory agent's first report turns the badge connected without a reload.
  const inventory = processes.start('uplink-agent inventory', [
    bin('uplink-agent'), 'inventory', '--console', base, '--token-file', tokenFile, '--kubeconfig', kubeconfig,
    '--namespace', 'uplink-system', '--status-configmap', 'uplink-agent-status', '--health-listen', '127.0.0.1:0']);
  await row.locator('.badge[data-status="connected"]').waitFor();
  assert.equal((await row.locator('.badge[data-status]').innerText()).trim(), 'connected');
  assert.match(await row.innerText(), /16 \/ 16/);
  await shot('live-active');

  // The cluster agent runs the console's read-only kubectl.
  processes.start('uplink-agent cluster', [
    bin('uplink-agent'), 'cluster', '--console', base, '--token-file', tokenFile, '--state-dir', join(dir, 'cluster-spool'),
    '--listen', '127.0.0.1:0', '--kubectl', kubectlPath, '--kubeconfig', kubeconfig, '--cache-dir', join(dir, 'kubectl-cache')]);

  // The namespace scope, set in the page; then `get pods -A` shows the crash-looping pod.
  await row.getByRole('link', { name: 'live-gpu' }).click();
  await page.locator('nav.tabs').getByRole('link', { name: /^Nodes/ }).click();
  await page.locator('table.nodes tbody tr').first().waitFor();
  assert.equal(await page.locator('table.nodes tbody tr').count(), 2);
  await page.locator('nav.tabs').getByRole('link', { name: 'Settings' }).click();
  await page.getByLabel(/^Namespaces/).fill('*');
  await page.getByRole('button', { name: 'Save scope' }).click();
  await page.getByText('Allowed: *').waitFor();
  const scope = await expectStatus(call(base, 'GET', '/api/v1/connections/' + connection.id + '/namespaces', apiKey), 200);
  assert.deepEqual(scope.namespaces, ['*']);
  // Run waits until the cluster agent is connected (it is disabled until then).
  await page.locator('nav.tabs').getByRole('link', { name: 'kubectl' }).click();
  await page.getByLabel('Command').fill('kubectl get pods -A');
  await page.getByRole('button', { name: 'Run' }).click();
  const ran = page.locator('.history li').first();
  await ran.locator('.status').filter({ hasText: /exit 0|refused/ }).waitFor();
  assert.equal((await ran.locator('.status').innerText()).trim(), 'exit 0', await ran.innerText());
  const pods = await ran.locator('pre.output').textContent();
  assert.match(pods, /NAMESPACE\s+NAME/);
  assert.match(pods, /CrashLoopBackOff/);
  await shot('live-kubectl');

  // Rotate in the page (the password confirmed at creation still holds): the running inventory
  // agent still has the old token, and its next report is refused.
  const oldPrefix = connection.token_prefix;
  await page.getByRole('link', { name: 'Agent tokens' }).click();
  await page.locator('tr[data-connection="live-gpu"]').getByRole('button', { name: 'Rotate' }).click();
  const newToken = (await page.locator('pre[data-token]').textContent()).trim();
  assert.match(newToken, /^agt_/);
  assert.ok(!newToken.startsWith(oldPrefix));
  await page.getByRole('button', { name: 'I stored the token' }).click();
  const rotatedRow = page.locator('tr[data-connection="live-gpu"]');
  await rotatedRow.locator('code', { hasText: newToken.slice(0, oldPrefix.length) }).waitFor();
  const refusedAt = inventory.log.length;
  await waitUntil('the old agent to be refused',
                  () => /401[^\n]*invalid_token/.test(inventory.log.slice(refusedAt)), 60);
  await expectStatus(call(base, 'GET', '/api/v1/agent/whoami', token), 401);
  await expectStatus(call(base, 'GET', '/api/v1/agent/whoami', newToken), 200);
  await shot('live-rotated');

  // Revoke in the page: the badge says so, and the new token is refused too.
  await rotatedRow.getByRole('button', { name: 'Revoke' }).click();
  await rotatedRow.locator('.badge[data-status="revoked"]').waitFor();
  assert.equal((await rotatedRow.locator('.badge[data-status]').innerText()).trim(), 'revoked');
  await expectStatus(call(base, 'GET', '/api/v1/agent/whoami', newToken), 401);
  await shot('live-revoked');
  assert.deepEqual(pageErrors, []);
  console.log('live cluster browser test passed; screenshots in ' + screenshots);
}

await runTest(main, { processes, browser: () => browser, dir, reportBytes: 3000 });
