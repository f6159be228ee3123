// The connections page: the fleet at a glance (clusters by health, nodes and GPUs ready),
// then one row per connection, unhealthy first, sortable and filterable.
import { h } from 'preact';
import { useState } from 'preact/hooks';
import htm from 'htm';
import { api } from './api.js';
import { fleetTotals, gpuModels, healthOrder, healthText, sortConnections, clusterHealth } from './health.js';
import { AgentRefusedNotice } from './two_factor.js';
import { Badge, ErrorText, HealthBadge, Time, useNow, usePageTitle, usePoll } from './ui.js';

const html = htm.bind(h);

function FleetSummary({ connections, now }) {
  const t = fleetTotals(connections, now);
  const share = (ready, all) => (all === ready ? 'ok' : 'bad');
  return html`<div class="fleet" aria-label="Fleet totals" data-fleet>
    <div class=${'stat ' + (t.offline + t.degraded > 0 ? 'bad' : 'ok')} data-fleet-clusters>
      <span class="stat-label">Clusters</span>
      <span class="stat-value">${t.clusters}</span>
      <span class="stat-detail">${healthOrder.filter((k) => t[k] > 0).map((k) => html`<span key=${k}
        class=${'badge health-' + k} data-fleet-health=${k}>${t[k]} ${healthText[k].toLowerCase()}</span> `)}</span>
    </div>
    <div class=${'stat ' + share(t.nodesReady, t.nodes)} data-fleet-nodes>
      <span class="stat-label">Nodes ready</span>
      <span class="stat-value">${t.nodesReady} / ${t.nodes}</span>
      <span class="stat-detail">${t.nodes - t.nodesReady > 0 ? t.nodes - t.nodesReady + ' not ready' : 'all ready'}</span>
    </div>
    <div class=${'stat ' + share(t.gpusReady, t.gpus)} data-fleet-gpus>
      <span class="stat-label">GPUs ready</span>
      <span class="stat-value">${t.gpusReady} / ${t.gpus}</span>
      <span class="stat-detail">${t.gpus - t.gpusReady > 0 ? t.gpus - t.gpusReady + ' not ready' : 'all ready'}</span>
    </div>
  </div>`;
}

// "2 / 3", red when short; for a cluster whose agents are silent, said to be old.
function Figure({ connection, ready, total, now }) {
  if (!connection.last_report_at) return html`<td class="number">–</td>`;
  const old = connection.liveness === 'offline' || connection.liveness === 'stale';
  return html`<td class=${'number' + (ready < total ? ' bad' : '')}>${ready} / ${total}
    ${old && html`<div class="muted">as of <${Time} iso=${connection.last_report_at} now=${now} /></div>`}</td>`;
}

const columns = [
  ['cluster', 'Cluster'], ['health', 'Health'], [null, 'Agents'], ['seen', 'Last seen', 'wide-only'],
  ['nodes', 'Nodes ready'], ['gpus', 'GPUs ready'], [null, 'GPU model'], [null, 'Agent version', 'wide-only'],
];

// `linked`: names open the connection's page (not for a user held to two-factor enrolment).
export function ConnectionsPage({ linked = true }) {
  usePageTitle('Connections');
  const now = useNow();
  const { data, error } = usePoll(() => api('GET', '/api/v1/connections'), 5000, []);
  const [filter, setFilter] = useState({ text: '', health: '' });
  const [sort, setSort] = useState({ column: 'health', ascending: true });
  const connections = data ? data.connections : null;
  const needle = filter.text.trim().toLowerCase();
  const shown = connections ? sortConnections(connections.filter((c) => {
    const health = clusterHealth(c, now).key;
    if (filter.health === 'attention' && health !== 'offline' && health !== 'degraded') return false;
    if (filter.health && filter.health !== 'attention' && health !== filter.health) return false;
    return !needle || c.cluster_name.toLowerCase().includes(needle) ||
      c.agent_name.toLowerCase().includes(needle) ||
      gpuModels(c).some((m) => m.product.toLowerCase().includes(needle));
  }), sort.column, sort.ascending, now) : [];
  const sortBy = (column) =>
    setSort((s) => ({ column, ascending: s.column === column ? !s.ascending : true }));
  return html`<section>
    <h1>Connections</h1>
    <${ErrorText} error=${error} />
    ${connections && connections.length === 0 &&
    html`<p>No connections yet. <a href="#/tokens">Create an agent token</a> to connect a cluster.</p>`}
    ${connections && connections.length > 0 && html`
      <${FleetSummary} connections=${connections} now=${now} />
      <div class="row filters">
        <label>Find<input type="search" value=${filter.text} placeholder="cluster, agent or GPU model"
          onInput=${(e) => setFilter({ ...filter, text: e.target.value })} /></label>
        <label>Health<select value=${filter.health} onChange=${(e) => setFilter({ ...filter, health: e.target.value })}>
          <option value="">Any</option>
          <option value="attention">Needs attention (offline or degraded)</option>
          ${healthOrder.map((k) => html`<option key=${k} value=${k}>${healthText[k]}</option>`)}
        </select></label>
      </div>
      <div class="table-wrap"><table class="connections pinned">
        <thead><tr>${columns.map(([key, label, only]) => html`<th key=${label} class=${only} scope="col"
          aria-sort=${key && sort.column === key ? (sort.ascending ? 'ascending' : 'descending') : undefined}>
          ${key ? html`<button type="button" class="link" onClick=${() => sortBy(key)}>${label}</button>` : label}</th>`)}</tr></thead>
        <tbody>${shown.map((c) => html`<tr key=${c.id} data-connection=${c.cluster_name}>
          <th scope="row">${linked ? html`<a href=${'#/connections/' + encodeURIComponent(c.id)}>${c.cluster_name}</a>` : c.cluster_name}
            <div class="muted">${c.agent_name}</div></th>
          <td><${HealthBadge} connection=${c} now=${now} reasons /></td>
          <td><${Badge} connection=${c} now=${now} /><${AgentRefusedNotice} connection=${c} brief /></td>
          <td class="wide-only"><${Time} iso=${c.last_seen_at} now=${now} none="never" /></td>
          <${Figure} connection=${c} ready=${c.totals.nodes_ready} total=${c.totals.nodes} now=${now} />
          <${Figure} connection=${c} ready=${c.totals.gpus_ready} total=${c.totals.gpu_capacity} now=${now} />
          <td data-gpu-model>${gpuModels(c).map((m) => html`<div key=${m.product}>${m.gpus}× ${m.product}</div>`)}
            ${gpuModels(c).length === 0 && '–'}</td>
          <td class="wide-only">${c.agent_version || '–'}</td>
        </tr>`)}</tbody></table></div>
      ${shown.length === 0 && html`<p>No connection matches.</p>`}`}
  </section>`;
}
