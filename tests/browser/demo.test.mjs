// `make demo` as a new user sees it in headless Chromium: scripts/demo.sh starts the simulated
// cluster, the console and the agents (a node agent on each GPU node); signed in with the
// password it prints, every node of the inventory has telemetry and charts (no node sends
// under a name the inventory does not have), the charts draw from the first sample and fill in
// as more arrive, and the
// cluster agent's snapshot fills the Workloads tab. Screenshots at 1400 and 800 px go to
// --screenshots.
//
//   node demo.test.mjs --demo scripts/demo.sh --bin BUILD/bin [--chromium PATH] [--screenshots DIR]
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import assert from 'node:assert/strict';
import {
  Processes, chartPixels, freePort, launchChromium, newPage, nextFrames, runTest, screenshots, signIn, testOptions, waitUntil,
} from './support.mjs';

const options = testOptions(['demo', 'bin']);
const dir = mkdtempSync(join(tmpdir(), 'uplink-demo-test-'));
const processes = new Processes({ cwd: dir, env: { ...process.env, TMPDIR: dir, HOME: dir, KUBECONFIG: '' } });
let browser = null;

async function main() {
  const port = await freePort();
  processes.env.UPLINK_DEMO_PORT = String(port);
  const demo = processes.start('make demo', [resolve(options.demo), resolve(options.bin)]);
  await waitUntil('the demo to be running', () => demo.log.includes('uplink demo is running'), 240);
  const base = demo.log.match(/Console URL: +(http\S+)/)[1];
  const password = demo.log.match(/Admin password: +(\S+)/)[1];
  assert.equal(base, 'http://127.0.0.1:' + port);

  browser = await launchChromium(options.chromium);
  const page = await newPage(browser);
  const shots = (name) => screenshots(page, options.screenshots, 'demo-' + name);
  page.setDefaultTimeout(120000);
  await signIn(page, base, 'admin@localhost', password);
  const row = page.locator('tr[data-connection="demo-gpu-cluster"]');
  await row.locator('[data-health="healthy"]').waitFor();
  await shots('connections');

  // Every node of the inventory sends samples under its own name: each row has its charts.
  await row.getByRole('link', { name: 'demo-gpu-cluster' }).click();
  await page.locator('nav.tabs').getByRole('link', { name: /^Nodes/ }).click();
  const nodes = page.locator('table.nodes tbody tr');
  await nodes.first().waitFor();
  const names = await nodes.evaluateAll((rows) => rows.map((r) => r.dataset.node));
  assert.ok(names.length >= 1, JSON.stringify(names));
  for (const name of names) {
    await page.getByRole('link', { name: 'Show the charts of ' + name }).waitFor();
  }
  assert.equal(await page.locator('[data-unknown-node]').count(), 0);
  await shots('nodes');
  // The first samples are drawn: memory from the first one, as a dot or a line.
  await page.getByRole('link', { name: 'Show the charts of ' + names[0] }).click();
  const memory = page.locator('figure.chart[data-metric="memory_used_bytes"]');
  await waitUntil('the memory chart', async () => Number(await memory.getAttribute('data-points')) >= 1, 120);
  await nextFrames(page);
  const drawn = (await chartPixels(memory)).count;
  assert.ok(drawn > 10, 'the memory chart draws its samples: ' + drawn + ' pixels');
  // Rates need a second sample: the charts are drawn again as it arrives (every 30 s).
  const cpu = page.locator('figure.chart[data-metric="cpu_percent"]');
  await waitUntil('the CPU chart', async () => Number(await cpu.getAttribute('data-points')) >= 1, 150);
  // This machine has no GPU: the charts say so once, instead of four empty panels.
  await page.locator('[data-no-gpus]').waitFor();
  await shots('node-charts');

  // The cluster agent's snapshot: the simulated workloads, the failing pod first.
  await page.locator('nav.tabs').getByRole('link', { name: /^Workloads/ }).click();
  const pods = page.locator('table.pods tbody tr');
  await pods.first().waitFor();
  assert.equal(await pods.first().getAttribute('data-problem'), 'yes');
  await shots('workloads');
  await page.locator('nav.tabs').getByRole('link', { name: 'Overview' }).click();
  await page.locator('table.agents tr[data-role="cluster"][data-agent-state="connected"]').waitFor();
  await shots('overview');
  assert.deepEqual(page.errors, []);
}

await runTest(main, { processes, browser: () => browser, dir, reportBytes: 4000 });
