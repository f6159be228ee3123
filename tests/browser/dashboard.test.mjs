// The web console as an operator's dashboard, in headless Chromium against a real
// uplink-console fed through the agent API: a healthy cluster (its cluster role played here,
// node samples every 60 s with 8 GPUs, a node without GPUs, an outage, telemetry from a node
// the inventory does not list, a snapshot with failing pods and Warning events), a degraded
// one (a node NotReady, one cordoned), one offline for 3 days and one still waiting. It checks
// what an operator must see at a glance: the fleet's health with the unhealthy first, each
// cluster's health and why, its agents by role, charts that draw what there is, the audit log's
// who and what, pages and errors for people, the tabs, narrow windows and the small things;
// screenshots of each page at 1400 and 800 px go to --screenshots for review.
//
// The console has no clock to move, so the offline cluster's last calls, and later the
// browser's session, are set back in its SQLite database while it is stopped.
//
//   node dashboard.test.mjs --console BUILD/bin/uplink-console [--chromium PATH] [--screenshots DIR]
import { execFileSync } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import assert from 'node:assert/strict';
import {
  Processes, adminEmail, call, chartPixels, expectStatus, launchChromium, newPage, nextFrames, runTest, screenshots,
  signIn, startConsole, testOptions, waitUntil,
} from './support.mjs';

const options = testOptions(['console']);
const dir = mkdtempSync(join(tmpdir(), 'uplink-dashboard-'));
const dataDir = join(dir, 'console');
const processes = new Processes({ cwd: dir });
let browser = null;
const day = 86400;
const noLosses = { dropped: { records: 0, bytes: 0 }, corrupt: { records: 0, bytes: 0 },
                   rejected: { records: 0, bytes: 0 } };
const iso = (ms) => new Date(ms).toISOString().replace(/\.\d+Z$/, 'Z');

function inventoryNode(name, fields = {}) {
  return {
    name, uid: 'uid-' + name, ready: true, unschedulable: false, gpu_resource: 'nvidia.com/gpu',
    gpu_capacity: 8, gpu_allocatable: 8, gpu_product: 'NVIDIA-H100-80GB-HBM3',
    resources: { 'nvidia.com/gpu': { capacity: 8, allocatable: 8 } }, taints: [], ...fields,
  };
}

// A node sample as the node role sends it; `gpus` GPUs, or none found (gpu_source "none").
function sample(node, at, i, gpus) {
  return {
    kind: 'node_sample', version: 1, node, collected_at: iso(at), boot_time: 1799000000,
    cpu: { count: 64, seconds: { user: 1000 + i * 900 + (i % 5) * 200, nice: 0, system: 0, idle: 5000 + i * 3000,
                                 iowait: 0, irq: 0, softirq: 0, steal: 0 } },
    memory: { total_bytes: 540000000000, available_bytes: 300000000000 + (i % 9) * 5000000000 },
    load: { load1: 3.5, load5: 3, load15: 2.5 },
    network: [{ device: 'eth0', receive_bytes: i * 60000000, transmit_bytes: i * 2000000 }],
    disks: [{ device: 'nvme0n1', read_bytes: i * 12000000, written_bytes: i * 18000000 }],
    gpu_source: gpus ? 'nvml' : 'none',
    gpus: Array.from({ length: gpus }, (_, g) => ({
      index: g, uuid: 'GPU-' + g, name: 'NVIDIA H100 80GB HBM3',
      utilization_percent: (i * 7 + g * 11) % 100, memory_used_bytes: 40000000000 + g * 1000000000,
      memory_total_bytes: 85520809984, temperature_celsius: 55 + g, power_watts: 400 + g * 10 + (i % 4) * 5,
    })),
  };
}

// One upload of a node's samples at `times`.
function samples(node, times, gpus) {
  return {
    agent_version: '0.3.0', agent_instance: node, stream: 'node/' + node,
    spool_id: ('0123456789abcdef' + node.replace(/[^0-9a-f]/g, '')).padEnd(32, '0').slice(0, 32),
    first_sequence: 1, last_sequence: times.length, losses: noLosses,
    records: times.map((at, i) => ({ sequence: i + 1, appended_at: iso(at), payload: sample(node, at, i, gpus) })),
  };
}

const podsWide = [
  'NAMESPACE     NAME                       READY   STATUS             RESTARTS        AGE   IP          NODE            NOMINATED NODE   READINESS GATES',
  'kube-system   coredns-5d78c9869d-abcde   1/1     Running            0               12d   10.0.0.5    east-node-1     <none>           <none>',
  'ml            trainer-0                  0/1     CrashLoopBackOff   7 (2m14s ago)   1h    10.0.1.9    east-node-2     <none>           <none>',
  'ml            queued-job-x               0/1     Pending            0               5m    <none>      <none>          <none>           <none>',
  'ml            notebook-0                 1/1     Running            0               3d    10.0.1.10   east-node-1     <none>           <none>',
  '',
].join('\n');
const warnings = 'NAMESPACE   LAST SEEN   TYPE      REASON             OBJECT                 MESSAGE\n' +
  'ml          2m          Warning   BackOff            pod/trainer-0          Back-off restarting failed container trainer in pod trainer-0\n' +
  'ml          5m          Warning   FailedScheduling   pod/queued-job-x       0/3 nodes are available: 3 Insufficient nvidia.com/gpu.\n';
const deployments = 'NAMESPACE   NAME   READY   UP-TO-DATE   AVAILABLE   AGE\nml          api    1/3     3            1           4d\n';

function snapshot(now) {
  const result = (name, argv, stdout) => ({ name, argv: ['kubectl', ...argv], exit_code: 0, stdout, stderr: '', duration_ms: 20 });
  return {
    agent_version: '0.3.0', agent_instance: 'cluster-0', stream: 'cluster/cluster-0',
    spool_id: 'ccccccccccccccccccccccccccccccc0', first_sequence: 1, last_sequence: 1, losses: noLosses,
    records: [{ sequence: 1, appended_at: iso(now), payload: {
      kind: 'cluster_snapshot', collected_at: iso(now), results: [
        result('pods', ['get', 'pods', '-A', '-o', 'wide'], podsWide),
        result('warning_events', ['get', 'events', '-A', '--field-selector', 'type=Warning'], warnings),
        result('deployments', ['get', 'deployments', '-A'], deployments),
      ] } }],
  };
}

async function main() {
  // Stale after 5 minutes, offline after 10 rather than 90 s and 150 s, so that what this test
  // made stays as it was however long Chromium takes; the rules do not depend on the figures.
  const serveArgs = ['--stale-after', '5m', '--offline-after', '10m'];
  const consoleUp = await startConsole(processes, options.console, dataDir, serveArgs);
  const { base, apiKey } = consoleUp;
  const api = (method, path, body, headers) => call(base, method, path, apiKey, body, headers);
  const make = async (cluster, nodes, extra = {}) => {
    const created = await expectStatus(api('POST', '/api/v1/connections',
                                           { agent_name: 'uplink-agent', cluster_name: cluster, ...extra }), 201);
    if (nodes) {
      await expectStatus(call(base, 'POST', '/api/v1/agent/inventory', created.token, {
        agent_version: '0.3.0', cluster_uid: 'uid-' + cluster, selector: 'nvidia.com/gpu.present=true', nodes,
      }), 200);
    }
    return created;
  };
  const now = Date.now();
  const minute = 60000;
  // Healthy: three nodes, every GPU allocatable; the cluster role played below.
  const east = await make('gpu-east', ['east-node-1', 'east-node-2', 'east-node-3'].map((n) => inventoryNode(n)));
  // Every 60 s for the last hour, 8 GPUs.
  const hourly = Array.from({ length: 60 }, (_, i) => now - (59 - i) * minute);
  await expectStatus(call(base, 'POST', '/api/v1/agent/uploads', east.token, samples('east-node-1', hourly, 8),
                          { 'Content-Encoding': 'gzip' }), 200);
  // One sample, no GPU found.
  await expectStatus(call(base, 'POST', '/api/v1/agent/uploads', east.token, samples('east-node-2', [now - minute], 0),
                          { 'Content-Encoding': 'gzip' }), 200);
  // Every 30 s, but nothing from 40 to 20 minutes ago: an outage.
  const withOutage = Array.from({ length: 120 }, (_, i) => now - (119 - i) * 30000)
    .filter((at) => at < now - 40 * minute || at > now - 20 * minute);
  await expectStatus(call(base, 'POST', '/api/v1/agent/uploads', east.token, samples('east-node-3', withOutage, 2),
                          { 'Content-Encoding': 'gzip' }), 200);
  // A node agent started under a name the inventory does not have.
  await expectStatus(call(base, 'POST', '/api/v1/agent/uploads', east.token, samples('demo-node', [now - minute], 0),
                          { 'Content-Encoding': 'gzip' }), 200);
  await expectStatus(call(base, 'POST', '/api/v1/agent/uploads', east.token, snapshot(now),
                          { 'Content-Encoding': 'gzip' }), 200);
  // Degraded: one node NotReady, one cordoned: 2 / 3 nodes ready, 8 / 24 GPUs.
  const west = await make('gpu-west', [inventoryNode('west-node-1', { ready: false }),
                                       inventoryNode('west-node-2', { unschedulable: true }),
                                       inventoryNode('west-node-3')]);
  // Offline for 3 days (set back below), and one whose agent never called.
  const south = await make('gpu-south', [inventoryNode('south-node-1'), inventoryNode('south-node-2')]);
  await make('gpu-north', null);
  // A member, for the users page.
  await expectStatus(api('POST', '/api/v1/users', { email: 'member@example.com', role: 'member' }), 201);

  // The cluster role of gpu-east, played here: it polls, and answers each command with what
  // `respond` says (by default a table); it reports the inventory again now and then, as the
  // inventory role does.
  let respond = async () => ({ exit_code: 0, stdout: 'NAME          STATUS\neast-node-1   Ready\n', stderr: '', duration_ms: 9 });
  let playing = true;
  const clusterRole = (async () => {
    while (playing) {
      try {
        const poll = await call(base, 'POST', '/api/v1/agent/commands/poll', east.token,
                                { agent_instance: 'cluster-0', wait_seconds: 5 });
        for (const command of poll.body?.commands || []) {
          const result = await respond(command);
          await call(base, 'POST', '/api/v1/agent/commands/' + command.id + '/result', east.token, result,
                     { 'Content-Encoding': 'gzip' });
        }
      } catch {
        await new Promise((r) => setTimeout(r, 500));  // the console is restarting
      }
    }
  })();

  // Three days of silence for gpu-south, as a console finds it after a restart.
  await consoleUp.stop();
  const unix = Math.floor(Date.now() / 1000);
  execFileSync('sqlite3', [join(dataDir, 'console.db'),
    `UPDATE connections SET last_seen_at = ${unix - 3 * day}, last_report_at = ${unix - 3 * day} WHERE id = '${south.id}';` +
    `UPDATE connection_agents SET last_seen_at = ${unix - 3 * day} WHERE connection_id = '${south.id}';`]);
  await consoleUp.restart();

  browser = await launchChromium(options.chromium);
  const page = await newPage(browser, { timezoneId: 'Europe/Berlin' });
  const shots = (name) => screenshots(page, options.screenshots, 'dashboard-' + name);
  const main = page.locator('main');

  // 10. The sign-in form has the focus on its email field; the page has an icon.
  await page.goto(base + '/');
  await page.getByLabel('Email').waitFor();
  assert.equal(await page.evaluate(() => document.activeElement.name), 'email');
  assert.equal(await page.title(), 'Sign in · uplink');
  const icon = await page.locator('link[rel="icon"]').getAttribute('href');
  const iconReply = await fetch(base + icon);
  assert.equal(iconReply.status, 200);
  assert.equal(iconReply.headers.get('content-type'), 'image/svg+xml');
  await shots('sign-in');
  await signIn(page, base);

  // 1 and 2. The fleet at a glance, the unhealthy clusters first.
  const rows = page.locator('table.connections tbody tr');
  await page.locator('tr[data-connection="gpu-east"]').waitFor();
  assert.deepEqual(await rows.evaluateAll((list) => list.map((r) => r.dataset.connection)),
                   ['gpu-south', 'gpu-west', 'gpu-north', 'gpu-east']);
  const row = (cluster) => page.locator(`tr[data-connection="${cluster}"]`);
  assert.equal(await row('gpu-south').locator('[data-status]').innerText(), 'offline 3 d');
  assert.equal(await row('gpu-south').locator('[data-health]').getAttribute('data-health'), 'offline');
  assert.equal(await row('gpu-west').locator('[data-health]').getAttribute('data-health'), 'degraded');
  const westText = await row('gpu-west').innerText();
  assert.match(westText, /1 node NotReady/);
  assert.match(westText, /1 node cordoned/);
  assert.match(westText, /2 \/ 3/);
  assert.match(westText, /8 \/ 24/);
  assert.equal(await row('gpu-east').locator('[data-health]').getAttribute('data-health'), 'healthy');
  assert.equal(await row('gpu-north').locator('[data-health]').getAttribute('data-health'), 'waiting');
  assert.match(await row('gpu-east').locator('[data-gpu-model]').innerText(), /24× NVIDIA-H100-80GB-HBM3/);
  const fleet = page.locator('[data-fleet]');
  assert.match(await fleet.innerText(), /Clusters\s*4/);
  for (const [health, count] of [['offline', 1], ['degraded', 1], ['waiting', 1], ['healthy', 1]]) {
    assert.match(await fleet.locator(`[data-fleet-health="${health}"]`).innerText(), new RegExp('^' + count + ' '));
  }
  assert.match(await fleet.locator('[data-fleet-nodes]').innerText(), /7 \/ 8/);
  assert.match(await fleet.locator('[data-fleet-gpus]').innerText(), /48 \/ 64/);
  assert.equal(await page.title(), 'Connections · uplink');
  await shots('connections');
  // Filter and sort.
  await page.getByLabel('Health').selectOption('attention');
  await waitUntil('only the clusters that need attention', async () => (await rows.count()) === 2);
  await page.getByLabel('Health').selectOption('');
  await page.getByLabel('Find').fill('west');
  await waitUntil('only gpu-west', async () => (await rows.count()) === 1);
  await page.getByLabel('Find').fill('');
  await page.getByRole('button', { name: 'Cluster', exact: true }).click();
  await waitUntil('sorted by name', async () => (await rows.first().getAttribute('data-connection')) === 'gpu-east');

  // 2 and 8. A degraded cluster's page: its health and why, in tabs; its NotReady and cordoned
  // nodes coloured.
  await row('gpu-west').getByRole('link', { name: 'gpu-west' }).click();
  const card = page.locator('[data-health-card]');
  await card.waitFor();
  assert.equal(await card.getAttribute('data-health-card'), 'degraded');
  assert.match(await card.innerText(), /1 node NotReady/);
  assert.match(await page.locator('p.summary').innerText(), /2 \/ 3 nodes ready, 8 \/ 24 GPUs/);
  assert.deepEqual(await page.locator('nav.tabs a').allInnerTexts(),
                   ['Overview', 'Nodes 3', 'Workloads', 'kubectl', 'Settings', 'Experiment runs']);
  assert.equal(await page.title(), 'gpu-west · Overview · uplink');
  await shots('overview-degraded');
  await page.locator('nav.tabs').getByRole('link', { name: /^Nodes/ }).click();
  const notReady = page.locator('tr[data-node="west-node-1"]');
  await notReady.waitFor();
  assert.match(await notReady.getAttribute('class'), /node-bad/);
  assert.equal(await notReady.locator('[data-node-state]').innerText(), 'NotReady');
  assert.equal(await page.locator('tr[data-node="west-node-2"] [data-node-state]').innerText(), 'cordoned');
  assert.equal(await page.locator('tr[data-node="west-node-3"] [data-node-state]').count(), 0);
  // 3. No cluster agent ever called: Run is disabled, and says why.
  await page.locator('nav.tabs').getByRole('link', { name: 'kubectl' }).click();
  await page.locator('[data-kubectl-blocked]').waitFor();
  assert.equal(await page.getByRole('button', { name: 'Run' }).isDisabled(), true);
  assert.match(await page.locator('[data-kubectl-blocked]').innerText(), /No cluster agent has called/);
  // 2. An offline cluster's page says its figures are old.
  await page.goto(base + '/#/connections/' + south.id + '/nodes');
  await page.locator('[data-as-of]').waitFor();
  assert.match(await page.locator('[data-as-of]').innerText(), /Offline: no agent has called for 3 d/);
  assert.match(await page.locator('[data-as-of]').innerText(), /inventory 3 d ago/);
  await shots('offline');

  // 3. The healthy cluster's agents, by role, each with its own state and last call.
  await page.goto(base + '/#/connections/' + east.id);
  const agentRow = (role) => page.locator(`table.agents tr[data-role="${role}"]`);
  await agentRow('cluster').first().waitFor();
  assert.equal(await agentRow('cluster').getAttribute('data-agent-state'), 'connected');
  assert.equal(await agentRow('inventory').getAttribute('data-agent-state'), 'connected');
  assert.equal(await agentRow('node').count(), 4);
  assert.match(await agentRow('node').first().innerText(), /node × 4/);
  assert.match(await agentRow('cluster').locator('time').getAttribute('title'), /\d{4}/);
  // 8. Overview: figures that link to the tab that explains them.
  assert.match(await page.locator('[data-stat="pods"]').innerText(), /Pods with problems\s*2/);
  await shots('overview-healthy');

  // 4. Telemetry from a node the inventory does not list is shown as such.
  await page.locator('nav.tabs').getByRole('link', { name: /^Nodes/ }).click();
  const unknown = page.locator('[data-unknown-node="demo-node"]');
  await unknown.waitFor();
  assert.match(await unknown.innerText(), /Received from unknown node demo-node/);

  // 5. Charts: a node sampled every 60 s draws its lines in "Last hour"; Show scrolls to them.
  await page.getByRole('link', { name: 'Show the charts of east-node-1' }).click();
  const cpu = page.locator('figure.chart[data-metric="cpu_percent"]');
  await cpu.locator('canvas').waitFor();
  await page.locator('figure.chart[data-metric="gpu_utilization_percent"] .legend [data-series]').first().waitFor();
  const chartsTop = await page.locator('section.node-charts').evaluate((e) => e.getBoundingClientRect().top);
  assert.ok(chartsTop >= 0 && chartsTop < 200, 'the charts were scrolled to: top at ' + chartsTop);
  for (const metric of ['cpu_percent', 'memory_used_bytes', 'network_receive_bytes_per_second']) {
    const drawn = await chartPixels(page.locator(`figure.chart[data-metric="${metric}"]`));
    assert.ok(drawn.count > 300, metric + ': ' + JSON.stringify(drawn));
    assert.ok(drawn.widestGap < 12, metric + ' has a gap: ' + JSON.stringify(drawn));
  }
  // Percentages on 0–100.
  for (const metric of ['cpu_percent', 'gpu_utilization_percent']) {
    const chart = page.locator(`figure.chart[data-metric="${metric}"]`);
    assert.deepEqual([await chart.getAttribute('data-y-min'), await chart.getAttribute('data-y-max')], ['0', '100'], metric);
  }
  // Legends: last, min and max of each of 8 GPUs, without hovering, in a few lines.
  const legend = page.locator('figure.chart[data-metric="gpu_utilization_percent"] .legend');
  assert.equal(await legend.locator('[data-series]').count(), 8);
  for (const entry of await legend.locator('[data-series]').all()) {
    assert.match(await entry.getAttribute('title'), /^GPU \d: last \d+ %, min \d+ %, max \d+ %$/);
    // The figures are on the page, not only on hover.
    assert.match(await entry.locator('xpath=..').innerText(), /GPU \d\s+\d+ %\s+\d+ %\s+\d+ %/);
  }
  assert.deepEqual(await legend.locator('thead th').allInnerTexts(), ['series', 'last', 'min', 'max', 'series', 'last', 'min', 'max']);
  const legendHeight = await legend.evaluate((e) => e.getBoundingClientRect().height);
  assert.ok(legendHeight < 110, 'the legend of 8 GPUs is ' + legendHeight + ' px tall');
  assert.match(await page.locator('[data-timezone]').innerText(), /Times in Europe\/Berlin \(UTC\+0[12]:00\)/);
  assert.equal(await page.title(), 'gpu-east · Nodes · uplink');
  await shots('node-charts');
  // Closed: back to the nodes.
  await page.getByRole('link', { name: 'Close charts' }).click();
  await page.locator('section.node-charts').waitFor({ state: 'detached' });
  assert.match(page.url(), /\/nodes$/);
  // A node with one sample and no GPU: the sample is a dot; no four blank GPU panels.
  await page.getByRole('link', { name: 'Show the charts of east-node-2' }).click();
  const memory = page.locator('figure.chart[data-metric="memory_used_bytes"]');
  await memory.locator('canvas').waitFor();
  await page.locator('[data-no-gpus]').waitFor();
  assert.match(await page.locator('[data-no-gpus]').innerText(), /No GPUs: this node’s agent found no NVIDIA driver/);
  assert.equal(await page.locator('figure.chart[data-metric^="gpu_"]').count(), 0);
  await waitUntil('the memory chart to be drawn', async () => (await memory.getAttribute('data-points')) === '1');
  await nextFrames(page);
  const dot = await chartPixels(memory);
  assert.ok(dot.count > 10, 'a lone sample is drawn: ' + JSON.stringify(dot));
  // A real outage stays a gap.
  await page.getByRole('link', { name: 'Show the charts of east-node-3' }).click();
  const outage = page.locator('figure.chart[data-metric="memory_used_bytes"]');
  await waitUntil('the outage chart', async () => Number(await outage.getAttribute('data-points')) > 60);
  await nextFrames(page);
  const gap = await chartPixels(outage);
  assert.ok(gap.widestGap > gap.width / 5, 'the 20-minute outage is a gap: ' + JSON.stringify(gap));

  // 9. At 800 px the node name stays in view when the nodes table scrolls sideways.
  await page.goto(base + '/#/connections/' + east.id + '/nodes');
  await page.setViewportSize({ width: 800, height: 900 });
  const nameCell = page.locator('tr[data-node="east-node-1"] > :first-child');
  await nameCell.waitFor();
  const wrap = page.locator('table.nodes').locator('xpath=..');
  assert.ok(await wrap.evaluate((e) => e.scrollWidth > e.clientWidth), 'the nodes table is wider than 800 px');
  const before = (await nameCell.boundingBox()).x;
  await wrap.evaluate((e) => { e.scrollLeft = 300; });
  await nextFrames(page);
  assert.ok(Math.abs((await nameCell.boundingBox()).x - before) < 2, 'the node name is pinned');
  await page.setViewportSize({ width: 1400, height: 900 });

  // 8. Workloads: problem pods first, counts, Warning events open.
  await page.locator('nav.tabs').getByRole('link', { name: /^Workloads/ }).click();
  const pods = page.locator('table.pods tbody tr');
  await pods.first().waitFor();
  assert.deepEqual(await pods.evaluateAll((list) => list.map((r) => r.dataset.pod + ':' + r.dataset.problem)),
                   ['ml/trainer-0:yes', 'ml/queued-job-x:yes', 'kube-system/coredns-5d78c9869d-abcde:no', 'ml/notebook-0:no']);
  assert.match(await page.locator('[data-pod-counts]').innerText(), /4 pods:\s*1 CrashLoopBackOff\s*1 Pending\s*2 Running/);
  assert.equal(await page.locator('details.events').getAttribute('open'), '');
  assert.match(await page.locator('details.events').innerText(), /Insufficient nvidia\.com\/gpu/);
  assert.match(await page.locator('ul.unavailable').innerText(), /deployment ml\/api: 1\/3 ready/);
  assert.equal(await page.locator('nav.tabs a', { hasText: 'Workloads' }).innerText(), 'Workloads 2');
  await shots('workloads');

  // 3, 7 and 10. kubectl: refusals said once and for people, wrapped; the up arrow recalls;
  // a command can stop being waited for, and one waiting for approval can be cancelled.
  await page.locator('nav.tabs').getByRole('link', { name: 'kubectl' }).click();
  const command = page.getByLabel('Command');
  const history = page.locator('.history li');
  await command.fill('kubectl get secrets -n ml');
  await page.getByRole('button', { name: 'Run' }).click();
  await history.first().locator('.status', { hasText: 'refused' }).waitFor();
  assert.equal(await history.first().locator('.status').innerText(), 'refused');
  assert.ok(!(await main.innerText()).includes('refused: refused'));
  await command.fill('kubectl get pods -n ml --selector app=trainer,tier=gpu-workers-with-a-very-long-label-value');
  await page.getByRole('button', { name: 'Run' }).click();
  await history.first().locator('.status', { hasText: 'no namespaces chosen' }).waitFor();
  const advice = await history.first().locator('pre').innerText();
  assert.match(advice, /Settings/);
  assert.ok(!/\/api\/v1|uplink connections/.test(advice), advice);
  await page.setViewportSize({ width: 800, height: 900 });
  assert.equal(await history.first().locator('pre').evaluate((e) => e.scrollWidth <= e.clientWidth + 1), true);
  await page.setViewportSize({ width: 1400, height: 900 });
  await command.fill('kubectl get nodes');
  await page.getByRole('button', { name: 'Run' }).click();
  await history.first().locator('.status', { hasText: 'exit 0' }).waitFor();
  await command.fill('');
  await command.press('ArrowUp');
  assert.equal(await command.inputValue(), 'kubectl get nodes');
  await command.press('ArrowUp');
  assert.match(await command.inputValue(), /^kubectl get pods -n ml/);
  await command.press('ArrowDown');
  assert.equal(await command.inputValue(), 'kubectl get nodes');
  // A command the agent is slow to answer: the page stops waiting on request.
  let release;
  const released = new Promise((r) => { release = r; });
  respond = async () => { await released; return { exit_code: 0, stdout: 'late\n', stderr: '', duration_ms: 9 }; };
  await command.fill('kubectl get namespaces');
  await page.getByRole('button', { name: 'Run' }).click();
  await page.getByRole('button', { name: 'Stop waiting' }).click();
  await history.first().locator('.status', { hasText: 'stopped waiting' }).waitFor();
  release();
  // One waiting for approval, cancelled by whoever asked.
  await expectStatus(api('POST', '/api/v1/connections/' + east.id + '/approval-rules', { verb: 'version' }), 201);
  await command.fill('kubectl version');
  await page.getByRole('button', { name: 'Run' }).click();
  await history.first().locator('.status', { hasText: 'waiting for approval' }).waitFor();
  assert.ok(!(await history.first().innerText()).includes('uplink approvals'));
  const waitingId = await history.first().getAttribute('data-command');
  await page.locator(`section[aria-labelledby="approvals-title"] li.approval[data-command="${waitingId}"]`).waitFor();
  // Stopping the wait ran nothing again.
  assert.equal(await history.filter({ hasText: 'kubectl get namespaces' }).count(), 1);
  await shots('kubectl');
  await history.first().getByRole('button', { name: 'Cancel' }).click();
  await history.first().locator('.status', { hasText: 'cancelled' }).waitFor();
  const cancelled = await expectStatus(api('GET', '/api/v1/connections/' + east.id + '/commands/' + waitingId), 200);
  assert.equal(cancelled.status, 'rejected');

  // 6. The audit log: who did what to what; filters; a command that timed out is not "ok".
  respond = async () => ({ error: { code: 'timeout', message: 'kubectl ran past 30 s and was killed' }, duration_ms: 30000 });
  const timedOut = await call(base, 'POST', '/api/v1/connections/' + east.id + '/kubectl', apiKey,
                              { argv: ['kubectl', 'get', 'nodes', '-o', 'wide'] });
  assert.equal(timedOut.status, 502);
  await page.getByRole('link', { name: 'Audit log' }).click();
  const events = page.locator('table.audit tbody');
  await events.first().waitFor();
  const created = page.locator('table.audit tbody[data-action="connection.create"]').first();
  assert.match(await created.locator('td.actor').innerText(), new RegExp(adminEmail.replace('.', '\\.')));
  assert.match(await created.locator('td.target').innerText(), /connection gpu-\w+/);
  assert.equal(await page.title(), 'Audit log · uplink');
  await page.locator('select[name="audit-action"]').selectOption('kubectl.run');
  await waitUntil('only kubectl.run', async () =>
    (await events.evaluateAll((list) => list.every((e) => e.dataset.action === 'kubectl.run'))) && (await events.count()) > 2);
  const failed = events.filter({ hasText: 'kubectl get nodes -o wide' });
  assert.equal(await failed.locator('[data-outcome]').getAttribute('data-outcome'), 'failed');
  assert.equal(await failed.locator('[data-outcome]').innerText(), 'timed out: kubectl ran past 30 s');
  await page.locator('select[name="audit-action"]').selectOption('');
  await page.locator('select[name="audit-connection"]').selectOption({ label: 'gpu-west' });
  await waitUntil('only gpu-west', async () =>
    (await events.count()) > 0 &&
    (await page.locator('td.target').allInnerTexts()).every((t) => t.includes('gpu-west')));
  await page.locator('select[name="audit-connection"]').selectOption('');
  await page.locator('select[name="audit-action"]').selectOption('kubectl.run');
  // 9. At 800 px the details wrap between words, and the table fits.
  await page.setViewportSize({ width: 800, height: 900 });
  await nextFrames(page);
  const detail = page.locator('table.audit dl.detail dd').first();
  assert.equal(await detail.evaluate((e) => getComputedStyle(e).wordBreak), 'normal');
  assert.equal(await page.locator('table.audit').locator('xpath=..').evaluate((e) => e.scrollWidth <= e.clientWidth + 1), true);
  await page.setViewportSize({ width: 1400, height: 900 });
  await shots('audit');

  // 9. The agent tokens' actions are in view at 800 px.
  await page.getByRole('link', { name: 'Agent tokens' }).click();
  await page.locator('table.tokens tbody tr').first().waitFor();
  await page.setViewportSize({ width: 800, height: 900 });
  await nextFrames(page);
  for (const button of await page.locator('table.tokens td.actions button').all()) {
    const box = await button.boundingBox();
    assert.ok(box.x >= 0 && box.x + box.width <= 800, 'a token action is cut off: ' + JSON.stringify(box));
  }
  await page.setViewportSize({ width: 1400, height: 900 });
  await shots('tokens');

  // 10. A real modal for the password: the focus is in it, Escape closes it, nothing changes.
  await page.goto(base + '/#/connections/' + east.id + '/settings');
  await page.getByRole('heading', { name: 'Namespace scope' }).waitFor();
  assert.equal(await page.getByRole('button', { name: 'Revoke token' }).count(), 1);
  await shots('settings');
  await page.getByRole('button', { name: 'Rotate token' }).click();
  const dialog = page.getByRole('dialog', { name: 'Confirm your password' });
  await dialog.waitFor();
  assert.equal(await page.evaluate(() => document.activeElement.name), 'confirm-password');
  assert.equal(await page.evaluate(() => document.querySelector('dialog.modal').matches(':modal')), true);
  await page.keyboard.press('Escape');
  await dialog.waitFor({ state: 'detached' });
  await expectStatus(call(base, 'GET', '/api/v1/agent/whoami', east.token), 200);

  // 10. Users: "(you)" on your own row, and no Deactivate there.
  await page.getByRole('link', { name: 'Users' }).click();
  const mine = page.locator(`tr[data-user="${adminEmail}"]`);
  await mine.waitFor();
  assert.match(await mine.innerText(), /\(you\)/);
  assert.equal(await mine.getByRole('button', { name: 'Deactivate' }).count(), 0);
  assert.equal(await page.locator('tr[data-user="member@example.com"]').getByRole('button', { name: 'Deactivate' }).count(), 1);
  await shots('users');

  // 7. A connection that does not exist, after one that does: nothing of the last one stays.
  await page.goto(base + '/#/connections/' + east.id);
  await page.locator('[data-health-card]').waitFor();
  await page.evaluate(() => { location.hash = '#/connections/0123456789abcdef'; });
  await page.getByRole('heading', { name: 'Connection not found' }).waitFor();
  assert.ok(!(await main.innerText()).includes('gpu-east'));
  assert.equal(await page.title(), 'Connection not found · uplink');
  // The console's advice for API and CLI users is not what the page says.
  await page.evaluate(() => { location.hash = '#/connections/0123456789abcdef/runs'; });
  await page.getByRole('alert').filter({ hasText: 'Not found' }).waitFor();
  assert.ok(!(await main.innerText()).includes('/api/v1'), await main.innerText());
  // An address that names nothing.
  await page.evaluate(() => { location.hash = '#/nowhere/at/all'; });
  await page.getByRole('heading', { name: 'Page not found' }).waitFor();
  assert.equal(await page.title(), 'Page not found · uplink');
  await shots('not-found');

  // 7. A session that expired says so.
  playing = false;
  await clusterRole;
  await consoleUp.stop();
  execFileSync('sqlite3', [join(dataDir, 'console.db'),
    `UPDATE sessions SET expires_at = ${Math.floor(Date.now() / 1000) - 60} WHERE revoked_at IS NULL;`]);
  await consoleUp.restart();
  await page.evaluate(() => { location.hash = '#/connections'; });
  await page.locator('[data-session-ended]').waitFor();
  assert.match(await page.locator('[data-session-ended]').innerText(), /Your session expired/);
  assert.deepEqual(page.errors, []);
}

await runTest(main, { processes, browser: () => browser, dir, reportBytes: 4000 });
