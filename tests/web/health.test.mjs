// A connection at a glance (src/console/web/app/health.js): the state badge only grows in
// severity with silence, the cluster's health and why, the fleet's totals, the order of the
// list (unhealthy first), the agents by role, and when kubectl cannot run.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import {
  agentsByRole, clusterHealth, connectionState, fleetTotals, gpuModels, kubectlBlocked, sortConnections,
} from '../../src/console/web/app/health.js';

const now = Date.parse('2026-03-01T12:00:00Z');
const ago = (seconds) => new Date(now - seconds * 1000).toISOString();

function node(name, fields = {}) {
  return { name, ready: true, unschedulable: false, gpu_capacity: 8, gpu_allocatable: 8,
           gpu_product: 'NVIDIA-H100-80GB-HBM3', ...fields };
}

function connection(name, fields = {}) {
  const nodes = fields.nodes ?? [node(name + '-1'), node(name + '-2')];
  const ready = nodes.filter((n) => n.ready);
  return {
    id: name, cluster_name: name, agent_name: 'uplink-agent', status: 'active', liveness: 'connected',
    last_seen_at: ago(5), last_report_at: ago(30), nodes, agents: [],
    totals: {
      nodes: nodes.length, nodes_ready: ready.length,
      gpu_capacity: nodes.reduce((s, n) => s + n.gpu_capacity, 0),
      gpus_ready: ready.filter((n) => !n.unschedulable).reduce((s, n) => s + n.gpu_allocatable, 0),
    },
    ...fields,
  };
}

test('the state badge only grows in severity with silence', () => {
  assert.equal(connectionState(connection('a'), now).text, 'connected');
  assert.equal(connectionState(connection('a', { liveness: 'stale', last_seen_at: ago(100) }), now).text, 'stale 2 min');
  assert.equal(connectionState(connection('a', { liveness: 'offline', last_seen_at: ago(200) }), now).text, 'offline 3 min');
  // Days of silence with a token status that says only "stale": offline, red, for days.
  const days = connectionState(connection('a', { status: 'stale', liveness: 'offline', last_seen_at: ago(3 * 86400) }), now);
  assert.deepEqual(days, { key: 'offline', text: 'offline 3 d' });
});

test('health: healthy, degraded with its reasons, offline, waiting', () => {
  assert.deepEqual(clusterHealth(connection('ok'), now),
                   { key: 'healthy', text: 'Healthy', reasons: [], summary: '2 / 2 nodes ready, 16 / 16 GPUs' });
  const degraded = clusterHealth(connection('west', { nodes: [
    node('a', { ready: false }), node('b', { unschedulable: true }), node('c', { gpu_allocatable: 6 }),
  ] }), now);
  assert.equal(degraded.key, 'degraded');
  assert.deepEqual(degraded.reasons, ['1 node NotReady', '1 node cordoned', '2 GPUs not allocatable']);
  assert.equal(degraded.summary, '2 / 3 nodes ready, 6 / 24 GPUs');
  const offline = clusterHealth(connection('south', { liveness: 'offline', status: 'revoked', last_seen_at: ago(2 * 86400) }), now);
  assert.deepEqual([offline.key, offline.reasons], ['offline', ['no agent call for 2 d', 'token revoked']]);
  assert.equal(clusterHealth(connection('new', { liveness: 'waiting', last_seen_at: null, last_report_at: null, nodes: [] }), now).key, 'waiting');
  assert.deepEqual(clusterHealth(connection('empty', { nodes: [] }), now).reasons, ['0 nodes match the selector']);
  assert.deepEqual(clusterHealth(connection('stale', { liveness: 'stale', last_seen_at: ago(120) }), now).reasons,
                   ['no agent call for 2 min']);
  assert.deepEqual(clusterHealth(connection('refused', { owner_needs_two_factor: true }), now).reasons,
                   ['agents refused: the owner has no two-factor sign-in']);
});

test('the list puts offline first (longest silent first), then degraded, waiting, healthy', () => {
  const list = [
    connection('healthy-a'),
    connection('offline-recent', { liveness: 'offline', last_seen_at: ago(600) }),
    connection('degraded', { nodes: [node('x', { ready: false })] }),
    connection('waiting', { liveness: 'waiting', last_seen_at: null, last_report_at: null, nodes: [] }),
    connection('offline-days', { liveness: 'offline', last_seen_at: ago(3 * 86400) }),
  ];
  assert.deepEqual(sortConnections(list, 'health', true, now).map((c) => c.cluster_name),
                   ['offline-days', 'offline-recent', 'degraded', 'waiting', 'healthy-a']);
  assert.deepEqual(sortConnections(list, 'cluster', false, now).map((c) => c.cluster_name)[0], 'waiting');
});

test('fleet totals and GPU models', () => {
  const list = [connection('a'), connection('b', { nodes: [node('x', { ready: false, gpu_product: 'NVIDIA-A100' })] }),
                connection('c', { liveness: 'waiting', last_report_at: null, nodes: [] })];
  assert.deepEqual(fleetTotals(list, now), { clusters: 3, nodes: 3, nodesReady: 2, gpus: 24, gpusReady: 16,
                                             offline: 0, degraded: 1, waiting: 1, healthy: 1 });
  assert.deepEqual(gpuModels(connection('m', { nodes: [node('1'), node('2', { gpu_product: 'NVIDIA-A100', gpu_capacity: 4 }), node('3')] })),
                   [{ product: 'NVIDIA-H100-80GB-HBM3', gpus: 16 }, { product: 'NVIDIA-A100', gpus: 4 }]);
});

test('agents by role, the roles that never called included', () => {
  const roles = agentsByRole([{ role: 'node', instance: 'n2' }, { role: 'experiments', instance: 'e' },
                              { role: 'node', instance: 'n1' }, { role: 'inventory', instance: '' }]);
  assert.deepEqual(roles.map((r) => [r.role, r.agents.map((a) => a.instance)]),
                   [['inventory', ['']], ['cluster', []], ['node', ['n1', 'n2']], ['experiments', ['e']]]);
});

test('kubectl runs only with a cluster agent connected, and says why not', () => {
  assert.match(kubectlBlocked(connection('a'), now), /No cluster agent has called/);
  assert.equal(kubectlBlocked(connection('a', { agents: [{ role: 'cluster', liveness: 'connected', last_seen_at: ago(3) }] }), now), null);
  assert.match(kubectlBlocked(connection('a', { agents: [{ role: 'cluster', liveness: 'offline', last_seen_at: ago(600) }] }), now),
               /last called 10 min ago/);
  assert.match(kubectlBlocked(connection('a', { status: 'revoked' }), now), /token is revoked/);
});
