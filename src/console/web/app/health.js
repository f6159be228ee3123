// A connection at a glance (docs/web.md, "Connection states" and "Cluster health"): the state
// of its agents, what its token adds, and the cluster's health from both and its inventory;
// the fleet's totals. Pure functions of API objects: the unit tests (tests/web) run them in
// Node.
import { plural, since } from './format.js';

// The state badge: offline whenever the agents have been silent past the offline threshold,
// whatever the token's status, and for how long; else a revoked or expired token; else what
// the agents do. Severity only grows with silence: waiting, connected, stale, offline.
// `uplink connections list` says the same.
export function connectionState(connection, now) {
  const { status, liveness, last_seen_at: seen } = connection;
  if (liveness === 'offline') return { key: 'offline', text: 'offline ' + since(seen, now) };
  if (status === 'revoked' || status === 'expired') return { key: status, text: status };
  if (liveness === 'waiting') return { key: 'waiting', text: 'Waiting for agent' };
  if (liveness === 'stale') return { key: 'stale', text: 'stale ' + since(seen, now) };
  return { key: 'connected', text: 'connected' };
}

// What the token adds to the state: why an offline agent cannot come back, or that the token
// expires soon (from 14 days before).
export function tokenNote(connection) {
  const { status, liveness, expires_in_days: days } = connection;
  if (liveness === 'offline' && (status === 'revoked' || status === 'expired')) {
    return { key: 'token-' + status, text: 'token ' + status };
  }
  if (days !== null && days !== undefined) {
    return { key: 'expiring', text: 'expires in ' + plural(days, 'day') };
  }
  return null;
}

// Most severe first: the order of the connections list.
export const healthOrder = ['offline', 'degraded', 'waiting', 'healthy'];
export const healthText = { offline: 'Offline', degraded: 'Degraded', waiting: 'Waiting', healthy: 'Healthy' };

// "2 / 3 nodes ready, 8 / 24 GPUs", or why there are no figures.
export function inventorySummary(connection) {
  if (!connection.last_report_at) return 'no inventory yet';
  const t = connection.totals;
  return t.nodes_ready + ' / ' + plural(t.nodes, 'node') + ' ready, ' +
    t.gpus_ready + ' / ' + t.gpu_capacity + ' GPUs';
}

// The cluster's health: `key` (one of healthOrder), `text`, `reasons` (what is wrong, most
// important first) and `summary` (the inventory's figures). Offline: the agents are silent
// past the offline threshold. Waiting: no agent called yet. Degraded: the agents are stale or
// refused, or the inventory has nodes not ready, cordoned nodes, GPUs not allocatable, nodes
// with errors, or no node at all. Healthy otherwise.
export function clusterHealth(connection, now) {
  const summary = inventorySummary(connection);
  const { status, liveness } = connection;
  const tokenDead = status === 'revoked' || status === 'expired';
  if (liveness === 'offline') {
    const reasons = ['no agent call for ' + since(connection.last_seen_at, now)];
    if (tokenDead) reasons.push('token ' + status);
    return { key: 'offline', text: healthText.offline, reasons, summary };
  }
  if (liveness === 'waiting') {
    const reasons = [tokenDead ? 'token ' + status : 'no agent has called yet'];
    return { key: 'waiting', text: healthText.waiting, reasons, summary };
  }
  const reasons = [];
  if (tokenDead) reasons.push('token ' + status + ': its agents are refused');
  if (connection.owner_needs_two_factor) reasons.push('agents refused: the owner has no two-factor sign-in');
  if (liveness === 'stale') reasons.push('no agent call for ' + since(connection.last_seen_at, now));
  const nodes = connection.nodes || [];
  if (connection.last_report_at && nodes.length === 0) reasons.push('0 nodes match the selector');
  const notReady = nodes.filter((n) => !n.ready).length;
  if (notReady) reasons.push(plural(notReady, 'node') + ' NotReady');
  const cordoned = nodes.filter((n) => n.unschedulable).length;
  if (cordoned) reasons.push(plural(cordoned, 'node') + ' cordoned');
  const missing = nodes.filter((n) => n.ready && !n.unschedulable)
    .reduce((sum, n) => sum + Math.max(0, (n.gpu_capacity || 0) - (n.gpu_allocatable || 0)), 0);
  if (missing) reasons.push(plural(missing, 'GPU') + ' not allocatable');
  const failing = nodes.filter((n) => n.error).length;
  if (failing) reasons.push(plural(failing, 'node') + ' with errors');
  const key = reasons.length ? 'degraded' : 'healthy';
  return { key, text: healthText[key], reasons, summary };
}

// The GPU models of a connection's nodes with how many GPUs each: [{product, gpus}], most
// GPUs first.
export function gpuModels(connection) {
  const byProduct = new Map();
  for (const node of connection.nodes || []) {
    if (!node.gpu_product && !node.gpu_capacity) continue;
    const product = node.gpu_product || 'unknown model';
    byProduct.set(product, (byProduct.get(product) || 0) + (node.gpu_capacity || 0));
  }
  return [...byProduct].map(([product, gpus]) => ({ product, gpus }))
    .sort((a, b) => b.gpus - a.gpus || a.product.localeCompare(b.product));
}

// The fleet at a glance: clusters by health, nodes and GPUs ready over every connection that
// reported.
export function fleetTotals(connections, now) {
  const totals = { clusters: connections.length, nodes: 0, nodesReady: 0, gpus: 0, gpusReady: 0 };
  for (const key of healthOrder) totals[key] = 0;
  for (const c of connections) {
    totals[clusterHealth(c, now).key] += 1;
    if (!c.last_report_at) continue;
    totals.nodes += c.totals.nodes;
    totals.nodesReady += c.totals.nodes_ready;
    totals.gpus += c.totals.gpu_capacity;
    totals.gpusReady += c.totals.gpus_ready;
  }
  return totals;
}

// Connections sorted by `column` ('health', 'cluster', 'seen', 'nodes', 'gpus'): health puts
// the most severe first, then the longest silent; ties go by cluster name.
export function sortConnections(connections, column, ascending, now) {
  const key = (c) => {
    switch (column) {
      case 'cluster': return c.cluster_name.toLowerCase();
      case 'seen': return c.last_seen_at ? Date.parse(c.last_seen_at) : -Infinity;
      case 'nodes': return c.last_report_at ? c.totals.nodes : -1;
      case 'gpus': return c.last_report_at ? c.totals.gpu_capacity : -1;
      default: return healthOrder.indexOf(clusterHealth(c, now).key);
    }
  };
  const silence = (c) => (c.last_seen_at ? Date.parse(c.last_seen_at) : Infinity);
  return [...connections].sort((a, b) => {
    const x = key(a);
    const y = key(b);
    let order = x < y ? -1 : x > y ? 1 : 0;
    if (!ascending) order = -order;
    if (order === 0 && column === 'health') order = silence(a) - silence(b);
    return order || a.cluster_name.localeCompare(b.cluster_name);
  });
}

// The connection's agents by role, in the order people read them, with the roles that never
// called but the console's features need: [{role, agents}].
const expectedRoles = ['inventory', 'cluster', 'node'];
export function agentsByRole(agents) {
  const order = [...expectedRoles, 'experiments'];
  const roles = new Map(expectedRoles.map((role) => [role, []]));
  for (const agent of agents || []) {
    if (!roles.has(agent.role)) roles.set(agent.role, []);
    roles.get(agent.role).push(agent);
  }
  const rank = (role) => (order.includes(role) ? order.indexOf(role) : order.length);
  return [...roles].map(([role, list]) => ({
    role, agents: list.sort((a, b) => (a.instance || '').localeCompare(b.instance || '')),
  })).sort((a, b) => rank(a.role) - rank(b.role) || a.role.localeCompare(b.role));
}

// Whether kubectl can run now: a cluster agent is connected. Else why not, for the Run button.
export function kubectlBlocked(connection, now) {
  if (connection.status === 'revoked' || connection.status === 'expired') {
    return 'The token is ' + connection.status + ': the cluster agent is refused until a new installation code is in its Secret (Settings).';
  }
  if (connection.owner_needs_two_factor) {
    return "The agents are refused until the connection's owner sets up two-factor sign-in.";
  }
  const cluster = (connection.agents || []).filter((a) => a.role === 'cluster');
  if (cluster.some((a) => a.liveness === 'connected')) return null;
  if (cluster.length === 0) {
    return 'No cluster agent has called: kubectl runs through the cluster role, which is ' +
      'installed with the "Inventory, cluster and node telemetry" workloads.';
  }
  const last = cluster.map((a) => a.last_seen_at).sort().pop();
  return 'The cluster agent is not connected: it last called ' + since(last, now) +
    ' ago. kubectl runs through it; the command could not be taken.';
}
