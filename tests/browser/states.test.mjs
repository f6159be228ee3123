// Connection states in headless Chromium, against a real uplink-console: one connection in
// each state (waiting, connected, stale, offline for days with a token whose status still
// says only "stale", offline with a revoked token, an empty inventory, a token expiring in 3
// days), each with the badge it must have on the connections page, the tokens page and its
// own page; the empty inventory's "0 nodes match selector" and its reminder that detection is
// not qualification; and "Generate a new installation code", which gives 90 days and turns
// the old token off at once. Screenshots at 1400 and 800 px wide go to --screenshots.
//
// The console has no clock to move, so the connections' last calls are set back in its SQLite
// database (the sqlite3 command) while it is stopped: what a console finds after days of
// silence.
//
//   node states.test.mjs --console BUILD/bin/uplink-console [--chromium /usr/bin/chromium]
//                        [--screenshots DIR]
import { execFileSync } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import assert from 'node:assert/strict';
import {
  Processes, adminPassword as password, call, expectStatus, launchChromium, newPage, runTest, screenshots,
  signIn, startConsole, testOptions, waitUntil,
} from './support.mjs';

const options = testOptions(['console']);
const dir = mkdtempSync(join(tmpdir(), 'uplink-states-'));
const dataDir = join(dir, 'console');
const processes = new Processes({ cwd: dir });
let browser = null;
const day = 86400;

function node(i) {
  return {
    name: 'gpu-node-' + i, uid: 'uid-' + i, ready: true, unschedulable: false,
    gpu_resource: 'nvidia.com/gpu', gpu_capacity: 8, gpu_allocatable: 8,
    gpu_product: 'NVIDIA-H100-80GB-HBM3',
    resources: { 'nvidia.com/gpu': { capacity: 8, allocatable: 8 } }, taints: [],
  };
}

const rfc3339 = (ms) => new Date(ms).toISOString().replace(/\.\d+Z$/, 'Z');

async function main() {
  // Offline after 10 minutes rather than 150 s, so that the stale connection is still stale
  // however long Chromium takes to start; the rule under test does not depend on the figure.
  const consoleUp = await startConsole(processes, options.console, dataDir, ['--offline-after', '10m']);
  const { apiKey, base } = consoleUp;

  // One connection per state; each that has an agent reports once (empty: no node matches).
  const make = async (cluster, nodes, extra = {}) => {
    const created = await expectStatus(call(base, 'POST', '/api/v1/connections', apiKey,
                                            { agent_name: 'uplink-agent', cluster_name: cluster, ...extra }), 201);
    if (nodes !== null) {
      await expectStatus(call(base, 'POST', '/api/v1/agent/inventory', created.token, {
        agent_version: '0.2.0', cluster_uid: 'uid-' + cluster, selector: 'nvidia.com/gpu.present=true',
        nodes: Array.from({ length: nodes }, (_, i) => node(i)),
      }), 200);
    }
    return created;
  };
  await make('waiting-west', null);
  await make('connected-east', 2);
  await make('stale-north', 1);
  await make('offline-south', 4);
  const revoked = await make('revoked-old', 1);
  await expectStatus(call(base, 'POST', '/api/v1/connections/' + revoked.id + '/revoke', apiKey), 200);
  await make('empty-inventory', 0);
  const expiring = await make('expiring-central', 1,
                              { expires_at: rfc3339(Date.now() + 2.5 * day * 1000) });

  // Days of silence, as a console finds them after a restart: stop it (a clean stop writes
  // the calls it noted), set the last calls back, start it again.
  await consoleUp.stop();
  const now = Math.floor(Date.now() / 1000);
  const setBack = (cluster, seconds) =>
    "UPDATE connections SET last_seen_at = " + (now - seconds) + ", last_report_at = " +
    (now - seconds) + " WHERE cluster_name = '" + cluster + "';";
  execFileSync('sqlite3', [join(dataDir, 'console.db'),
                           setBack('stale-north', 100) + setBack('offline-south', 3 * day) +
                           setBack('revoked-old', 2 * day)]);
  await consoleUp.restart();

  // What the API says of each, the fields the pages read.
  const listed = await expectStatus(call(base, 'GET', '/api/v1/connections', apiKey), 200);
  const byName = Object.fromEntries(listed.connections.map((c) => [c.cluster_name, c]));
  assert.equal(byName['waiting-west'].liveness, 'waiting');
  assert.equal(byName['connected-east'].liveness, 'connected');
  assert.equal(byName['stale-north'].liveness, 'stale');
  assert.equal(byName['offline-south'].liveness, 'offline');
  // The token's status only says no call came for 10 minutes: the badge must not stop there.
  assert.equal(byName['offline-south'].status, 'stale');
  assert.equal(byName['expiring-central'].expires_in_days, 3);

  browser = await launchChromium(options.chromium);
  const page = await newPage(browser);
  const shot = (name) => screenshots(page, options.screenshots, name);
  await signIn(page, base);

  // The connections page: one state badge each, severity growing with silence, and offline
  // whatever the token's status says.
  const expected = {
    'waiting-west': ['waiting', /^Waiting for agent$/, null],
    'connected-east': ['connected', /^connected$/, null],
    'stale-north': ['stale', /^stale (\d+ s|\d+ min)$/, null],
    'offline-south': ['offline', /^offline 3 d$/, null],
    'revoked-old': ['offline', /^offline 2 d$/, 'token revoked'],
    'empty-inventory': ['connected', /^connected$/, null],
    'expiring-central': ['connected', /^connected$/, 'expires in 3 days'],
  };
  const checkBadges = async () => {
    for (const [cluster, [state, text, note]] of Object.entries(expected)) {
      const row = page.locator(`tr[data-connection="${cluster}"]`);
      await row.waitFor();
      const badge = row.locator('.badge[data-status]');
      assert.equal(await badge.getAttribute('data-status'), state, cluster);
      assert.match((await badge.innerText()).trim(), text, cluster);
      const tokenBadge = row.locator('.badge[data-token]');
      if (note) assert.equal((await tokenBadge.innerText()).trim(), note, cluster);
      else assert.equal(await tokenBadge.count(), 0, cluster);
    }
  };
  await checkBadges();
  assert.match(await page.locator('tr[data-connection="empty-inventory"]').innerText(), /\b0\b/);
  await shot('states-connections');
  // The tokens page says the same.
  await page.getByRole('link', { name: 'Agent tokens' }).click();
  await checkBadges();
  await shot('states-tokens');

  // A connection's own page: an empty inventory is not "none reported yet", and says that
  // detection is not qualification; one that never reported says just that.
  await page.goto(base + '/#/connections/' + byName['empty-inventory'].id);
  const notice = page.locator('.notice');
  await notice.waitFor();
  assert.match(await notice.innerText(), /0 nodes match selector nvidia\.com\/gpu\.present=true/);
  assert.match(await notice.innerText(), /Detection is not qualification/);
  assert.match(await notice.innerText(), /it is not a successful GPU qualification/);
  await shot('states-empty-inventory');
  await page.goto(base + '/#/connections/' + byName['waiting-west'].id);
  await page.getByText('None reported yet.').waitFor();
  assert.equal(await page.locator('.notice').count(), 0);
  await page.goto(base + '/#/connections/' + byName['offline-south'].id);
  await page.locator('h1 .badge[data-status="offline"]').waitFor();
  assert.match(await page.locator('h1').innerText(), /offline 3 d/);
  await shot('states-offline');

  // The expiring token: said on its page, and a new installation code (in its Settings) gives
  // 90 days and turns the old token off at once.
  await page.goto(base + '/#/connections/' + expiring.id);
  await page.locator('h1 .badge[data-token="expiring"]').waitFor();
  assert.match(await page.locator('dl.facts').innerText(), /\(in 3 days\)/);
  await shot('states-expiring');
  await page.locator('nav.tabs').getByRole('link', { name: 'Settings' }).click();
  await expectStatus(call(base, 'GET', '/api/v1/agent/whoami', expiring.token), 200);
  await page.getByRole('button', { name: 'Generate a new installation code' }).click();
  await page.getByLabel('Password', { exact: true }).fill(password);
  await page.getByRole('button', { name: 'Confirm' }).click();
  const shownToken = (await page.locator('pre[data-token]').textContent()).trim();
  assert.match(shownToken, /^agt_[A-Za-z0-9_-]{43}$/);
  await shot('states-new-installation-code');
  await expectStatus(call(base, 'GET', '/api/v1/agent/whoami', expiring.token), 401);
  const whoami = await expectStatus(call(base, 'GET', '/api/v1/agent/whoami', shownToken), 200);
  const ninetyDays = Date.now() + 90 * day * 1000;
  assert.ok(Math.abs(Date.parse(whoami.expires_at) - ninetyDays) < 120000, whoami.expires_at);
  await page.getByRole('button', { name: 'I stored the token' }).click();
  await waitUntil('the expiry warning to go', async () =>
    (await page.locator('h1 .badge[data-token="expiring"]').count()) === 0, 30);
  const audit = await expectStatus(call(base, 'GET', '/api/v1/audit?action=connection.rotate', apiKey), 200);
  assert.equal(audit.events[0].detail.renew, true);
  assert.deepEqual(page.errors, []);
}

runTest(main, { processes, browser: () => browser, dir });
