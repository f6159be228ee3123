// A connection's Workloads tab, from the cluster role's latest snapshot: pods with problems
// first and counts by status, workloads not fully available, Warning events (open), pod
// right-sizing, and the snapshot's kubectl output as text.
import { h } from 'preact';
import htm from 'htm';
import { plural } from './format.js';
import { podsOverview, unavailableWorkloads, warningEvents } from './kubetable.js';
import { RightSizing } from './rightsizing.js';
import { Time } from './ui.js';

const html = htm.bind(h);

const maxPodRows = 200;

function statusClass(status) {
  if (status === 'Running' || status === 'Completed' || status === 'Succeeded') return 'badge state-ok';
  if (status === 'Pending' || status === 'ContainerCreating' || status === 'Terminating') return 'badge state-warn';
  return 'badge state-bad';
}

// What the Overview says of the snapshot: {problems, pods, events} or null without one.
export function workloadCounts(snapshot) {
  if (!snapshot) return null;
  const pods = podsOverview(snapshot.results);
  return { pods: pods.pods.length, problems: pods.problems, events: warningEvents(snapshot.results).events.length };
}

function Pods({ overview }) {
  const { pods, byStatus, problems } = overview;
  if (pods.length === 0) return html`<p>No pods in the chosen namespaces.</p>`;
  return html`<div>
    <p class="totals" data-pod-counts>
      <span>${plural(pods.length, 'pod')}:</span>
      ${byStatus.map(([status, count]) => html`<span key=${status} class=${statusClass(status)}>${count} ${status}</span>`)}
    </p>
    ${problems > 0 && html`<p><strong>${plural(problems, 'pod needs', 'pods need')} looking at</strong>; they come first.</p>`}
    <div class="table-wrap"><table class="pods pinned">
      <thead><tr><th scope="col">Pod</th><th scope="col">Status</th><th scope="col">Ready</th>
        <th scope="col">Restarts</th><th scope="col">Age</th><th scope="col">Node</th></tr></thead>
      <tbody>${pods.slice(0, maxPodRows).map((p) => html`<tr key=${p.namespace + '/' + p.name}
          data-pod=${p.namespace + '/' + p.name} data-problem=${p.problem ? 'yes' : 'no'} class=${p.problem ? 'node-bad' : ''}>
        <th scope="row"><span class="muted">${p.namespace ? p.namespace + '/' : ''}</span>${p.name}</th>
        <td><span class=${statusClass(p.status)}>${p.status || '?'}</span>
          ${p.problem && p.problem !== p.status && html`<div class="muted">${p.problem}</div>`}</td>
        <td>${p.ready}</td><td class="number">${p.restartsText}</td><td>${p.age}</td><td>${p.node}</td>
      </tr>`)}</tbody></table></div>
    ${pods.length > maxPodRows && html`<p class="muted">${pods.length - maxPodRows} more pods are in the raw output below.</p>`}
  </div>`;
}

function Events({ events }) {
  return html`<details class="events" open=${events.length > 0} data-warning-events=${events.length}>
    <summary><strong>${plural(events.length, 'Warning event')}</strong></summary>
    ${events.length === 0 ? html`<p class="muted">None in the chosen namespaces.</p>` : html`<div class="table-wrap"><table class="events">
      <thead><tr><th scope="col">Last seen</th><th scope="col">Reason</th><th scope="col">Object</th><th scope="col">Message</th></tr></thead>
      <tbody>${events.map((e, i) => html`<tr key=${i}>
        <td>${e.lastSeen}</td><td><span class="badge state-warn">${e.reason}</span></td>
        <td><span class="muted">${e.namespace ? e.namespace + '/' : ''}</span>${e.object}</td><td class="message">${e.message}</td>
      </tr>`)}</tbody></table></div>`}
  </details>`;
}

// The snapshot's kubectl output, each result as text.
function RawOutput({ snapshot, now }) {
  return html`<details class="raw" aria-labelledby="cluster-title">
    <summary><h3 id="cluster-title">Cluster view: the snapshot's kubectl output</h3></summary>
    <p class="muted">Collected <${Time} iso=${snapshot.collected_at} now=${now} /></p>
    ${snapshot.results.map((r, i) => html`<details key=${i} class="result" open=${i < 3}>
      <summary>${r.name} <code>${(r.argv || []).join(' ')}</code>
        ${r.error ? ' – ' + r.error.code : r.exit_code ? ' – exit ' + r.exit_code : ''}</summary>
      <pre class="output">${r.error ? r.error.message : (r.stdout || '') + (r.stderr ? '\n' + r.stderr : '')}</pre>
    </details>`)}
  </details>`;
}

export function WorkloadsTab({ connectionId, snapshot, snapshotError, now }) {
  if (!snapshot) {
    return html`<section>
      <h2>Workloads</h2>
      <p>${snapshotError && snapshotError.code !== 'no_snapshot' ? snapshotError.message
        : 'No cluster snapshot yet: the cluster agent sends one every 30 s once it runs.'}</p>
    </section>`;
  }
  const overview = podsOverview(snapshot.results);
  const unavailable = unavailableWorkloads(snapshot.results);
  const { events } = warningEvents(snapshot.results);
  return html`<section aria-labelledby="workloads-title">
    <h2 id="workloads-title">Workloads</h2>
    <p class="muted">From the cluster agent's snapshot, collected <${Time} iso=${snapshot.collected_at} now=${now} />.</p>
    <${Pods} overview=${overview} />
    ${unavailable.length > 0 && html`<h3>Not fully available</h3><ul class="unavailable">
      ${unavailable.map((w) => html`<li key=${w.kind + w.namespace + w.name}>${w.kind} <span class="muted">${w.namespace ? w.namespace + '/' : ''}</span>${w.name}: ${w.ready} ready</li>`)}</ul>`}
    <${Events} events=${events} />
    <${RightSizing} connectionId=${connectionId} />
    <${RawOutput} snapshot=${snapshot} now=${now} />
  </section>`;
}
