// SSH on the reservation page in headless Chromium against a real uplink-console: readiness in
// words while the controller's tunnel is missing, then ready (the pinned host key's
// fingerprint and `uplink ssh setup`), and the transfer meter as bytes move through the relay,
// amber near the budget and red at it. The workspace controller's tunnel and data channels,
// and the user's channel, are WebSockets made here (protocol/ssh.h). Screenshots at 1400 and
// 800 px wide go to --screenshots.
//
//   node ssh.test.mjs --console BUILD/bin/uplink-console [--chromium PATH] [--screenshots DIR]
import { mkdtempSync } from 'node:fs';
import { connect } from 'node:net';
import { randomBytes } from 'node:crypto';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import assert from 'node:assert/strict';
import {
  Processes, call, expectStatus, launchChromium, newPage, runTest, screenshots, signIn,
  startConsole, testOptions, waitUntil,
} from './support.mjs';

const options = testOptions(['console']);
const dataDir = mkdtempSync(join(tmpdir(), 'uplink-browser-ssh-'));
const processes = new Processes();
const image = 'registry.example/uplink/workspace@sha256:' + 'd'.repeat(64);
const clusterUid = 'browser-ssh-kube-system-uid';
const hostKey = 'ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIEhw0aQDLMFehMBBfgSUSM0uXPEuj3+c6Nnd9l2ljxsQ';
const userKey = 'ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIMascVxUVP54HTTwBeRUuw6YII+uxsRHqGNpzd34QZne user@laptop';
const budget = 1024 * 1024;
let browser = null;

// A WebSocket client with request headers (which the WHATWG one cannot send): the handshake,
// masked frames out, whole unfragmented frames in (the console sends each message as one).
function webSocket(base, path, headers, protocol, onMessage) {
  const url = new URL(base);
  return new Promise((resolve, reject) => {
    const socket = connect(Number(url.port), url.hostname);
    let buffer = Buffer.alloc(0);
    let open = false;
    const send = (data, opcode) => {
      const payload = Buffer.from(data);
      const mask = randomBytes(4);
      let header;
      if (payload.length < 126) {
        header = Buffer.from([0x80 | opcode, 0x80 | payload.length]);
      } else if (payload.length < 65536) {
        header = Buffer.from([0x80 | opcode, 0x80 | 126, 0, 0]);
        header.writeUInt16BE(payload.length, 2);
      } else {
        header = Buffer.alloc(10);
        header[0] = 0x80 | opcode;
        header[1] = 0x80 | 127;
        header.writeBigUInt64BE(BigInt(payload.length), 2);
      }
      for (let i = 0; i < payload.length; i += 1) payload[i] ^= mask[i % 4];
      socket.write(Buffer.concat([header, mask, payload]));
    };
    const ws = { send: (data, binary) => send(data, binary ? 2 : 1), closed: null, close: () => socket.destroy() };
    socket.on('connect', () => {
      socket.write([`GET ${path} HTTP/1.1`, `Host: ${url.host}`, 'Upgrade: websocket', 'Connection: Upgrade',
                    `Sec-WebSocket-Key: ${randomBytes(16).toString('base64')}`, 'Sec-WebSocket-Version: 13',
                    `Sec-WebSocket-Protocol: ${protocol}`,
                    ...Object.entries(headers).map(([k, v]) => `${k}: ${v}`)].join('\r\n') + '\r\n\r\n');
    });
    socket.on('error', (e) => (open ? null : reject(e)));
    socket.on('data', (chunk) => {
      buffer = Buffer.concat([buffer, chunk]);
      if (!open) {
        const end = buffer.indexOf('\r\n\r\n');
        if (end < 0) return;
        const head = buffer.subarray(0, end).toString();
        buffer = buffer.subarray(end + 4);
        if (!head.startsWith('HTTP/1.1 101')) {
          socket.destroy();
          reject(new Error(path + ': ' + head.split('\r\n')[0]));
          return;
        }
        open = true;
        resolve(ws);
      }
      for (;;) {
        if (buffer.length < 2) return;
        const opcode = buffer[0] & 0x0f;
        let length = buffer[1] & 0x7f;
        let at = 2;
        if (length === 126) {
          if (buffer.length < 4) return;
          length = buffer.readUInt16BE(2);
          at = 4;
        } else if (length === 127) {
          if (buffer.length < 10) return;
          length = Number(buffer.readBigUInt64BE(2));
          at = 10;
        }
        if (buffer.length < at + length) return;
        const payload = buffer.subarray(at, at + length);
        buffer = buffer.subarray(at + length);
        if (opcode === 0x9) send(payload, 0xA);
        else if (opcode === 0x8) {
          ws.closed = { code: payload.length >= 2 ? payload.readUInt16BE(0) : 1005, reason: payload.subarray(2).toString() };
          socket.end();
          return;
        } else if (opcode === 0x1 || opcode === 0x2) onMessage(payload, ws);
      }
    });
  });
}

async function main() {
  const { apiKey, base } = await startConsole(processes, options.console, dataDir,
                                              ['--workspace-image', image]);
  const agentHeaders = { 'Uplink-Cluster-UID': clusterUid, 'User-Agent': 'uplink-agent/0.1.0 (workspace)' };

  // A qualified offer with SSH on, a running reservation and a grant, through the API.
  const offer = await expectStatus(call(base, 'POST', '/api/v1/offers', apiKey, {
    cluster_name: 'gpu-ssh', gpus: 8, country: 'de', availability: 'always', price_per_gpu_hour: '2.10',
    currency: 'eur' }), 201);
  await expectStatus(call(base, 'POST', '/api/v1/agent/inventory', offer.token, {
    agent_version: '0.1.0', cluster_uid: clusterUid, selector: 'nvidia.com/gpu.present=true',
    nodes: [{ name: 'gpu-node-0001', ready: true, unschedulable: false, gpu_resource: 'nvidia.com/gpu',
              gpu_capacity: 8, gpu_allocatable: 8, gpu_product: 'NVIDIA-H100-80GB-HBM3' }] }), 200);
  await expectStatus(call(base, 'POST', '/api/v1/offers/' + offer.id + '/review', apiKey, {
    authority_confirmed: true, hardware_compatible: true, isolation_verified: true,
    expiry_and_cleanup_checked: true, disk_eviction_tested: true, network_policy_enforced: true,
    price_includes_traffic: true, cpu_per_gpu: '8', memory_per_gpu: '64Gi', disk_per_gpu: '100Gi',
    transfer_budget_bytes: '1Mi', approved_nodes: ['gpu-node-0001'] }), 200);
  const execution = await expectStatus(call(base, 'POST', '/api/v1/offers/' + offer.id + '/execution', apiKey, {
    kubernetes_api_cidrs: ['10.96.0.1/32'], ssh_enabled: true }), 201);
  const reservation = await expectStatus(call(base, 'POST', '/api/v1/reservations', apiKey, {
    offer_id: offer.id, gpus: 1, duration_seconds: 7200 }), 201);
  const at = new Date().toISOString();
  const event = (state) => ({ key: reservation.id + '/' + state + '/1', reservation_id: reservation.id, state,
                              reason: 'seen', at, pod: 'ws-' + reservation.id.replace('_', '-'), node: 'gpu-node-0001' });
  await expectStatus(call(base, 'POST', '/api/v1/agent/workspace/sync', execution.credential, {
    instance: 'uplink-workspace-7d9f-abcde', version: '0.1.0', release: 'gpu-supply', namespace: 'uplink-workspaces',
    draining: false, wait_seconds: 0, events: [event('provisioning'), event('running')], workspaces: [] },
  agentHeaders), 200);
  const grant = await expectStatus(call(base, 'POST', '/api/v1/reservations/' + reservation.id + '/ssh-grants',
                                        apiKey, { public_key: userKey }), 201);

  // Not ready, and the page says why.
  browser = await launchChromium(options.chromium);
  const page = await newPage(browser);
  await signIn(page, base);
  await page.goto(base + '/#/reservations/' + reservation.id);
  await page.locator('[data-ssh-state="unavailable"]').waitFor();
  assert.match(await page.locator('[data-ssh-reason]').innerText(), /SSH tunnel is not connected/);
  assert.equal(await page.locator('[data-ssh-setup]').count(), 0);
  await screenshots(page, options.screenshots, 'reservation-ssh-waiting');

  // The controller's tunnel: answers the handover with sshd's banner and echoes sessions.
  const channel = (open) => webSocket(base, '/api/v1/agent/workspace/channels/' + open.channel,
    { Authorization: 'Bearer ' + open.credential, 'User-Agent': agentHeaders['User-Agent'] },
    'uplink.ssh-channel.v1', (data, ws) => ws.send(data, true));
  const tunnel = await webSocket(base, '/api/v1/agent/workspace/tunnel',
    { Authorization: 'Bearer ' + execution.credential, ...agentHeaders }, 'uplink.ssh-tunnel.v1', async (data) => {
      const message = JSON.parse(data.toString());
      if (message.type !== 'open') return;
      const ws = await channel(message);
      if (message.purpose === 'handover') ws.send('SSH-2.0-OpenSSH_9.2p1 Debian-2+deb12u3\r\n', true);
    });
  tunnel.send(JSON.stringify({ type: 'capability', reservation_id: reservation.id, host_key: hostKey + ' ',
                               sshd: 'OpenSSH_9.2p1' }), false);
  await page.locator('[data-ssh-state="ready"]').waitFor({ timeout: 15000 });
  assert.equal(await page.locator('[data-ssh-setup]').innerText(), 'uplink ssh setup ' + reservation.id);
  assert.match(await page.locator('[data-ssh-fingerprint]').innerText(), /^SHA256:[A-Za-z0-9+/]{43}$/);
  assert.equal(await page.locator('[data-transfer-level]').getAttribute('data-transfer-level'), 'ok');
  await screenshots(page, options.screenshots, 'reservation-ssh-ready');

  // A user's channel moves 840,000 bytes (both ways): amber, past 80 % of the 1 MiB budget.
  let echoed = 0;
  const client = await webSocket(base, '/api/v1/reservations/' + reservation.id + '/ssh/connect?grant=' + grant.id,
    { Authorization: 'Bearer ' + apiKey }, 'uplink.ssh-client.v1', (data) => { echoed += data.length; });
  for (let i = 0; i < 7; i += 1) client.send(randomBytes(60000), true);
  await waitUntil('the echo of 420,000 bytes', async () => echoed === 420000);
  await page.locator('[data-transfer-level="warn"]').waitFor({ timeout: 15000 });
  assert.match(await page.locator('[data-transfer-used]').innerText(), /820\.3 KiB of 1 MiB \(80 %\), nearly used up/);
  await screenshots(page, options.screenshots, 'reservation-ssh-transfer-warn');

  // Exactly the rest: used up, red; the next byte would cut the channel with the reason.
  // (in two messages: one is at most 64 KiB)
  client.send(randomBytes((budget - 840000) / 4), true);
  client.send(randomBytes((budget - 840000) / 4), true);
  await waitUntil('the rest echoed', async () => echoed === 420000 + (budget - 840000) / 2);
  await page.locator('[data-transfer-level="bad"]').waitFor({ timeout: 15000 });
  assert.match(await page.locator('[data-transfer-used]').innerText(), /1 MiB of 1 MiB \(100 %\), used up/);
  client.send('x', true);
  await waitUntil('the budget cut', async () => client.closed !== null);
  assert.equal(client.closed.code, 1008);
  assert.equal(client.closed.reason, `transfer budget used up: ${budget} of ${budget} bytes for ${reservation.id}`);
  await screenshots(page, options.screenshots, 'reservation-ssh-transfer-used-up');
  tunnel.close();
  assert.deepEqual(page.errors, []);
}

await runTest(main, { processes, browser: () => browser, dir: dataDir, reportBytes: 4000 });
