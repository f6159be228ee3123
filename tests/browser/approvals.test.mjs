// Approvals and pod right-sizing in headless Chromium, against a real uplink-console started
// here on loopback, with the cluster role played through the agent API: an approval rule
// added in the page; a command an API key asked for waits on the Approvals page and runs
// when approved there; a command typed in the page's kubectl console waits, says so, and
// shows its output once someone approves it; a rejection with its reason; the namespace scope
// chosen in the token form; the right-sizing table with its verdicts. Screenshots at 1400 and
// 800 px go to --screenshots for review.
//
//   node approvals.test.mjs --console BUILD/bin/uplink-console [--chromium /usr/bin/chromium]
//                           [--screenshots DIR]
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import assert from 'node:assert/strict';
import {
  Processes, adminEmail as email, adminPassword as password, call, expectStatus, launchChromium, newPage,
  runTest, screenshots, signIn, startConsole, testOptions,
} from './support.mjs';

const options = testOptions(['console']);
const dataDir = mkdtempSync(join(tmpdir(), 'uplink-browser-approvals-'));
const processes = new Processes();
let browser = null;

const noLosses = { dropped: { records: 0, bytes: 0 }, corrupt: { records: 0, bytes: 0 },
                   rejected: { records: 0, bytes: 0 } };
const iso = (ms) => new Date(ms).toISOString().replace(/\.\d+Z$/, 'Z');

// Twelve snapshots 30 s apart ending now, as the cluster role sends them: `top pods` and the
// pods' requests and limits. The trainer peaks above its 1-core request; the notebook idles
// under a 4-core request; the exporter requests nothing.
function snapshots() {
  const resources = 'ml\ttrainer-0\tRunning\ttrainer|1|2Gi|2|2Gi\n' +
    'ml\tnotebook-0\tRunning\tjupyter|4|8Gi||\n' +
    'ml\tdcgm-exporter\tRunning\texporter||||\n';
  return Array.from({ length: 12 }, (_, i) => {
    const at = iso(Date.now() - (11 - i) * 30000);
    return { sequence: i + 1, appended_at: at, payload: {
      kind: 'cluster_snapshot', collected_at: at,
      results: [
        { name: 'top_pods/ml', argv: ['kubectl', 'top', 'pods', '-n', 'ml'], exit_code: 0,
          stdout: 'NAME CPU(cores) MEMORY(bytes)\n' +
                  'trainer-0 ' + (i === 5 ? 1400 : 850) + 'm 1800Mi\n' +
                  'notebook-0 60m 900Mi\n' + 'dcgm-exporter 3m 30Mi\n',
          stderr: '', duration_ms: 40 },
        { name: 'pod_resources/ml', argv: ['kubectl', 'get', 'pods', '-n', 'ml', '-o', 'jsonpath=…'],
          exit_code: 0, stdout: resources, stderr: '', duration_ms: 50 },
      ],
    } };
  });
}

async function main() {
  const { apiKey, base } = await startConsole(processes, options.console, dataDir);
  // The scope chosen with the connection.
  const east = await expectStatus(call(base, 'POST', '/api/v1/connections', apiKey,
                                       { agent_name: 'cluster', cluster_name: 'gpu-east', namespaces: ['ml'] }), 201);
  assert.deepEqual(east.namespaces, ['ml']);
  await expectStatus(call(base, 'POST', '/api/v1/agent/uploads', east.token, {
    agent_version: '0.1.0', agent_instance: 'cluster-0', stream: 'cluster/cluster-0',
    spool_id: '0123456789abcdef0123456789abcdef', first_sequence: 1, last_sequence: 12,
    losses: noLosses, records: snapshots(),
  }, { 'Content-Encoding': 'gzip' }), 200);
  // The cluster role's side: takes the next command and answers it.
  const answer = async (stdout) => {
    const poll = await expectStatus(call(base, 'POST', '/api/v1/agent/commands/poll', east.token,
                                         { agent_instance: 'cluster-0', wait_seconds: 30 }), 200);
    assert.equal(poll.commands.length, 1);
    await expectStatus(call(base, 'POST', '/api/v1/agent/commands/' + poll.commands[0].id + '/result',
                            east.token, { exit_code: 0, stdout, stderr: '', duration_ms: 7 },
                            { 'Content-Encoding': 'gzip' }), 200);
    return poll.commands[0].argv;
  };

  // The cluster role has asked for commands: kubectl can run from the page.
  await expectStatus(call(base, 'POST', '/api/v1/agent/commands/poll', east.token,
                          { agent_instance: 'cluster-0', wait_seconds: 0 }), 200);

  browser = await launchChromium(options.chromium);
  const page = await newPage(browser);
  const shots = (name) => screenshots(page, options.screenshots, name);
  await signIn(page, base);
  await page.locator('tr[data-connection="gpu-east"]').getByRole('link', { name: 'gpu-east' }).click();
  await page.locator('nav.tabs').getByRole('link', { name: 'Settings' }).click();

  // A rule, added in the page: kubectl logs in ml waits for approval.
  const rules = page.locator('section[aria-labelledby="rules-title"]');
  await rules.getByText('No rules: every allowed command runs at once.').waitFor();
  await rules.getByLabel('Verb').selectOption('logs');
  await rules.getByLabel('Namespace').fill('ml');
  await rules.getByRole('button', { name: 'Add rule' }).click();
  const rule = rules.locator('table.rules tbody tr');
  await rule.waitFor();
  assert.match(await rule.innerText(), /kubectl logs in namespace ml/);

  // A script's API key asks; the command waits on the Approvals page, nothing reaches the agent.
  const asked = await expectStatus(call(base, 'POST', '/api/v1/connections/' + east.id + '/kubectl', apiKey,
                                        { argv: ['kubectl', 'logs', '-n', 'ml', 'trainer-0', '--tail=2'] }), 202);
  assert.equal(asked.status, 'waiting_for_approval');
  const idle = await expectStatus(call(base, 'POST', '/api/v1/agent/commands/poll', east.token,
                                       { agent_instance: 'cluster-0', wait_seconds: 0 }), 200);
  assert.equal(idle.commands.length, 0);
  // The navigation bar says something waits (it asks every 15 s; a reload asks now).
  await page.reload();
  await page.getByRole('link', { name: 'Approvals (1 waiting)' }).click();
  const card = page.locator('li.approval[data-command="' + asked.id + '"]');
  await card.waitFor();
  const cardText = await card.innerText();
  assert.match(cardText, /waiting for approval/);
  assert.match(cardText, /admin@example\.com/);
  assert.match(cardText, /kubectl logs -n ml trainer-0 --tail=2/);
  assert.match(cardText, /gpu-east/);
  await shots('approvals');
  // Approved in the page (the session, not the key that asked): it runs now.
  await card.getByRole('button', { name: 'Approve' }).click();
  await card.waitFor({ state: 'detached' });
  assert.deepEqual(await answer('step 900 loss 0.4\nstep 1000 loss 0.3\n'),
                   ['kubectl', 'logs', '-n', 'ml', 'trainer-0', '--tail=2']);
  const done = await expectStatus(call(base, 'GET', '/api/v1/connections/' + east.id + '/commands/' + asked.id, apiKey), 200);
  assert.equal(done.status, 'completed');
  assert.equal(done.stdout, 'step 900 loss 0.4\nstep 1000 loss 0.3\n');
  assert.equal(done.decided_by.email, email);

  // Typed in the page's kubectl console: it says it waits, and shows the output once approved
  // (here by the API key: another credential than the page's session).
  await page.goto(base + '/#/connections/' + east.id + '/kubectl');
  await page.getByLabel('Command').fill('kubectl logs -n ml trainer-1');
  await page.getByRole('button', { name: 'Run' }).click();
  const entry = page.locator('.history li').first();
  await entry.locator('.status').filter({ hasText: 'waiting for approval' }).waitFor();
  assert.match(await entry.innerText(), /approves or rejects it on the Approvals page/);
  const pending = page.locator('section[aria-labelledby="approvals-title"] li.approval');
  await pending.waitFor();
  await shots('connection-approvals');
  const waiting = await expectStatus(call(base, 'GET', '/api/v1/approvals', apiKey), 200);
  assert.equal(waiting.approvals.length, 1);
  await expectStatus(call(base, 'POST', '/api/v1/approvals/' + waiting.approvals[0].id + '/approve', apiKey), 200);
  await answer('trainer-1 ready\n');
  await entry.locator('.status').filter({ hasText: 'approved, exit 0' }).waitFor();
  assert.match(await entry.locator('pre.output').innerText(), /trainer-1 ready/);

  // Rejected in the page, with a reason the requester reads.
  const third = await expectStatus(call(base, 'POST', '/api/v1/connections/' + east.id + '/kubectl', apiKey,
                                        { argv: ['kubectl', 'logs', '-n', 'ml', 'notebook-0'] }), 202);
  const thirdCard = page.locator('li.approval[data-command="' + third.id + '"]');
  await thirdCard.waitFor();
  await thirdCard.getByRole('button', { name: 'Reject…' }).click();
  await thirdCard.getByLabel('Reason (shown to the requester)').fill('not during the incident');
  await thirdCard.getByRole('button', { name: 'Reject', exact: true }).click();
  await thirdCard.waitFor({ state: 'detached' });
  const rejected = await expectStatus(call(base, 'GET', '/api/v1/connections/' + east.id + '/commands/' + third.id, apiKey), 200);
  assert.equal(rejected.status, 'rejected');
  assert.equal(rejected.reason, 'not during the incident');

  // Pod right-sizing: each pod's requests and limits beside its hour of usage, flagged.
  await page.locator('nav.tabs').getByRole('link', { name: /^Workloads/ }).click();
  const sizing = page.locator('section[aria-labelledby="rightsizing-title"]');
  const trainer = sizing.locator('tbody[data-pod="ml/trainer-0"]');
  await trainer.waitFor();
  assert.equal(await trainer.getAttribute('data-verdict'), 'under_provisioned');
  assert.match(await trainer.innerText(), /1400m/);
  assert.match(await trainer.innerText(), /above the request/);
  assert.equal(await sizing.locator('tbody[data-pod="ml/notebook-0"]').getAttribute('data-verdict'), 'over_provisioned');
  assert.match(await sizing.locator('tbody[data-pod="ml/notebook-0"]').innerText(), /suggested request/);
  assert.equal(await sizing.locator('tbody[data-pod="ml/dcgm-exporter"]').getAttribute('data-verdict'), 'under_provisioned');
  assert.match(await sizing.locator('[data-totals]').innerText(), /2 under-provisioned/);
  await sizing.scrollIntoViewIfNeeded();
  await shots('right-sizing');

  // The namespace scope chosen in the token form.
  await page.getByRole('link', { name: 'Agent tokens' }).click();
  await page.getByLabel('Cluster name').fill('gpu-west');
  await page.getByLabel(/Namespaces kubectl may read/).fill('ml, dev');
  await page.getByRole('button', { name: 'Create token' }).click();
  await page.getByLabel('Password', { exact: true }).fill(password);
  await page.getByRole('button', { name: 'Confirm' }).click();
  await page.locator('pre[data-token]').waitFor();
  const list = await expectStatus(call(base, 'GET', '/api/v1/connections', apiKey), 200);
  const west = list.connections.find((c) => c.cluster_name === 'gpu-west');
  const scope = await expectStatus(call(base, 'GET', '/api/v1/connections/' + west.id + '/namespaces', apiKey), 200);
  assert.deepEqual(scope.namespaces, ['dev', 'ml']);

  assert.deepEqual(page.errors, []);
}

await runTest(main, { processes, browser: () => browser, dir: dataDir, reportBytes: 4000 });
