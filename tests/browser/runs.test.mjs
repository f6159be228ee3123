// The experiment-runs pages in headless Chromium, against a real uplink-console fed through
// the agent API with the records an experiments role sends: the run list with its status
// badges, filters and the agent's problems; a run with its params (a redacted one marked),
// latest metrics and a history chart; two runs compared on one chart. Screenshots at 1400 and
// 800 px wide go to --screenshots.
//
//   node runs.test.mjs --console BUILD/bin/uplink-console [--chromium PATH] [--screenshots DIR]
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import assert from 'node:assert/strict';
import {
  Processes, call, chartPixels, expectStatus, launchChromium, lowContrastText, newPage, runTest, signIn, startConsole,
  testOptions, waitUntil,
} from './support.mjs';

const options = testOptions(['console']);
const screenshots = options.screenshots;
const markup = '<img src=x onerror="window.__xss=1">';
const dataDir = mkdtempSync(join(tmpdir(), 'uplink-browser-runs-'));
const processes = new Processes();
let browser = null;

// What an experiments role uploads: runs, their points, and a problem.
function runsUpload() {
  const hour = 3600 * 1000;
  const start = Date.now() - 30 * hour;
  const iso = (ms) => new Date(ms).toISOString();
  const run = (id, fields) => ({
    source: 'mlflow', run_id: id, experiment_id: '7', experiment: 'resnet-sweep', name: id,
    user: 'ana', status: 'finished', offline: false, location: '7/' + id,
    started_at: iso(start), ended_at: iso(start + 2 * hour), params: {}, tags: {}, ...fields,
  });
  const points = (id, metric, f) => ({
    run_id: id, metric, points: Array.from({ length: 50 }, (_, step) => [step, f(step), start + step * 60000]),
  });
  const payloads = [
    { kind: 'experiment_run', version: 1, runs: [
      run('lr-0.1', { params: { lr: '0.1', batch_size: '256', db_password: '[redacted]' },
                      redacted: ['params.db_password'], tags: { 'mlflow.note': markup } }),
      run('lr-0.01', { params: { lr: '0.01', batch_size: '256' }, started_at: iso(start + hour),
                       ended_at: iso(start + 4 * hour) }),
      run('lr-1', { params: { lr: '1' }, status: 'failed', started_at: iso(start + 2 * hour),
                    ended_at: iso(start + 2 * hour + 90000) }),
      run('ouesdqxz', { source: 'wandb', experiment: 'roboticDiffusionTransformer', experiment_id: 'roboticDiffusionTransformer',
                        name: '', user: 'agilex', status: 'failed', exit_code: 255, offline: true,
                        started_at: iso(start + 3 * hour), ended_at: iso(start + 3 * hour + 11000),
                        location: 'offline-run-20251014_143711-ouesdqxz', summary: { loss: 2.12 } }),
      run('live-run', { status: 'running', started_at: iso(Date.now() - hour), ended_at: undefined, user: 'bo' }),
    ] },
    { kind: 'metric_points', version: 1, series: [
      points('lr-0.1', 'loss', (s) => 2 * Math.exp(-s / 10) + 0.1),
      points('lr-0.01', 'loss', (s) => 2 * Math.exp(-s / 30) + 0.2),
      points('lr-1', 'loss', (s) => (s < 20 ? 2 - s / 40 : 'NaN')),
      points('lr-0.1', 'accuracy', (s) => 1 - Math.exp(-s / 12)),
      points('live-run', 'loss', (s) => 3 - s / 25),
    ] },
    { kind: 'scan_problem', version: 1, problems: [
      { source: 'mlflow', location: '7/942806273db14de4aca645199ca294ed/meta.yaml',
        error: 'meta.yaml: mapping values are not allowed here (line 2)' },
    ] },
  ];
  return {
    agent_version: '0.1.0', agent_instance: 'experiments-0', stream: 'experiments/experiments-0',
    spool_id: '00112233445566778899aabbccddeeff', first_sequence: 1, last_sequence: payloads.length,
    losses: { dropped: { records: 0, bytes: 0 }, corrupt: { records: 0, bytes: 0 },
              rejected: { records: 0, bytes: 0 } },
    records: payloads.map((payload, i) => ({ sequence: i + 1, appended_at: new Date().toISOString(), payload })),
  };
}

async function main() {
  const { apiKey, base } = await startConsole(processes, options.console, dataDir);
  const lab = await expectStatus(call(base, 'POST', '/api/v1/connections', apiKey,
                                      { agent_name: 'experiments', cluster_name: 'ml-lab' }), 201);
  await expectStatus(call(base, 'POST', '/api/v1/agent/uploads', lab.token, runsUpload(),
                          { 'Content-Encoding': 'gzip' }), 200);

  browser = await launchChromium(options.chromium);
  const page = await newPage(browser);
  const pageErrors = page.errors;
  const shot = (name) => page.screenshot({ path: join(screenshots, name + '.png'), fullPage: true });
  await signIn(page, base);

  // From the connection to its runs.
  await page.locator('tr[data-connection="ml-lab"]').getByRole('link', { name: 'ml-lab' }).click();
  await page.locator('nav.tabs').getByRole('link', { name: 'Experiment runs' }).click();
  const rows = page.locator('table.runs tbody tr');
  await rows.first().waitFor();
  assert.equal(await rows.count(), 5);
  // Newest first; each status a badge with its word; the offline W&B run says so.
  assert.equal(await rows.first().getAttribute('data-run'), 'live-run');
  assert.equal(await page.locator('tr[data-run="live-run"] .badge').getAttribute('data-run-status'), 'running');
  const wandb = page.locator('tr[data-run="ouesdqxz"]');
  assert.match(await wandb.innerText(), /failed \(exit 255\)/);
  assert.match(await wandb.innerText(), /W&B/);
  assert.match(await wandb.innerText(), /offline/);
  assert.match(await page.locator('p.summary').innerText(), /3 finished|2 failed/);
  // The agent's problem is shown with its reason.
  assert.match(await page.locator('details.problems').innerText(), /mapping values are not allowed/);
  await shot('runs-1400');
  assert.deepEqual(await lowContrastText(page), [], 'runs');

  // Filters: by status, then by experiment.
  await page.getByLabel('Status').selectOption('failed');
  await waitUntil('the failed runs', async () => (await rows.count()) === 2);
  await page.getByLabel('Status').selectOption('');
  await page.getByLabel('Experiment').selectOption('roboticDiffusionTransformer');
  await waitUntil('the W&B experiment', async () => (await rows.count()) === 1);
  await page.getByLabel('Experiment').selectOption('');
  await waitUntil('every run again', async () => (await rows.count()) === 5);

  // Compare two runs' loss on one chart: both series' colours are drawn.
  await page.getByLabel('compare lr-0.1').check();
  await page.getByLabel('compare lr-0.01').check();
  const compare = page.locator('section.compare figure.chart');
  await compare.locator('canvas').waitFor();
  assert.equal(await page.getByLabel('Metric').inputValue(), 'accuracy');
  await page.getByLabel('Metric').selectOption('loss');
  await page.locator('figure.chart[data-metric="compare-loss"] canvas').waitFor();
  const lossChart = page.locator('figure.chart[data-metric="compare-loss"]');
  assert.ok((await chartPixels(lossChart, [37, 99, 235])).count > 20, 'first run drawn');
  assert.ok((await chartPixels(lossChart, [217, 119, 6])).count > 20, 'second run drawn');
  await shot('runs-compare-1400');
  assert.deepEqual(await lowContrastText(page), [], 'runs compare');

  // 800 px wide: the table scrolls inside its box, the page does not.
  await page.setViewportSize({ width: 800, height: 900 });
  await page.waitForTimeout(200);
  assert.equal(await page.evaluate(() => document.documentElement.scrollWidth <= innerWidth + 1), true);
  await shot('runs-800');
  await page.setViewportSize({ width: 1400, height: 900 });

  // A run: facts, the redacted param marked, markup in a tag shown as text, metrics and charts.
  await page.getByRole('link', { name: 'lr-0.1', exact: true }).click();
  await page.getByRole('heading', { name: 'Metrics' }).waitFor();
  assert.match(await page.locator('h1').innerText(), /lr-0\.1\s+finished/);
  assert.match(await page.locator('p.notice').innerText(), /params\.db_password/);
  const secretRow = page.locator('table.key-values tr', { hasText: 'db_password' });
  assert.match(await secretRow.innerText(), /\[redacted\]\s+redacted/);
  assert.ok((await page.locator('table.key-values').last().innerText()).includes(markup));
  assert.equal(await page.evaluate(() => window.__xss), undefined);
  const metrics = page.locator('table.metrics tbody tr');
  assert.equal(await metrics.count(), 2);
  assert.match(await metrics.nth(1).innerText(), /loss\s+0\.1\d+\s+49\s+50/);
  const loss = page.locator('figure.chart[data-metric="loss"]');
  await loss.locator('canvas').waitFor();
  assert.ok((await chartPixels(loss, [37, 99, 235])).count > 20, 'history drawn');
  await shot('run-1400');
  assert.deepEqual(await lowContrastText(page), [], 'run');
  await page.setViewportSize({ width: 800, height: 900 });
  await page.waitForTimeout(200);
  await shot('run-800');
  assert.deepEqual(await lowContrastText(page), [], 'run 800');

  // A failed run whose last points are NaN: the chart draws what it can, the table says NaN.
  await page.goto(base + '/#/connections/' + lab.id + '/runs/lr-1');
  await page.getByRole('heading', { name: 'Metrics' }).waitFor();
  assert.match(await page.locator('table.metrics tbody tr').first().innerText(), /NaN/);
  assert.deepEqual(pageErrors, []);
}

await runTest(main, { processes, browser: () => browser, dir: dataDir, reportBytes: 4000 });
