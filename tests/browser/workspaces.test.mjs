// Workspace execution in headless Chromium against a real uplink-console, with the inventory
// agent and the workspace controller played through the agent API: the supplier's capacity
// form ("save capacity and connect cluster", the token once), the admin's review (checkboxes,
// per-GPU figures, approved nodes from the inventory), the execution section (the credential
// once, execution.json, the helm command with the release the controller reported, also on
// the connection's page), a reservation with its transitions, and a command whose output
// streams into the page. Screenshots at 1400 and 800 px wide go to --screenshots.
//
//   node workspaces.test.mjs --console BUILD/bin/uplink-console [--chromium PATH] [--screenshots DIR]
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import assert from 'node:assert/strict';
import {
  Processes, adminPassword, call, expectStatus, launchChromium, newPage, runTest, screenshots, signIn,
  startConsole, testOptions, waitUntil,
} from './support.mjs';

const options = testOptions(['console']);
const dataDir = mkdtempSync(join(tmpdir(), 'uplink-browser-workspaces-'));
const processes = new Processes();
const image = 'registry.example/uplink/workspace@sha256:' + 'c'.repeat(64);
const clusterUid = 'browser-kube-system-uid';
let browser = null;

function inventory(nodes) {
  return {
    agent_version: '0.1.0', cluster_uid: clusterUid, selector: 'nvidia.com/gpu.present=true',
    nodes: nodes.map((name, i) => ({
      name, ready: i < 2, unschedulable: false, gpu_resource: 'nvidia.com/gpu', gpu_capacity: 8,
      gpu_allocatable: 8, gpu_product: 'NVIDIA-H100-80GB-HBM3',
    })),
  };
}

// The workspace controller's calls, as protocol/workspace.h encodes them.
function controller(base, credential) {
  const headers = { 'Uplink-Cluster-UID': clusterUid, 'User-Agent': 'uplink-agent/0.1.0 (workspace)' };
  return {
    sync: (events = []) => expectStatus(call(base, 'POST', '/api/v1/agent/workspace/sync', credential, {
      instance: 'uplink-workspace-7d9f-abcde', version: '0.1.0', release: 'gpu-supply',
      namespace: 'uplink-workspaces', draining: false, wait_seconds: 0, events, workspaces: [],
    }, headers), 200),
    output: (id, body) => expectStatus(call(base, 'POST', '/api/v1/agent/workspace/commands/' + id + '/output',
                                            credential, body, headers), 200),
  };
}

// Waits for `outcome`, typing the password first when the page asks for it (a sensitive call
// after the sign-in's confirmation lapsed).
async function confirmPassword(page, outcome) {
  const prompt = page.locator('dialog.modal');
  await outcome.or(prompt).first().waitFor();
  if (await prompt.isVisible()) {
    await prompt.getByLabel('Password').fill(adminPassword);
    await prompt.getByRole('button', { name: 'Confirm' }).click();
  }
  await outcome.waitFor();
}

async function main() {
  const { apiKey, base } = await startConsole(processes, options.console, dataDir,
                                              ['--workspace-image', image]);
  browser = await launchChromium(options.chromium);
  const page = await newPage(browser);
  await signIn(page, base);

  // The supplier's form: capacity, then the token once.
  await page.getByRole('link', { name: 'Offers' }).click();
  await page.getByLabel('Cluster name').fill('gpu-east');
  await page.getByLabel('GPUs').fill('8');
  await page.getByLabel('Country').fill('de');
  await page.getByLabel('Price per GPU-hour').fill('2.10');
  await page.getByRole('button', { name: 'Save capacity and connect cluster' }).click();
  const reveal = page.locator('[data-offer-token]');
  await confirmPassword(page, reveal);
  const token = (await reveal.locator('pre.token').innerText()).trim();
  assert.match(token, /^agt_/);
  const offers = await expectStatus(call(base, 'GET', '/api/v1/offers', apiKey), 200);
  const offer = offers.offers[0];
  assert.equal(offer.state, 'draft');
  await screenshots(page, options.screenshots, 'offers');
  await page.getByRole('button', { name: 'I have stored the token' }).click();

  // The inventory agent reports three nodes; one is not ready.
  await expectStatus(call(base, 'POST', '/api/v1/agent/inventory', token,
                          inventory(['gpu-node-0001', 'gpu-node-0002', 'gpu-node-0003'])), 200);

  // The admin's review, in two steps: not every check, then every check.
  await page.goto(base + '/#/offers/' + offer.id);
  await page.locator('[data-offer-state="connected"]').waitFor();
  await page.getByLabel('Supplier authority confirmed').check();
  await page.getByLabel('CPU per GPU').fill('8');
  await page.getByLabel('Memory per GPU').fill('64Gi');
  await page.getByLabel('Disk per GPU').fill('100Gi');
  await page.getByLabel('Transfer budget').fill('1Ti');
  await page.getByLabel(/gpu-node-0001/).check();
  assert.match(await page.locator('[data-review-outcome]').innerText(), /stays in review/);
  await page.getByRole('button', { name: 'Save review' }).click();
  await page.locator('h1 [data-offer-state="in_review"]').waitFor();
  for (const label of ['Hardware compatible', 'Isolation verified', 'Access expiry and cleanup checked',
                       'Disk-eviction test done', /Network-policy enforcement/, 'Price includes traffic costs']) {
    await page.getByLabel(label).check();
  }
  await page.getByLabel(/gpu-node-0002/).check();
  assert.match(await page.locator('[data-review-outcome]').innerText(), /qualifies the offer/);
  await page.getByRole('button', { name: 'Save review' }).click();
  await page.locator('h1 [data-offer-state="qualified"]').waitFor();
  assert.match(await page.locator('[data-per-gpu]').innerText(), /8 CPU,\s+64 GiB memory,\s+100 GiB disk/);

  // Execution: the credential once, execution.json, the helm command.
  await page.getByLabel('Kubernetes API endpoint CIDRs').fill('10.96.0.1/32');
  await page.getByRole('button', { name: 'Create execution credential' }).click();
  const issued = page.locator('[data-execution-credential]');
  await confirmPassword(page, issued);
  const credential = (await issued.locator('pre.token').innerText()).trim();
  assert.match(credential, /^exe_/);
  const download = page.waitForEvent('download');
  await issued.getByRole('button', { name: 'Download execution.json' }).click();
  const values = JSON.parse(readFileSync(await (await download).path(), 'utf8'));
  assert.equal(values.execution.workspaceImage, image);
  assert.deepEqual(values.execution.nodes, ['gpu-node-0001', 'gpu-node-0002']);
  assert.deepEqual(values.execution.kubernetesApi.cidrs, ['10.96.0.1/32']);
  assert.match(await page.locator('[data-helm-upgrade]').first().innerText(),
               /^helm upgrade uplink-agent uplink\/uplink-agent .*--reset-then-reuse-values -f execution\.json$/);
  await screenshots(page, options.screenshots, 'offer-review');
  await issued.getByRole('button', { name: 'I have stored the credential' }).click();

  // The controller calls: its release is shown, here and on the connection's page.
  const agent = controller(base, credential);
  await agent.sync();
  await page.reload();
  await page.locator('[data-helm-release]', { hasText: 'gpu-supply' }).waitFor();
  assert.match(await page.locator('[data-helm-upgrade]').innerText(), /^helm upgrade gpu-supply /);
  await page.goto(base + '/#/connections/' + offer.connection_id);
  await page.locator('[data-connection-execution] [data-helm-release]', { hasText: 'gpu-supply' }).waitFor();
  await screenshots(page, options.screenshots, 'connection-execution');

  // A reservation, and the controller running it.
  await page.getByRole('link', { name: 'Reservations' }).click();
  await page.getByRole('spinbutton', { name: 'GPUs' }).fill('2');
  await page.getByLabel('Hours').fill('2');
  await page.getByRole('button', { name: 'Reserve' }).click();
  await page.locator('h1 [data-reservation-state="reserved"]').waitFor();
  const reservation = decodeURIComponent(page.url().split('/').pop());
  assert.match(reservation, /^res_[0-9a-f]{16}$/);
  const at = new Date().toISOString();
  const pod = 'ws-' + reservation.replace('_', '-');
  await agent.sync([
    { key: reservation + '/provisioning/1', reservation_id: reservation, state: 'provisioning',
      reason: 'pod created', at, pod, node: 'gpu-node-0001' },
    { key: reservation + '/running/1', reservation_id: reservation, state: 'running',
      reason: 'pod Running on gpu-node-0001', at, pod, node: 'gpu-node-0001' }]);
  await page.locator('h1 [data-reservation-state="running"]').waitFor({ timeout: 15000 });
  assert.equal(await page.locator('table[data-transitions] tbody tr').count(), 3);

  // A command: its output streams in, then its exit code.
  await page.getByLabel('Code').fill('id -u');
  await page.getByRole('button', { name: 'Run' }).click();
  await page.locator('[data-command]').waitFor();
  let work;
  await waitUntil('the command handed to the controller', async () => {
    work = await agent.sync();
    return work.commands.length === 1;
  });
  const command = work.commands[0];
  assert.equal(command.code, 'id -u');
  await agent.output(command.id, { offset: 0, data_base64: Buffer.from('1000\n').toString('base64'),
                                   state: 'running', exit_code: null, truncated: false, message: '' });
  await page.locator('[data-command-output]', { hasText: '1000' }).waitFor();
  await agent.output(command.id, { offset: 5, data_base64: Buffer.from('done\n').toString('base64'),
                                   state: 'exited', exit_code: 0, truncated: false, message: '' });
  await page.locator('[data-exit-code]', { hasText: '0' }).waitFor();
  assert.equal(await page.locator('[data-command-output]').innerText(), '1000\ndone\n');
  assert.equal(await page.locator('[data-command-state]').innerText(), 'exited');
  await screenshots(page, options.screenshots, 'reservation');
  await page.goto(base + '/#/reservations');
  await page.locator('[data-reservation] [data-reservation-state="running"]').waitFor();
  await screenshots(page, options.screenshots, 'reservations');
  assert.deepEqual(page.errors, []);
}

await runTest(main, { processes, browser: () => browser, dir: dataDir, reportBytes: 4000 });
