// A connection's page, in tabs that follow triage: Overview (health and why, the agents by
// role, facts, security events), Nodes (the inventory and each node's charts), Workloads
// (problem pods first, Warning events, right-sizing, the snapshot as text), kubectl, and
// Settings (namespace scope, approval rules, the token: a new installation code, rotate,
// revoke). Each tab is its own address: #/connections/{id}/{tab}.
import { h } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import htm from 'htm';
import { api } from './api.js';
import { ApprovalRules } from './approvals.js';
import { plural, since } from './format.js';
import { agentsByRole, clusterHealth, inventorySummary } from './health.js';
import { KubectlConsole } from './kubectl.js';
import { NodeCharts, NodesTable, UnknownNodes } from './nodes.js';
import {
  PasswordPrompt, TokenReveal, revokeToken, rotateToken, usePasswordPrompt, useTokenCalls, withConfirmation,
} from './tokens.js';
import { AgentRefusedNotice } from './two_factor.js';
import { Badge, ErrorText, HealthBadge, Time, useNow, usePageTitle, usePoll } from './ui.js';
import { ConnectionExecution } from './workspaces.js';
import { WorkloadsTab, workloadCounts } from './workloads.js';

const html = htm.bind(h);

export const connectionTabs = [
  ['overview', 'Overview'], ['nodes', 'Nodes'], ['workloads', 'Workloads'], ['kubectl', 'kubectl'],
  ['settings', 'Settings'],
];

const href = (id, ...parts) => '#/connections/' + [id, ...parts].map(encodeURIComponent).join('/');

// Said above what an offline or stale cluster's page shows: it is the past.
function AsOf({ connection, now }) {
  if (connection.liveness !== 'offline' && connection.liveness !== 'stale') return null;
  return html`<p class="notice danger" role="status" data-as-of>
    ${connection.liveness === 'offline' ? 'Offline' : 'Stale'}: no agent has called for
    ${' ' + since(connection.last_seen_at, now)}. What follows is as of the last reports
    ${connection.last_report_at && html` (inventory <${Time} iso=${connection.last_report_at} now=${now} />)`}.</p>`;
}

// The connection's agents, by role, each with its own state and last call; the roles that
// never called are listed too, with what needs them.
const roleNeeds = {
  inventory: 'the nodes and GPUs',
  cluster: 'kubectl, the workloads and right-sizing',
  node: 'the node charts',
};

function Agents({ connection, now }) {
  const roles = agentsByRole(connection.agents);
  return html`<section aria-labelledby="agents-title">
    <h2 id="agents-title">Agents</h2>
    <div class="table-wrap"><table class="agents">
      <thead><tr><th scope="col">Role</th><th scope="col">Instance</th><th scope="col">State</th>
        <th scope="col">Last call</th><th scope="col">Version</th></tr></thead>
      <tbody>${roles.map(({ role, agents }) => agents.length === 0
        ? html`<tr key=${role} data-role=${role} data-agent-state="never">
            <th scope="row">${role}</th><td colspan="4"><span class="badge badge-never">never called</span>
              <span class="muted"> ${roleNeeds[role] ? roleNeeds[role] + ' need it' : ''}</span></td></tr>`
        : agents.map((a, i) => html`<tr key=${role + a.instance} data-role=${role} data-agent-state=${a.liveness}>
            <th scope="row">${i === 0 ? role + (agents.length > 1 ? ' × ' + agents.length : '') : ''}</th>
            <td>${a.instance || '–'}</td>
            <td><span class=${'badge badge-' + (a.liveness || 'connected')}>${a.liveness === 'connected' ? 'connected'
              : a.liveness === 'waiting' ? 'waiting' : a.liveness + ' ' + since(a.last_seen_at, now)}</span>
              ${role === 'experiments' && a.liveness !== 'connected' && html`<div class="muted">calls when runs change</div>`}</td>
            <td><${Time} iso=${a.last_seen_at} now=${now} /></td>
            <td>${a.version || '–'}</td></tr>`))}</tbody></table></div>
  </section>`;
}

// The connection's security events (a report from another cluster with this token), newest
// first, each detail as text.
function SecurityEvents({ events, now }) {
  if (events.length === 0) return null;
  return html`<section class="security" aria-labelledby="security-title">
    <h2 id="security-title">Security events</h2>
    <p class="error" role="alert">This connection's token was used in a way it should not be: see below.</p>
    <div class="table-wrap"><table class="security-events">
      <thead><tr><th scope="col">When</th><th scope="col">What</th><th scope="col">From</th>
        <th scope="col">Detail</th></tr></thead>
      <tbody>${events.map((e, i) => html`<tr key=${i}>
        <td><${Time} iso=${e.at} now=${now} /></td><td><code>${e.action}</code></td><td>${e.source_address}</td>
        <td><code class="detail">${e.detail ? JSON.stringify(e.detail) : ''}</code></td>
      </tr>`)}</tbody></table></div>
  </section>`;
}

// Why the nodes table is empty: the agent never reported, or it reported that no node
// matches its selector, which says nothing about the GPUs' fitness.
function NoNodes({ connection }) {
  if (!connection.last_report_at) return html`<p>None reported yet.</p>`;
  return html`<div class="notice" role="status">
    <p><strong>0 nodes match selector ${connection.selector
      ? html`<code>${connection.selector}</code>` : "the agent's selector"}.</strong></p>
    <p>Detection is not qualification: an empty inventory means no matching nodes were found;
      it is not a successful GPU qualification. Check the selector and the nodes' labels.</p>
  </div>`;
}

// The GPU node selector the install commands asked for beside the one the agent reports, and
// whether they differ (an agent installed from other commands).
function SelectorFact({ connection }) {
  const chosen = connection.install ? connection.install.selector : '';
  const reported = connection.selector;
  return html`<span data-selector>
    install: ${chosen ? html`<code>${chosen}</code>` : 'not recorded'}
    ${' · agent reports: '}${reported ? html`<code>${reported}</code>` : 'nothing yet'}
    ${chosen && reported && chosen !== reported &&
      html`<span class="error"> (they differ: the agent was installed with another selector)</span>`}
  </span>`;
}

// A figure card: `bad` true (red), false (green), or null when there is nothing to judge (grey).
function Stat({ label, value, detail, bad, href: link, name }) {
  const state = bad === null || bad === undefined ? 'unknown' : bad ? 'bad' : 'ok';
  const body = html`<span class="stat-label">${label}</span><span class="stat-value">${value}</span>
    ${detail && html`<span class="stat-detail">${detail}</span>`}`;
  return link ? html`<a class=${'stat ' + state} href=${link} data-stat=${name}>${body}</a>`
    : html`<div class=${'stat ' + state} data-stat=${name}>${body}</div>`;
}

function Overview({ connection, snapshot, now }) {
  const health = clusterHealth(connection, now);
  const t = connection.totals;
  const reported = Boolean(connection.last_report_at);
  const cordoned = connection.nodes.filter((n) => n.unschedulable).length;
  const workloads = workloadCounts(snapshot);
  return html`<div>
    <section class=${'health-card health-card-' + health.key} aria-labelledby="health-title" data-health-card=${health.key}>
      <h2 id="health-title">${health.text}</h2>
      ${health.reasons.length > 0 ? html`<ul data-reasons>${health.reasons.map((r) => html`<li key=${r}>${r}</li>`)}</ul>`
        : html`<p>Every node is ready and every GPU allocatable; the agents are calling.</p>`}
    </section>
    <div class="fleet">
      <${Stat} name="nodes" label="Nodes ready" value=${reported ? t.nodes_ready + ' / ' + t.nodes : '–'}
        bad=${reported ? t.nodes_ready < t.nodes : null} href=${href(connection.id, 'nodes')}
        detail=${cordoned ? plural(cordoned, 'node') + ' cordoned' : ''} />
      <${Stat} name="gpus" label="GPUs ready" value=${reported ? t.gpus_ready + ' / ' + t.gpu_capacity : '–'}
        bad=${reported ? t.gpus_ready < t.gpu_capacity : null} href=${href(connection.id, 'nodes')} />
      <${Stat} name="pods" label="Pods with problems" value=${workloads ? workloads.problems : '–'}
        bad=${workloads ? workloads.problems > 0 : null} href=${href(connection.id, 'workloads')}
        detail=${workloads ? plural(workloads.pods, 'pod') + ', ' + plural(workloads.events, 'Warning event') : 'no snapshot yet'} />
    </div>
    <${AgentRefusedNotice} connection=${connection} />
    ${connection.nodes.length === 0 && html`<${NoNodes} connection=${connection} />`}
    <${Agents} connection=${connection} now=${now} />
    <h2>Facts</h2>
    <dl class="facts">
      <dt>Agent</dt><dd>${connection.agent_name} ${connection.agent_version || ''}</dd>
      <dt>Last seen</dt><dd><${Time} iso=${connection.last_seen_at} now=${now} none="never" /></dd>
      <dt>Last inventory report</dt><dd>${reported ? html`<${Time} iso=${connection.last_report_at} now=${now} />` : 'none yet'}</dd>
      <dt>Nodes ready</dt><dd>${t.nodes_ready} / ${t.nodes}</dd>
      <dt>GPUs ready / total</dt><dd>${t.gpus_ready} / ${t.gpu_capacity}</dd>
      <dt>Token</dt><dd><code>${connection.token_prefix}…</code>, expires <${Time} iso=${connection.expires_at} now=${now} />${
        connection.expires_in_days ? html` <strong class="warn">(in ${plural(connection.expires_in_days, 'day')})</strong>` : ''}</dd>
      <dt>GPU node selector</dt><dd><${SelectorFact} connection=${connection} /></dd>
    </dl>
    <${ConnectionExecution} connectionId=${connection.id} />
    <${SecurityEvents} events=${connection.security_events || []} now=${now} />
  </div>`;
}

function NodesTab({ connection, node, now }) {
  const { data: samples } = usePoll(() => api('GET', '/api/v1/connections/' + encodeURIComponent(connection.id) +
    '/nodes?limit=500'), 30000, [connection.id]);
  const list = samples ? samples.nodes : [];
  const chartsHref = (name) => href(connection.id, 'nodes', name);
  return html`<section aria-labelledby="nodes-title">
    <h2 id="nodes-title">Nodes <span class="muted">${inventorySummary(connection)}${
      (connection.liveness === 'offline' || connection.liveness === 'stale') && connection.last_report_at
        ? html`, as of <${Time} iso=${connection.last_report_at} now=${now} />` : ''}</span></h2>
    ${connection.nodes.length === 0 ? html`<${NoNodes} connection=${connection} />`
      : html`<${NodesTable} nodes=${connection.nodes} samples=${list} selected=${node}
          chartsHref=${chartsHref} now=${now} />`}
    <${UnknownNodes} nodes=${connection.nodes} samples=${list} chartsHref=${chartsHref} now=${now} />
    ${node && html`<${NodeCharts} connectionId=${connection.id} node=${node}
      sample=${list.find((s) => s.node === node)} closeHref=${href(connection.id, 'nodes')} />`}
  </section>`;
}

function NamespaceScope({ connectionId }) {
  const path = '/api/v1/connections/' + encodeURIComponent(connectionId) + '/namespaces';
  const [current, setCurrent] = useState(undefined);
  const [text, setText] = useState('');
  const [error, setError] = useState(null);
  const [saved, setSaved] = useState(false);
  const show = (reply) => {
    setCurrent(reply.namespaces);
    setText(reply.namespaces ? reply.namespaces.join(', ') : '');
  };
  useEffect(() => {
    api('GET', path).then(show, setError);
  }, [connectionId]);
  const save = async (event) => {
    event.preventDefault();
    setError(null);
    setSaved(false);
    const namespaces = text.split(/[\s,]+/).filter(Boolean);
    try {
      show(await api('PUT', path, { namespaces }));
      setSaved(true);
    } catch (e) {
      setError(e);
    }
  };
  return html`<section aria-labelledby="scope-title">
    <h2 id="scope-title">Namespace scope</h2>
    <p>${current === undefined ? '' : current === null
      ? 'Not chosen yet: only cluster-scoped reads (nodes, namespaces, top nodes, api-resources, version, …) run until you choose.'
      : current.length === 0 ? 'Cluster-scoped reads only.' : 'Allowed: ' + current.join(', ')}</p>
    <form class="row" onSubmit=${save}>
      <label>Namespaces (comma-separated, * for all, empty for cluster-scoped only)
        <input type="text" name="namespaces" value=${text} onInput=${(e) => setText(e.target.value)} /></label>
      <button type="submit">Save scope</button>
    </form>
    ${saved && html`<p class="ok" role="status">Saved.</p>`}
    <${ErrorText} error=${error} />
  </section>`;
}

// "Generate a new installation code": a new token, valid for the console's default lifetime
// (90 days) from now, shown once; the current token stops working at once. `onIssued` lets
// the page show the new expiry at once.
function NewInstallationCode({ connection, onIssued }) {
  const [prompt, ask] = usePasswordPrompt();
  const [reveal, setReveal] = useState(null);
  const [error, setError] = useState(null);
  if (connection.status === 'revoked') return null;
  const generate = async () => {
    if (!confirm('Generate a new installation code for ' + connection.cluster_name + '? It is ' +
                 'valid for 90 days. The current token stops working at once: the agent is ' +
                 'refused until the new code is in its Secret.')) return;
    setError(null);
    try {
      const path = '/api/v1/connections/' + encodeURIComponent(connection.id) + '/rotate';
      const reply = await withConfirmation(() => api('POST', path, { renew: true }), ask);
      if (reply && reply.token) {
        setReveal(reply);
        onIssued();
      }
    } catch (e) {
      setError(e);
    }
  };
  return html`<div class="renew">
    ${prompt && html`<${PasswordPrompt} onAnswer=${prompt}
      reason="Generating an installation code needs your password again." />`}
    ${reveal ? html`<${TokenReveal} reveal=${reveal} onDone=${() => setReveal(null)} />`
      : html`<button type="button" class="secondary" onClick=${generate}>Generate a new installation code</button>`}
    <${ErrorText} error=${error} />
  </div>`;
}

// The token: what it is, a new installation code, rotate and revoke (as on the tokens page).
function TokenSettings({ connection, onChanged, now }) {
  const { act, reveal, setReveal, prompt, error } = useTokenCalls(onChanged);
  return html`<section aria-labelledby="token-title">
    <h2 id="token-title">Agent token</h2>
    <p><code>${connection.token_prefix}…</code> <${Badge} connection=${connection} now=${now} />,
      expires <${Time} iso=${connection.expires_at} now=${now} /></p>
    <p class="muted">Both stop the current token at once. A new installation code is valid for 90 days from now;
      a rotated token keeps the current expiry.</p>
    <${NewInstallationCode} connection=${connection} onIssued=${onChanged} />
    ${prompt && html`<${PasswordPrompt} onAnswer=${prompt} />`}
    ${reveal && html`<${TokenReveal} reveal=${reveal} onDone=${() => setReveal(null)} />`}
    ${connection.status !== 'revoked' && html`<div class="row">
      <button type="button" class="secondary" onClick=${() => rotateToken(connection, act)}>Rotate token</button>
      <button type="button" class="danger" onClick=${() => revokeToken(connection, act)}>Revoke token</button>
    </div>`}
    <${ErrorText} error=${error} />
  </section>`;
}

function SettingsTab({ connection, onChanged, now }) {
  return html`<div>
    <${NamespaceScope} connectionId=${connection.id} />
    <${ApprovalRules} connectionId=${connection.id} />
    <${TokenSettings} connection=${connection} onChanged=${onChanged} now=${now} />
    <h2>GPU node selector</h2>
    <p><${SelectorFact} connection=${connection} /></p>
  </div>`;
}

function NotFound({ id }) {
  return html`<section>
    <h1>Connection not found</h1>
    <p>There is no connection <code>${id}</code> that you can see: it may have been mistyped, or it belongs to someone else.</p>
    <p><a href="#/connections">All connections</a></p>
  </section>`;
}

export function ConnectionPage({ id, tab = 'overview', node }) {
  const now = useNow();
  const base = '/api/v1/connections/' + encodeURIComponent(id);
  const [version, setVersion] = useState(0);
  const { data: connection, error } = usePoll(() => api('GET', base), 5000, [id, version], [id]);
  const { data: snapshot, error: snapshotError } = usePoll(() => api('GET', base + '/cluster'), 30000, [id]);
  const tabName = (connectionTabs.find(([key]) => key === tab) || [])[1];
  const notFound = !connection && error && error.status === 404;
  usePageTitle(...(notFound ? ['Connection not found'] : [connection && connection.cluster_name, tabName]));
  if (!connection) {
    if (notFound) return html`<${NotFound} id=${id} />`;
    return html`<section><h1>Connection</h1><${ErrorText} error=${error} /></section>`;
  }
  const workloads = workloadCounts(snapshot);
  const count = { nodes: connection.nodes.length, workloads: workloads && workloads.problems };
  return html`<section class="connection">
    <p class="crumbs"><a href="#/connections">Connections</a> ›</p>
    <h1>${connection.cluster_name} <${HealthBadge} connection=${connection} now=${now} /> <${Badge} connection=${connection} now=${now} /></h1>
    <p class="summary">${inventorySummary(connection)} · last seen <${Time} iso=${connection.last_seen_at} now=${now} none="never" /></p>
    <${ErrorText} error=${error} />
    <nav class="tabs" aria-label="Connection">${connectionTabs.map(([key, label]) => html`<a key=${key}
      href=${href(id, key)} aria-current=${key === tab ? 'page' : undefined}>${label}${
        count[key] ? html` <span class=${key === 'workloads' ? 'count bad' : 'count'}>${count[key]}</span>` : ''}</a>`)}
      <a href=${href(id, 'runs')}>Experiment runs</a></nav>
    <${AsOf} connection=${connection} now=${now} />
    ${tab === 'overview' && html`<${Overview} connection=${connection} snapshot=${snapshot} now=${now} />`}
    ${tab === 'nodes' && html`<${NodesTab} connection=${connection} node=${node} now=${now} />`}
    ${tab === 'workloads' && html`<${WorkloadsTab} connectionId=${id} snapshot=${snapshot} snapshotError=${snapshotError} now=${now} />`}
    ${tab === 'kubectl' && html`<${KubectlConsole} connection=${connection} now=${now} />`}
    ${tab === 'settings' && html`<${SettingsTab} connection=${connection} onChanged=${() => setVersion((v) => v + 1)} now=${now} />`}
  </section>`;
}
