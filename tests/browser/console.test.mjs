// The web console in headless Chromium (Debian's, driven by playwright-core; nothing is
// downloaded), against a real uplink-console started here on loopback with data made through
// its API: sign-in, connection badges, the token shown once with what to install and its
// install commands,
// rotate and revoke, the CSP refusing an injected inline script, the kubectl console's
// refusal reason, and cluster output with markup shown as text. Screenshots of each page go
// to --screenshots for review.
//
//   node console.test.mjs --console BUILD/bin/uplink-console [--chromium /usr/bin/chromium]
//                         [--screenshots DIR]
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import assert from 'node:assert/strict';
import {
  Processes, adminEmail as email, adminPassword as password, call, chartPixels, expectStatus, launchChromium,
  lowContrastText, newPage, runTest, startConsole, testOptions,
} from './support.mjs';

const options = testOptions(['console']);
const screenshots = options.screenshots;
const markup = '<script>window.__xss = 1</script><b>bold</b><img src=x onerror="window.__xss=2">';

const dataDir = mkdtempSync(join(tmpdir(), 'uplink-browser-'));
const processes = new Processes();
let browser = null;

function nodeJson(i) {
  return {
    name: 'gpu-node-' + i, uid: 'uid-' + i, ready: true, unschedulable: i === 1,
    gpu_resource: 'nvidia.com/gpu', gpu_capacity: 8, gpu_allocatable: 8,
    gpu_product: 'NVIDIA-H100-80GB-HBM3',
    resources: { 'nvidia.com/gpu': { capacity: 8, allocatable: 8 } }, taints: [],
  };
}

async function main() {
  const { apiKey, base } = await startConsole(processes, options.console, dataDir);

  // Data through the API: a connection that reported, one that never did, a namespace scope
  // and a cluster snapshot with markup in its output.
  const east = await expectStatus(call(base, 'POST', '/api/v1/connections', apiKey,
                                       { agent_name: 'inventory', cluster_name: 'gpu-east' }), 201);
  await expectStatus(call(base, 'POST', '/api/v1/connections', apiKey,
                          { agent_name: 'inventory', cluster_name: 'pending-west' }), 201);
  await expectStatus(call(base, 'POST', '/api/v1/agent/inventory', east.token, {
    agent_version: '0.1.0', cluster_uid: 'kube-system-uid-east', selector: 'nvidia.com/gpu.present=true',
    collected_at: new Date().toISOString().replace(/\.\d+Z$/, 'Z'), nodes: [nodeJson(0), nodeJson(1)],
  }), 200);
  await expectStatus(call(base, 'PUT', '/api/v1/connections/' + east.id + '/namespaces', apiKey,
                          { namespaces: ['default', 'ml'] }), 200);
  const now = new Date().toISOString().replace(/\.\d+Z$/, 'Z');
  await expectStatus(call(base, 'POST', '/api/v1/agent/uploads', east.token, {
    agent_version: '0.1.0', agent_instance: 'cluster-0', stream: 'cluster/cluster-0',
    spool_id: '0123456789abcdef0123456789abcdef', first_sequence: 1, last_sequence: 1,
    losses: { dropped: { records: 0, bytes: 0 }, corrupt: { records: 0, bytes: 0 },
              rejected: { records: 0, bytes: 0 } },
    records: [{ sequence: 1, appended_at: now, payload: {
      kind: 'cluster_snapshot', collected_at: now,
      results: [{ name: 'pods/ml', argv: ['kubectl', 'get', 'pods', '-n', 'ml'], exit_code: 0,
                  stdout: 'NAME   READY\n' + markup + '   1/1\n', stderr: '', duration_ms: 12 }],
    } }],
  }, { 'Content-Encoding': 'gzip' }), 200);

  // Twenty node samples, 30 s apart, ending now: CPU, memory and two GPUs to chart.
  const sampleTimes = Array.from({ length: 20 }, (_, i) => Date.now() - (19 - i) * 30000);
  await expectStatus(call(base, 'POST', '/api/v1/agent/uploads', east.token, {
    agent_version: '0.1.0', agent_instance: 'node-0', stream: 'node/gpu-node-0',
    spool_id: 'fedcba9876543210fedcba9876543210', first_sequence: 1, last_sequence: 20,
    losses: { dropped: { records: 0, bytes: 0 }, corrupt: { records: 0, bytes: 0 },
              rejected: { records: 0, bytes: 0 } },
    records: sampleTimes.map((at, i) => ({ sequence: i + 1, appended_at: new Date(at).toISOString(), payload: {
      kind: 'node_sample', version: 1, node: 'gpu-node-0', collected_at: new Date(at).toISOString(),
      boot_time: 1799000000,
      cpu: { count: 64, seconds: { user: 1000 + i * 600, nice: 0, system: 0, idle: 5000 + i * 1320,
                                   iowait: 0, irq: 0, softirq: 0, steal: 0 } },
      memory: { total_bytes: 540000000000, available_bytes: 300000000000 + i * 1000000000 },
      load: { load1: 3.5, load5: 3, load15: 2.5 },
      network: [{ device: 'eth0', receive_bytes: i * 30000000, transmit_bytes: i * 1000000 }],
      disks: [{ device: 'nvme0n1', read_bytes: i * 6000000, written_bytes: i * 9000000 }],
      gpu_source: 'nvml',
      gpus: [0, 1].map((g) => ({ index: g, uuid: 'GPU-' + g, name: 'NVIDIA H100 80GB HBM3',
                                 utilization_percent: (i * 5 + g * 40) % 100,
                                 memory_used_bytes: 61203283968, memory_total_bytes: 85520809984,
                                 temperature_celsius: 60 + g, power_watts: 500 + i })),
    } })),
  }, { 'Content-Encoding': 'gzip' }), 200);

  // The cluster role has asked for commands: kubectl can run from the page.
  await expectStatus(call(base, 'POST', '/api/v1/agent/commands/poll', east.token,
                          { agent_instance: 'cluster-0', wait_seconds: 0 }), 200);

  browser = await launchChromium(options.chromium);
  const page = await newPage(browser, { viewport: { width: 1280, height: 800 } });
  const context = page.context();
  const pageErrors = page.errors;
  const shot = (name) => page.screenshot({ path: join(screenshots, name + '.png'), fullPage: true });

  // Sign in.
  await page.goto(base + '/');
  await page.getByLabel('Email').fill(email);
  await page.getByLabel('Password', { exact: true }).fill('not the password at all');
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByRole('alert').waitFor();
  await shot('sign-in-refused');
  assert.deepEqual(await lowContrastText(page), [], 'sign-in-refused');
  // The check itself finds faint text: #aaaaaa on white is 2.32:1.
  await page.evaluate(() => {
    const faint = document.createElement('p');
    faint.id = 'faint';
    faint.textContent = 'faint text';
    faint.style.color = '#aaaaaa';
    document.body.appendChild(faint);
  });
  assert.deepEqual(await lowContrastText(page), ['faint text: 2.32']);
  await page.evaluate(() => document.getElementById('faint').remove());
  await page.getByLabel('Password', { exact: true }).fill(password);
  await page.getByRole('button', { name: 'Sign in' }).click();

  // Connections: badges with colour class and text; the never-reported one waits.
  const eastRow = page.locator('tr[data-connection="gpu-east"]');
  await eastRow.waitFor();
  assert.equal(await eastRow.locator('.badge[data-status]').getAttribute('data-status'), 'connected');
  assert.equal((await eastRow.locator('.badge[data-status]').innerText()).trim(), 'connected');
  assert.match(await eastRow.innerText(), /\d+ s ago/);
  assert.match(await eastRow.innerText(), /16 \/ 16|8 \/ 16/);
  const westRow = page.locator('tr[data-connection="pending-west"]');
  assert.equal((await westRow.locator('.badge[data-status]').innerText()).trim(), 'Waiting for agent');
  await shot('connections');
  assert.deepEqual(await lowContrastText(page), [], 'connections');

  // The session lives in an HttpOnly cookie only: no script sees it, nothing is stored.
  const storage = await page.evaluate(() => ({
    cookie: document.cookie, local: localStorage.length, session: sessionStorage.length,
  }));
  assert.equal(storage.cookie.includes('uplink_session'), false);
  assert.equal(storage.local, 0);
  assert.equal(storage.session, 0);

  // The CSP refuses an inline script injected into the page, and an inline handler.
  const csp = await page.evaluate(() => new Promise((resolve) => {
    const violations = [];
    document.addEventListener('securitypolicyviolation', (e) => violations.push(e.violatedDirective));
    const script = document.createElement('script');
    script.textContent = 'window.__injected = 1';
    document.body.appendChild(script);
    const div = document.createElement('div');
    div.innerHTML = '<img src="data:," onload="window.__injected = 2">';
    document.body.appendChild(div);
    setTimeout(() => {
      script.remove();
      div.remove();
      resolve({ injected: window.__injected, violations });
    }, 500);
  }));
  assert.equal(csp.injected, undefined);
  assert.ok(csp.violations.some((d) => d.startsWith('script-src')), JSON.stringify(csp));

  // The east token reporting from another cluster is refused and shows on the connection's
  // page as a security event.
  await expectStatus(call(base, 'POST', '/api/v1/agent/inventory', east.token, {
    agent_version: '0.1.0', cluster_uid: 'kube-system-uid-elsewhere', selector: 'nvidia.com/gpu.present=true',
    collected_at: new Date().toISOString().replace(/\.\d+Z$/, 'Z'), nodes: [nodeJson(0)],
  }), 409);

  // The GPU node selector install commands were generated with, kept with the connection.
  await expectStatus(call(base, 'POST', '/api/v1/connections/' + east.id + '/install', apiKey, {
    console_url: 'https://console.example.com', selector: 'nvidia.com/gpu.present=true,pool=a',
  }), 200);

  // A connection's page: its overview, its nodes, and the cluster view's markup as text.
  await eastRow.getByRole('link', { name: 'gpu-east' }).click();
  await page.getByRole('heading', { name: 'Agents' }).waitFor();
  // The selector asked for beside the one the agent reports, and that they differ.
  const selectorFact = await page.locator('dl.facts [data-selector]').innerText();
  assert.ok(selectorFact.includes('install: nvidia.com/gpu.present=true,pool=a'), selectorFact);
  assert.ok(selectorFact.includes('agent reports: nvidia.com/gpu.present=true'), selectorFact);
  assert.ok(selectorFact.includes('they differ'), selectorFact);
  const mismatch = page.locator('table.security-events tbody tr');
  assert.equal(await mismatch.count(), 1);
  assert.match(await mismatch.innerText(), /cluster_mismatch/);
  assert.match(await mismatch.innerText(), /127\.0\.0\.1/);
  await page.locator('nav.tabs').getByRole('link', { name: /^Nodes/ }).click();
  await page.locator('table.nodes tbody tr').first().waitFor();
  assert.equal(await page.locator('table.nodes tbody tr').count(), 2);
  await page.getByLabel('Filter nodes').fill('node-1');
  assert.equal(await page.locator('table.nodes tbody tr').count(), 1);
  await page.getByLabel('Filter nodes').fill('');

  // A node's charts: drawn from the series API, with the series' own colour on the canvas.
  await page.getByRole('link', { name: 'Show the charts of gpu-node-0' }).click();
  // Memory total beside memory used: 540000000000 bytes is 502.9 GiB.
  const nodeRow = page.locator('table.nodes tbody tr', { hasText: 'gpu-node-0' });
  const headers = await page.locator('table.nodes thead th').allInnerTexts();
  const totalColumn = headers.map((t) => t.trim()).indexOf('Memory total');
  assert.equal(totalColumn, headers.map((t) => t.trim()).indexOf('Memory used') + 1, JSON.stringify(headers));
  assert.equal((await nodeRow.locator(':scope > *').nth(totalColumn).innerText()).trim(), '502.9 GiB');
  for (const metric of ['cpu_percent', 'memory_used_bytes', 'gpu_utilization_percent',
                        'network_receive_bytes_per_second', 'network_transmit_bytes_per_second',
                        'disk_read_bytes_per_second', 'disk_written_bytes_per_second']) {
    const chart = page.locator('figure.chart[data-metric="' + metric + '"]');
    await chart.locator('canvas').waitFor();
    assert.equal((await chart.locator('figcaption').innerText()).includes('no data'), false, metric);
    // The first series' stroke, #2563eb.
    const seriesPixels = (await chartPixels(chart)).count;
    assert.ok(seriesPixels > 20, metric + ': ' + seriesPixels + ' pixels of the series colour');
  }
  await page.getByLabel('Range').selectOption('6h');
  await page.locator('figure.chart[data-metric="cpu_percent"] canvas').waitFor();
  await shot('node-charts');
  assert.deepEqual(await lowContrastText(page), [], 'node-charts');
  await page.locator('nav.tabs').getByRole('link', { name: /^Workloads/ }).click();
  await page.locator('details.raw > summary').click();
  const output = page.locator('details.result pre.output').first();
  await output.waitFor();
  assert.ok((await output.textContent()).includes(markup));
  assert.equal(await page.locator('details.result pre.output script, details.result pre.output b').count(), 0);

  // The kubectl console: a refusal shows its reason; an allowed command's output with markup
  // shows as text. A poll made here plays the cluster role's agent.
  await page.locator('nav.tabs').getByRole('link', { name: 'kubectl' }).click();
  await page.getByLabel('Command').fill('kubectl get secrets -n ml');
  await page.getByRole('button', { name: 'Run' }).click();
  const refused = page.locator('.history li').first();
  await refused.locator('.status').filter({ hasText: 'refused' }).waitFor();
  const refusedText = await refused.innerText();
  assert.match(refusedText, /read-only/);
  assert.match(refusedText, /secret/i);
  const agent = (async () => {
    const poll = await expectStatus(call(base, 'POST', '/api/v1/agent/commands/poll', east.token,
                                         { agent_instance: 'cluster-0', wait_seconds: 30 }), 200);
    assert.equal(poll.commands.length, 1);
    assert.deepEqual(poll.commands[0].argv, ['kubectl', 'get', 'pods', '-n', 'ml']);
    await expectStatus(call(base, 'POST', '/api/v1/agent/commands/' + poll.commands[0].id + '/result',
                            east.token, { exit_code: 0, stdout: 'NAME\n' + markup + '\n', stderr: '',
                                          duration_ms: 5 }, { 'Content-Encoding': 'gzip' }), 200);
  })();
  await new Promise((r) => setTimeout(r, 300));
  await page.getByLabel('Command').fill('kubectl get pods -n ml');
  await page.getByRole('button', { name: 'Run' }).click();
  await agent;
  const ran = page.locator('.history li').first();
  await ran.locator('.status').filter({ hasText: 'exit 0' }).waitFor();
  assert.ok((await ran.locator('pre.output').textContent()).includes(markup));
  assert.equal(await page.evaluate(() => window.__xss), undefined);
  await shot('connection');
  assert.deepEqual(await lowContrastText(page), [], 'connection');

  // Tokens: create (the password is confirmed first), shown once with its commands.
  await page.getByRole('link', { name: 'Agent tokens' }).click();
  await page.getByLabel('Cluster name').fill('new-cluster');
  await page.getByRole('button', { name: 'Create token' }).click();
  await page.getByLabel('Password', { exact: true }).fill(password);
  await page.getByRole('button', { name: 'Confirm' }).click();
  const tokenBlock = page.locator('pre[data-token]');
  await tokenBlock.waitFor();
  const token = (await tokenBlock.textContent()).trim();
  assert.match(token, /^agt_[A-Za-z0-9_-]{43}$/);
  // What to install: every workload by default, from this console's chart repository, with
  // the commands following each choice (the console renders them: POST .../install).
  const commandsShown = async (check) => {
    let text = '';
    for (let i = 0; i < 100; i += 1) {
      if (await page.locator('pre.commands').count() === 1) {
        text = await page.locator('pre.commands').textContent();
        if (check(text)) return text;
      }
      await page.waitForTimeout(100);
    }
    throw new Error('the commands never became what was expected:\n' + text);
  };
  const commands = await commandsShown((c) => c.includes('helm upgrade'));
  for (const line of [
    'kubectl create namespace uplink --dry-run=client -o yaml | kubectl apply -f -',
    'kubectl label namespace uplink pod-security.kubernetes.io/enforce=privileged --overwrite',
    "printf '%s' \"$UPLINK_AGENT_TOKEN\" | kubectl -n uplink create secret generic " +
      'uplink-agent-token --from-file=UPLINK_AGENT_TOKEN=/dev/stdin',
    'helm repo add --force-update uplink ' + base + '/charts',
    '--set-string config.baseUrl=' + base + ' \\',
    '--set-string token.existingSecret=uplink-agent-token \\',
    '--set-string nodes.selector=nvidia.com/gpu.present=true \\',
    '--set kubernetes.enabled=true \\',
    '--set-string kubernetes.node.gpu.runtimeClassName=nvidia',
  ]) {
    assert.ok(commands.includes(line), line + '\n' + commands);
  }
  assert.match(commands, /helm upgrade --install uplink-agent uplink\/uplink-agent --version \d+\.\d+\.\d+ --namespace uplink/);
  assert.ok(!commands.includes(token));
  // The console is on loopback: no pod could reach it, and the card says so.
  const unreachable = page.locator('[data-warning="console_unreachable"]');
  await unreachable.waitFor();
  assert.ok((await unreachable.textContent()).includes('127.0.0.1 is a loopback address'));
  await shot('token-created');
  assert.deepEqual(await lowContrastText(page), [], 'token-created');
  await page.setViewportSize({ width: 800, height: 800 });
  await shot('token-created-800');
  assert.deepEqual(await lowContrastText(page), [], 'token-created-800');
  await page.setViewportSize({ width: 1280, height: 800 });
  // The inventory alone: restricted, no kubernetes values, no runtime class to ask.
  await page.getByLabel('Inventory only').check();
  await commandsShown((c) => c.includes('enforce=restricted') && !c.includes('kubernetes.enabled'));
  assert.equal(await page.getByLabel('GPU runtime class').count(), 0);
  // A selector the console cannot parse is refused, saying why; a good one is escaped for helm.
  await page.getByLabel('GPU node selector').fill('gpu in (h100');
  await page.getByRole('alert').filter({ hasText: 'selector: not a label selector' }).waitFor();
  assert.equal(await page.locator('pre.commands').count(), 0);
  await page.getByLabel('GPU node selector').fill('gpu in (h100, a100)');
  await commandsShown((c) => c.includes("--set-string 'nodes.selector=gpu in (a100\\,h100)'"));
  // The console as the cluster reaches it: no unreachable warning.
  await page.getByLabel('Console address, as the cluster reaches it').fill('https://console.example.com');
  const edited0 = await commandsShown((c) => c.includes('helm repo add --force-update uplink https://console.example.com/charts'));
  assert.equal(await page.locator('[data-warning="console_unreachable"]').count(), 0, edited0);
  // This console was not told its image digests: the card says the image is not pinned.
  assert.equal(await page.locator('[data-warning="image_not_pinned"]').count(), 1);
  // The namespace and Secret name are editable too, and Copy copies exactly what is shown. A
  // name Kubernetes would refuse hides the commands.
  await page.getByLabel('Namespace', { exact: true }).fill('gpu-agents');
  await page.getByLabel('Secret name').fill('east.agent-token');
  const edited = await commandsShown((c) => c.includes('--namespace gpu-agents') &&
                                            c.includes('token.existingSecret=east.agent-token'));
  assert.ok(edited.includes("printf '%s' \"$UPLINK_AGENT_TOKEN\" | kubectl -n gpu-agents create secret generic " +
                            'east.agent-token --from-file=UPLINK_AGENT_TOKEN=/dev/stdin'), edited);
  assert.ok(edited.includes('kubectl create namespace gpu-agents --dry-run=client -o yaml | kubectl apply -f -'), edited);
  assert.ok(!edited.includes(' uplink-agent-token') && !edited.includes('-n uplink '), edited);
  await context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: base });
  await page.getByRole('button', { name: 'Copy commands' }).click();
  await page.getByText('Commands copied.').waitFor();
  assert.equal(await page.evaluate(() => navigator.clipboard.readText()), edited);
  await page.getByLabel('Namespace', { exact: true }).fill('Bad Namespace');
  await page.getByRole('alert').filter({ hasText: 'namespace must be' }).waitFor();
  assert.equal(await page.locator('pre.commands').count(), 0);
  await page.getByLabel('Namespace', { exact: true }).fill('gpu-agents');
  await commandsShown((c) => c === edited);
  // Copying kept the choice with the connection: its page shows it beside the agent's.
  const created = (await expectStatus(call(base, 'GET', '/api/v1/connections', apiKey), 200))
    .connections.find((c) => c.cluster_name === 'new-cluster');
  assert.deepEqual(created.install.workloads, ['inventory']);
  assert.equal(created.install.selector, 'gpu in (a100,h100)');
  await page.getByRole('button', { name: 'I stored the token' }).click();
  await page.locator('pre[data-token]').waitFor({ state: 'detached' });
  await page.locator('tr[data-connection="new-cluster"]').waitFor();
  assert.equal((await page.content()).includes(token), false);
  // The token works for its agent; a reload does not show it again and keeps the session.
  await expectStatus(call(base, 'GET', '/api/v1/agent/whoami', token), 200);
  await page.reload();
  await page.locator('tr[data-connection="new-cluster"]').waitFor();
  assert.equal((await page.content()).includes(token), false);
  await shot('tokens');
  assert.deepEqual(await lowContrastText(page), [], 'tokens');

  // Rotate (confirmed in the dialog): a new token, the old one refused at once; then revoke.
  const newRow = page.locator('tr[data-connection="new-cluster"]');
  await newRow.getByRole('button', { name: 'Rotate' }).click();
  const rotatedBlock = page.locator('pre[data-token]');
  await rotatedBlock.waitFor();
  const rotated = (await rotatedBlock.textContent()).trim();
  assert.notEqual(rotated, token);
  await expectStatus(call(base, 'GET', '/api/v1/agent/whoami', token), 401);
  await expectStatus(call(base, 'GET', '/api/v1/agent/whoami', rotated), 200);
  await page.getByRole('button', { name: 'I stored the token' }).click();
  await newRow.getByRole('button', { name: 'Revoke' }).click();
  await newRow.locator('.badge[data-status="revoked"]').waitFor();
  await expectStatus(call(base, 'GET', '/api/v1/agent/whoami', rotated), 401);

  // Audit log and users (admin).
  await page.getByRole('link', { name: 'Audit log' }).click();
  await page.locator('table.audit code', { hasText: 'connection.revoke' }).first().waitFor();
  await shot('audit');
  assert.deepEqual(await lowContrastText(page), [], 'audit');
  await page.getByRole('link', { name: 'Users' }).click();
  await page.locator('table.users td', { hasText: email }).waitFor();
  // Create a member with a password (who can then sign in) and an admin without one; a taken
  // email is refused with the API's reason.
  const memberEmail = 'member@example.com';
  const memberPassword = 'another long passphrase';
  await page.getByLabel('Email').fill(memberEmail);
  await page.getByLabel('Role').selectOption('member');
  await page.getByLabel(/^Password \(optional/).fill(memberPassword);
  await page.getByRole('button', { name: 'Create user' }).click();
  await page.getByRole('status').filter({ hasText: 'Created ' + memberEmail + ' (member)' }).waitFor();
  await page.locator('tr[data-user="' + memberEmail + '"]', { hasText: 'member' }).waitFor();
  assert.equal(await page.getByLabel(/^Password \(optional/).inputValue(), '');
  await expectStatus(call(base, 'POST', '/api/v1/sessions', null, { email: memberEmail, password: memberPassword }), 201);
  await page.getByLabel('Email').fill('second-admin@example.com');
  await page.getByLabel('Role').selectOption('admin');
  await page.getByRole('button', { name: 'Create user' }).click();
  await page.locator('tr[data-user="second-admin@example.com"]', { hasText: 'admin' }).waitFor();
  const users = await expectStatus(call(base, 'GET', '/api/v1/users', apiKey), 200);
  const secondAdmin = users.users.find((u) => u.email === 'second-admin@example.com');
  assert.equal(secondAdmin.role, 'admin');
  assert.equal(secondAdmin.has_password, false);
  await page.getByLabel('Email').fill(memberEmail);
  await page.getByRole('button', { name: 'Create user' }).click();
  await page.locator('form.create .error').filter({ hasText: 'already exists' }).waitFor();
  await shot('users');
  assert.deepEqual(await lowContrastText(page), [], 'users');

  // API keys: create (shown once, and it works), then revoke (refused at once).
  await page.getByRole('link', { name: 'API keys' }).click();
  await page.locator('table.api-keys').waitFor();
  await page.getByLabel('Key name').fill('ci-deploy');
  await page.getByRole('button', { name: 'Create key' }).click();
  const keyBlock = page.locator('pre[data-api-key]');
  await keyBlock.waitFor();
  const newKey = (await keyBlock.textContent()).trim();
  assert.match(newKey, /^uk_/);
  await expectStatus(call(base, 'GET', '/api/v1/me', newKey), 200);
  await shot('api-key-created');
  assert.deepEqual(await lowContrastText(page), [], 'api-key-created');
  await page.getByRole('button', { name: 'I stored the key' }).click();
  const keyRow = page.locator('tr[data-key="ci-deploy"]');
  await keyRow.locator('td.key-status', { hasText: 'active' }).waitFor();
  assert.equal((await page.content()).includes(newKey), false);
  assert.ok((await keyRow.innerText()).includes(newKey.slice(0, 8)));
  await keyRow.getByRole('button', { name: 'Revoke' }).click();
  await keyRow.locator('td.key-status', { hasText: 'revoked' }).waitFor();
  await expectStatus(call(base, 'GET', '/api/v1/me', newKey), 401);
  await shot('api-keys');
  assert.deepEqual(await lowContrastText(page), [], 'api-keys');

  // A narrow window still shows the connections, and the keyboard reaches the navigation.
  await page.setViewportSize({ width: 390, height: 800 });
  await page.getByRole('link', { name: 'Connections' }).click();
  await page.locator('tr[data-connection="gpu-east"]').waitFor();
  await shot('connections-narrow');
  await page.reload();
  await page.locator('tr[data-connection="gpu-east"]').waitFor();
  await page.keyboard.press('Tab');
  await page.keyboard.press('Tab');
  assert.equal(await page.evaluate(() => document.activeElement.textContent), 'Connections');

  // Sign out: back to the sign-in form, and the cookie no longer works.
  await page.getByRole('button', { name: 'Sign out' }).click();
  await page.getByRole('button', { name: 'Sign in' }).waitFor();
  const after = await page.evaluate(async () => (await fetch('/api/v1/connections')).status);
  assert.equal(after, 401);

  // A session that ends behind the page's back (here: its cookie is gone) brings back the
  // sign-in form at the next refresh.
  await page.getByLabel('Email').fill(email);
  await page.getByLabel('Password', { exact: true }).fill(password);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.locator('tr[data-connection="gpu-east"]').waitFor();
  await context.clearCookies();
  await page.getByRole('button', { name: 'Sign in' }).waitFor();
  assert.deepEqual(pageErrors, []);
  console.log('browser tests passed; screenshots in ' + screenshots);
}

await runTest(main, { processes, browser: () => browser, dir: dataDir, reportBytes: 4000 });
