// A connection's page: its nodes (sortable, filterable), a node's charts, the cluster view
// as text, pod right-sizing, the namespace scope, the kubectl console and its approvals.
import { h } from 'preact';
import { useEffect, useRef, useState } from 'preact/hooks';
import htm from 'htm';
import uPlot from 'uplot';
import { api } from './api.js';
import { ago, bytes, dateTime, number, splitArgv } from './format.js';
import { PasswordPrompt, TokenReveal, usePasswordPrompt, withConfirmation } from './tokens.js';
import { AgentRefusedNotice } from './two_factor.js';
import { Badge, ErrorText, useNow, usePoll } from './ui.js';
import { ConnectionApprovals, followCommand } from './approvals.js';
import { RightSizing } from './rightsizing.js';

const html = htm.bind(h);

const nodeColumns = [
  ['name', 'Name', (n) => n.name],
  ['ready', 'Ready', (n) => (n.ready ? 'yes' : 'no')],
  ['cordoned', 'Cordoned', (n) => (n.unschedulable ? 'yes' : 'no')],
  ['gpu_product', 'GPU product', (n) => n.gpu_product || '–'],
  ['gpus', 'GPUs alloc / cap', (n) => (n.gpu_allocatable ?? 0) + ' / ' + (n.gpu_capacity ?? 0)],
  ['cpu', 'CPU %', (n) => number(n.sample?.cpu_percent)],
  ['memory', 'Memory used', (n) => bytes(n.sample ? n.sample.memory_total_bytes - n.sample.memory_available_bytes : null)],
  ['memory_total', 'Memory total', (n) => bytes(n.sample?.memory_total_bytes ?? null)],
  ['load', 'Load (1 min)', (n) => number(n.sample?.load1, 2)],
];

function sortKey(node, column) {
  switch (column) {
    case 'cpu': return node.sample?.cpu_percent ?? -1;
    case 'memory': return node.sample?.memory_used_percent ?? -1;
    case 'memory_total': return node.sample?.memory_total_bytes ?? -1;
    case 'load': return node.sample?.load1 ?? -1;
    case 'gpus': return node.gpu_capacity ?? 0;
    case 'ready': return node.ready ? 1 : 0;
    case 'cordoned': return node.unschedulable ? 1 : 0;
    case 'gpu_product': return node.gpu_product || '';
    default: return node.name;
  }
}

function NodesTable({ nodes, samples, selected, onSelect }) {
  const [filter, setFilter] = useState('');
  const [sort, setSort] = useState({ column: 'name', ascending: true });
  const bySample = new Map((samples || []).map((s) => [s.node, s]));
  const rows = nodes
    .map((n) => ({ ...n, sample: bySample.get(n.name) }))
    .filter((n) => n.name.toLowerCase().includes(filter.toLowerCase()) ||
                   (n.gpu_product || '').toLowerCase().includes(filter.toLowerCase()));
  rows.sort((a, b) => {
    const x = sortKey(a, sort.column);
    const y = sortKey(b, sort.column);
    const order = x < y ? -1 : x > y ? 1 : 0;
    return sort.ascending ? order : -order;
  });
  const sortBy = (column) =>
    setSort((s) => ({ column, ascending: s.column === column ? !s.ascending : true }));
  return html`<div>
    <label class="inline">Filter nodes <input type="search" value=${filter}
      onInput=${(e) => setFilter(e.target.value)} placeholder="name or GPU product" /></label>
    <div class="table-wrap"><table class="nodes">
      <thead><tr>${nodeColumns.map(([key, label]) => html`<th key=${key} scope="col"
        aria-sort=${sort.column === key ? (sort.ascending ? 'ascending' : 'descending') : 'none'}>
        <button type="button" class="link" onClick=${() => sortBy(key)}>${label}</button></th>`)}
        <th scope="col">Charts</th></tr></thead>
      <tbody>${rows.map((n) => html`<tr key=${n.name} class=${selected === n.name ? 'selected' : ''}>
        ${nodeColumns.map(([key, , cell]) => html`<td key=${key}>${cell(n)}</td>`)}
        <td>${n.sample ? html`<button type="button" class="secondary" onClick=${() => onSelect(n.name)}>Show</button>` : '–'}</td>
      </tr>`)}</tbody>
    </table></div>
  </div>`;
}

const ranges = [['1h', 'Last hour'], ['6h', '6 hours'], ['24h', '24 hours'], ['7d', '7 days']];

function Chart({ connectionId, node, metric, title, since, format }) {
  const target = useRef(null);
  const [error, setError] = useState(null);
  const [empty, setEmpty] = useState(false);
  useEffect(() => {
    let plot = null;
    let live = true;
    const path = '/api/v1/connections/' + encodeURIComponent(connectionId) + '/nodes/' +
      encodeURIComponent(node) + '/series?metric=' + metric + '&since=' + since;
    api('GET', path).then((reply) => {
      if (!live) return;
      const series = reply.series || [];
      const times = series.length ? series[0].points.map((p) => p[0]) : [];
      setEmpty(times.length === 0 || series.every((s) => s.points.every((p) => p[1] === null)));
      const data = [times, ...series.map((s) => s.points.map((p) => p[1]))];
      const palette = ['#2563eb', '#d97706', '#059669', '#dc2626', '#7c3aed', '#0891b2', '#be185d', '#4d7c0f'];
      const width = Math.max(280, Math.min(640, target.current.clientWidth || 640));
      plot = new uPlot({
        width,
        height: 200,
        series: [{}, ...series.map((s, i) => ({
          label: s.labels && s.labels.gpu !== undefined ? 'GPU ' + s.labels.gpu : title,
          stroke: palette[i % palette.length],
          width: 2,
          value: (u, v) => (v === null ? '–' : format(v)),
        }))],
        axes: [{}, { values: (u, values) => values.map(format), size: 84 }],
      }, data, target.current);
    }, (e) => live && setError(e));
    return () => {
      live = false;
      if (plot) plot.destroy();
    };
  }, [connectionId, node, metric, since]);
  return html`<figure class="chart" data-metric=${metric}>
    <figcaption>${title}${empty ? ' (no data in this range)' : ''}</figcaption>
    <${ErrorText} error=${error} />
    <div ref=${target}></div>
  </figure>`;
}

function NodeCharts({ connectionId, node }) {
  const [since, setSince] = useState('1h');
  const percent = (v) => number(v, 0) + ' %';
  const perSecond = (v) => bytes(v) + '/s';
  return html`<section aria-labelledby="charts-title">
    <h2 id="charts-title">Node ${node}</h2>
    <label class="inline">Range <select value=${since} onChange=${(e) => setSince(e.target.value)}>
      ${ranges.map(([value, label]) => html`<option key=${value} value=${value}>${label}</option>`)}
    </select></label>
    <div class="charts">
      <${Chart} connectionId=${connectionId} node=${node} metric="cpu_percent" title="CPU busy" since=${since} format=${percent} />
      <${Chart} connectionId=${connectionId} node=${node} metric="memory_used_bytes" title="Memory used" since=${since} format=${bytes} />
      <${Chart} connectionId=${connectionId} node=${node} metric="network_receive_bytes_per_second" title="Network receive" since=${since} format=${perSecond} />
      <${Chart} connectionId=${connectionId} node=${node} metric="network_transmit_bytes_per_second" title="Network transmit" since=${since} format=${perSecond} />
      <${Chart} connectionId=${connectionId} node=${node} metric="disk_read_bytes_per_second" title="Disk read" since=${since} format=${perSecond} />
      <${Chart} connectionId=${connectionId} node=${node} metric="disk_written_bytes_per_second" title="Disk write" since=${since} format=${perSecond} />
      <${Chart} connectionId=${connectionId} node=${node} metric="gpu_utilization_percent" title="GPU utilisation" since=${since} format=${percent} />
      <${Chart} connectionId=${connectionId} node=${node} metric="gpu_memory_used_bytes" title="GPU memory used" since=${since} format=${bytes} />
      <${Chart} connectionId=${connectionId} node=${node} metric="gpu_temperature_celsius" title="GPU temperature" since=${since} format=${(v) => number(v, 0) + ' °C'} />
      <${Chart} connectionId=${connectionId} node=${node} metric="gpu_power_watts" title="GPU power" since=${since} format=${(v) => number(v, 0) + ' W'} />
    </div>
  </section>`;
}

// The latest cluster snapshot, each command's output as text in a monospace block.
function ClusterView({ connectionId }) {
  const { data, error } = usePoll(
    () => api('GET', '/api/v1/connections/' + encodeURIComponent(connectionId) + '/cluster'),
    30000, [connectionId]);
  return html`<section aria-labelledby="cluster-title">
    <h2 id="cluster-title">Cluster view</h2>
    ${error && error.code === 'no_snapshot'
      ? html`<p>No cluster snapshot yet: the cluster role sends one every 30 s once it runs.</p>`
      : html`<${ErrorText} error=${error} />`}
    ${data && html`<p class="muted">Collected ${data.collected_at}</p>
      ${data.results.map((r, i) => html`<details key=${i} class="result" open=${i < 3}>
        <summary>${r.name} <code>${(r.argv || []).join(' ')}</code>
          ${r.error ? ' – ' + r.error.code : r.exit_code ? ' – exit ' + r.exit_code : ''}</summary>
        <pre class="output">${r.error ? r.error.message : (r.stdout || '') + (r.stderr ? '\n' + r.stderr : '')}</pre>
      </details>`)}`}
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

// A history entry for a command that waited for approval, as it is now.
function approvalEntry(line, command) {
  if (command.status === 'completed') {
    return { line, id: command.id, ok: command.exit_code === 0,
             status: 'approved, exit ' + command.exit_code,
             output: (command.stdout || '') + (command.stderr ? '\n' + command.stderr : '') };
  }
  const waiting = command.status === 'waiting_for_approval' || command.status === 'approved';
  return { line, id: command.id, ok: waiting, waiting,
           status: command.status.replace(/_/g, ' '), output: command.message || '' };
}

function KubectlConsole({ connectionId }) {
  const [line, setLine] = useState('kubectl get nodes');
  const [history, setHistory] = useState([]);
  const [busy, setBusy] = useState(false);
  const following = useRef([]);
  useEffect(() => () => following.current.forEach((stop) => stop()), [connectionId]);
  const run = async (event) => {
    event.preventDefault();
    const argv = splitArgv(line.trim());
    if (!argv || argv.length === 0) return;
    setBusy(true);
    let entry;
    try {
      const reply = await api('POST', '/api/v1/connections/' + encodeURIComponent(connectionId) +
        '/kubectl', { argv });
      if (reply.status === 'waiting_for_approval') {
        // It runs once the owner or an admin approves it: follow it until its result.
        const typed = line;
        entry = approvalEntry(typed, reply);
        following.current.push(followCommand(connectionId, reply.id, (command) =>
          setHistory((h) => h.map((e) => (e.id === command.id ? approvalEntry(typed, command) : e)))));
      } else {
        entry = { line, ok: reply.exit_code === 0, status: 'exit ' + reply.exit_code,
                  output: reply.stdout + (reply.stderr ? '\n' + reply.stderr : '') };
      }
    } catch (e) {
      entry = { line, ok: false, status: 'refused: ' + e.code, output: e.message };
    }
    setHistory((h) => [entry, ...h].slice(0, 50));
    setBusy(false);
  };
  return html`<section aria-labelledby="kubectl-title">
    <h2 id="kubectl-title">kubectl (read-only)</h2>
    <form class="row" onSubmit=${run}>
      <label>Command<input type="text" name="argv" class="mono" value=${line}
        onInput=${(e) => setLine(e.target.value)} list="kubectl-history" /></label>
      <button type="submit" disabled=${busy}>${busy ? 'Running…' : 'Run'}</button>
    </form>
    <datalist id="kubectl-history">${history.map((e, i) => html`<option key=${i} value=${e.line} />`)}</datalist>
    <ol class="history">${history.map((e, i) => html`<li key=${history.length - i}
      class=${e.waiting ? 'waiting' : e.ok ? 'ok' : 'failed'} data-command=${e.id}>
      <div><code>${e.line}</code> <span class="status">${e.status}</span></div>
      <pre class=${e.waiting ? 'output wrap' : 'output'}>${e.output}</pre>
    </li>`)}</ol>
  </section>`;
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

// The connection's security events (a report from another cluster with this token), newest
// first, each detail as text.
function SecurityEvents({ events }) {
  if (events.length === 0) return null;
  return html`<section class="security" aria-labelledby="security-title">
    <h2 id="security-title">Security events</h2>
    <p class="error" role="alert">This connection's token was used in a way it should not be: see below.</p>
    <div class="table-wrap"><table class="security-events">
      <thead><tr><th scope="col">When</th><th scope="col">What</th><th scope="col">From</th>
        <th scope="col">Detail</th></tr></thead>
      <tbody>${events.map((e, i) => html`<tr key=${i}>
        <td>${dateTime(e.at)}</td><td><code>${e.action}</code></td><td>${e.source_address}</td>
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

export function ConnectionPage({ id }) {
  const now = useNow();
  const base = '/api/v1/connections/' + encodeURIComponent(id);
  const [version, setVersion] = useState(0);
  const { data: connection, error } = usePoll(() => api('GET', base), 5000, [id, version]);
  const { data: samples } = usePoll(() => api('GET', base + '/nodes?limit=500'), 30000, [id]);
  const [selected, setSelected] = useState(null);
  if (!connection) return html`<section><h1>Connection</h1><${ErrorText} error=${error} /></section>`;
  return html`<section>
    <h1>${connection.cluster_name} <${Badge} connection=${connection} now=${now} /></h1>
    <${ErrorText} error=${error} />
    <${AgentRefusedNotice} connection=${connection} />
    <dl class="facts">
      <dt>Agent</dt><dd>${connection.agent_name} ${connection.agent_version || ''}</dd>
      <dt>Last seen</dt><dd>${ago(connection.last_seen_at, now)}</dd>
      <dt>Last inventory report</dt><dd>${connection.last_report_at ? ago(connection.last_report_at, now) : 'none yet'}</dd>
      <dt>Nodes ready</dt><dd>${connection.totals.nodes_ready} / ${connection.totals.nodes}</dd>
      <dt>GPUs ready / total</dt><dd>${connection.totals.gpus_ready} / ${connection.totals.gpu_capacity}</dd>
      <dt>Token</dt><dd><code>${connection.token_prefix}…</code>, expires ${dateTime(connection.expires_at)}${
        connection.expires_in_days ? html` <strong class="warn">(in ${connection.expires_in_days} ${
          connection.expires_in_days === 1 ? 'day' : 'days'})</strong>` : ''}</dd>
      <dt>GPU node selector</dt><dd><${SelectorFact} connection=${connection} /></dd>
    </dl>
    <${NewInstallationCode} connection=${connection} onIssued=${() => setVersion((v) => v + 1)} />
    <p><a href=${'#/connections/' + encodeURIComponent(id) + '/runs'}>Experiment runs (MLflow, W&B) →</a></p>
    <${SecurityEvents} events=${connection.security_events || []} />
    <h2>Nodes</h2>
    ${connection.nodes.length === 0 ? html`<${NoNodes} connection=${connection} />`
      : html`<${NodesTable} nodes=${connection.nodes} samples=${samples ? samples.nodes : []}
          selected=${selected} onSelect=${setSelected} />`}
    ${selected && html`<${NodeCharts} connectionId=${id} node=${selected} />`}
    <${NamespaceScope} connectionId=${id} />
    <${KubectlConsole} connectionId=${id} />
    <${ConnectionApprovals} connectionId=${id} />
    <${RightSizing} connectionId=${id} />
    <${ClusterView} connectionId=${id} />
  </section>`;
}
