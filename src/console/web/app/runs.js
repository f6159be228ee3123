// A connection's ML experiment runs (MLflow, W&B): the list with filters, one run with its
// params, tags, latest metrics and metric-history charts, and two or more runs' metric on one
// chart. Everything is rendered as text; charts are uPlot, as the node charts.
import { h } from 'preact';
import { useEffect, useRef, useState } from 'preact/hooks';
import htm from 'htm';
import uPlot from 'uplot';
import { api } from './api.js';
import { ErrorText, Time, usePageTitle, usePoll } from './ui.js';

const html = htm.bind(h);

const statuses = ['running', 'scheduled', 'finished', 'failed', 'killed', 'crashed', 'unknown'];
const palette = ['#2563eb', '#d97706', '#059669', '#dc2626', '#7c3aed', '#0891b2', '#be185d', '#4d7c0f'];

function runsPath(connectionId) {
  return '/api/v1/connections/' + encodeURIComponent(connectionId) + '/runs';
}

function runHref(connectionId, runId) {
  return '#/connections/' + encodeURIComponent(connectionId) + '/runs/' + encodeURIComponent(runId);
}

// A metric value as the API gives it: a number, or "NaN"/"Infinity"/"-Infinity".
function metricText(value) {
  if (typeof value !== 'number') return String(value);
  if (Number.isInteger(value)) return String(value);
  const abs = Math.abs(value);
  return abs !== 0 && (abs < 1e-3 || abs >= 1e6) ? value.toExponential(4) : String(Number(value.toPrecision(6)));
}

function chartValue(value) {
  return typeof value === 'number' ? value : null;
}

export function duration(run) {
  const s = run.duration_seconds;
  if (s === null || s === undefined) return run.status === 'running' ? 'running' : '–';
  if (s < 60) return s.toFixed(s < 10 ? 2 : 0) + ' s';
  if (s < 3600) return Math.floor(s / 60) + ' min ' + String(Math.floor(s % 60)).padStart(2, '0') + ' s';
  return Math.floor(s / 3600) + ' h ' + String(Math.floor((s / 60) % 60)).padStart(2, '0') + ' min';
}

export function RunStatus({ run }) {
  let text = run.status;
  if (run.exit_code !== null && run.exit_code !== undefined && run.exit_code !== 0) {
    text += ' (exit ' + run.exit_code + ')';
  }
  return html`<span class=${'badge run-' + run.status} data-run-status=${run.status}>${text}</span>`;
}

function Source({ run }) {
  return html`<span>${run.source === 'wandb' ? 'W&B' : run.source === 'mlflow' ? 'MLflow' : run.source || '–'}
    ${run.offline && html` <span class="tag" title="logged offline: never synced to W&B's servers">offline</span>`}</span>`;
}

// One chart of one or more series over steps: `series` is [{label, points: [[step, value]]}].
function StepChart({ title, series, id }) {
  const target = useRef(null);
  useEffect(() => {
    const steps = [...new Set(series.flatMap((s) => s.points.map((p) => p[0])))].sort((a, b) => a - b);
    const index = new Map(steps.map((step, i) => [step, i]));
    const columns = series.map((s) => {
      const column = new Array(steps.length).fill(null);
      for (const [step, value] of s.points) column[index.get(step)] = chartValue(value);
      return column;
    });
    const width = Math.max(280, Math.min(640, target.current.clientWidth || 640));
    const plot = new uPlot({
      width,
      height: 220,
      scales: { x: { time: false } },
      series: [{ label: 'step' }, ...series.map((s, i) => ({
        label: s.label,
        stroke: palette[i % palette.length],
        width: 2,
        spanGaps: true,
        points: { show: steps.length <= 60 },
        value: (u, v) => (v === null ? '–' : metricText(v)),
      }))],
      axes: [{ label: 'step' }, { values: (u, values) => values.map(metricText), size: 72 }],
    }, [steps, ...columns], target.current);
    return () => plot.destroy();
  }, [JSON.stringify(series)]);
  return html`<figure class="chart" data-metric=${id}>
    <figcaption>${title}</figcaption>
    <div ref=${target}></div>
  </figure>`;
}

function Problems({ problems }) {
  if (!problems || problems.length === 0) return null;
  return html`<details class="problems" open>
    <summary class="warning">${problems.length} run${problems.length === 1 ? '' : 's'} or file${problems.length === 1 ? '' : 's'} the agent could not read (skipped until they change)</summary>
    <div class="table-wrap"><table class="problems">
      <thead><tr><th scope="col">Source</th><th scope="col">Where</th><th scope="col">Why</th><th scope="col">Reported</th></tr></thead>
      <tbody>${problems.map((p, i) => html`<tr key=${i}>
        <td>${p.source}</td><td><code>${p.location}</code></td><td>${p.error}</td><td><${Time} iso=${p.reported_at} /></td>
      </tr>`)}</tbody></table></div>
  </details>`;
}

// Two or more runs' chosen metric on one chart.
function Compare({ connectionId, runIds, onClear }) {
  const [details, setDetails] = useState([]);
  const [error, setError] = useState(null);
  const [metric, setMetric] = useState('');
  useEffect(() => {
    let live = true;
    Promise.all(runIds.map((id) => api('GET', runsPath(connectionId) + '/' + encodeURIComponent(id) + '?points=1000')))
      .then((runs) => live && setDetails(runs), (e) => live && setError(e));
    return () => { live = false; };
  }, [connectionId, runIds.join(',')]);
  const metrics = [...new Set(details.flatMap((r) => Object.keys(r.history || {})))].sort();
  const chosen = metrics.includes(metric) ? metric : metrics[0] || '';
  const series = details
    .filter((r) => r.history && r.history[chosen])
    .map((r) => ({ label: r.name || r.run_id, points: r.history[chosen].map((p) => [p[0], p[1]]) }));
  return html`<section class="compare" aria-labelledby="compare-title">
    <h2 id="compare-title">Compare ${runIds.length} runs</h2>
    <${ErrorText} error=${error} />
    <div class="row">
      <label class="inline">Metric <select value=${chosen} onChange=${(e) => setMetric(e.target.value)}>
        ${metrics.map((m) => html`<option key=${m} value=${m}>${m}</option>`)}
      </select></label>
      <button type="button" class="secondary" onClick=${onClear}>Clear selection</button>
    </div>
    ${details.length > 0 && metrics.length === 0 && html`<p>These runs have no metrics.</p>`}
    ${series.length > 0 && html`<${StepChart} id=${'compare-' + chosen} title=${chosen} series=${series} />`}
    ${details.length > 0 && series.length < details.length && chosen &&
      html`<p class="muted">${details.length - series.length} of the selected runs have no ${chosen}.</p>`}
  </section>`;
}

export function RunsPage({ connectionId }) {
  usePageTitle('Experiment runs');
  const [filters, setFilters] = useState({ experiment: '', status: '', user: '' });
  const [text, setText] = useState('');
  const [selected, setSelected] = useState([]);
  const [more, setMore] = useState([]);
  const [next, setNext] = useState(null);
  const query = Object.entries(filters).filter(([, v]) => v)
    .map(([k, v]) => k + '=' + encodeURIComponent(v)).join('&');
  const { data, error } = usePoll(() => api('GET', runsPath(connectionId) + '?limit=100' + (query ? '&' + query : '')),
    15000, [connectionId, query]);
  const { data: connection } = usePoll(() => api('GET', '/api/v1/connections/' + encodeURIComponent(connectionId)), 0, [connectionId]);
  useEffect(() => { setMore([]); setNext(null); }, [query]);
  const loadMore = async () => {
    const after = next || (data && data.next_after);
    if (!after) return;
    const page = await api('GET', runsPath(connectionId) + '?limit=100&after=' + encodeURIComponent(after) + (query ? '&' + query : ''));
    setMore((m) => [...m, ...page.runs]);
    setNext(page.next_after || '');
  };
  const set = (key) => (e) => setFilters((f) => ({ ...f, [key]: e.target.value }));
  const toggle = (id) => setSelected((s) => (s.includes(id) ? s.filter((x) => x !== id) : [...s, id]));
  const needle = text.toLowerCase();
  const runs = data ? [...data.runs, ...more].filter((r) => !needle ||
    (r.name || '').toLowerCase().includes(needle) || r.run_id.toLowerCase().includes(needle)) : [];
  const hasMore = next === null ? data && data.next_after : next;
  const counts = data ? Object.fromEntries(data.statuses.map((s) => [s.name, s.runs])) : {};
  const total = data ? data.statuses.reduce((sum, s) => sum + s.runs, 0) : 0;
  return html`<section>
    <p class="crumbs"><a href=${'#/connections/' + encodeURIComponent(connectionId)}>${connection ? connection.cluster_name : 'Connection'}</a> ›</p>
    <h1>Experiment runs</h1>
    <${ErrorText} error=${error} />
    ${data && total === 0 && !query && html`<p>No runs yet. The agent's experiments role reports MLflow and
      Weights &amp; Biases runs once it is installed with <code>config.enableMlflow</code> or
      <code>config.enableWandb</code> and a place to scan.</p>`}
    ${data && total > 0 && html`<p class="summary" aria-label="Run counts by state">${statuses.filter((s) => counts[s])
      .map((s) => html`<span key=${s} class=${'badge run-' + s}>${counts[s]} ${s}</span> `)}</p>`}
    <${Problems} problems=${data && data.problems} />
    <div class="row filters">
      <label>Experiment<select value=${filters.experiment} onChange=${set('experiment')}>
        <option value="">All experiments</option>
        ${(data ? data.experiments : []).map((e) => html`<option key=${e.name} value=${e.name}>${e.name || '(none)'} (${e.runs})</option>`)}
      </select></label>
      <label>Status<select value=${filters.status} onChange=${set('status')}>
        <option value="">Any status</option>
        ${statuses.map((s) => html`<option key=${s} value=${s}>${s}</option>`)}
      </select></label>
      <label>User<select value=${filters.user} onChange=${set('user')}>
        <option value="">Any user</option>
        ${(data ? data.users : []).map((u) => html`<option key=${u.name} value=${u.name}>${u.name || '(none)'} (${u.runs})</option>`)}
      </select></label>
      <label>Search<input type="search" value=${text} placeholder="run name or id" onInput=${(e) => setText(e.target.value)} /></label>
    </div>
    ${selected.length >= 2 ? html`<${Compare} connectionId=${connectionId} runIds=${selected} onClear=${() => setSelected([])} />`
      : runs.length > 1 && html`<p class="muted">Tick two or more runs to compare a metric on one chart.</p>`}
    ${data && runs.length === 0 && total > 0 && html`<p>No runs match.</p>`}
    ${runs.length > 0 && html`<div class="table-wrap"><table class="runs">
      <thead><tr><th scope="col"><span class="sr-only">Compare</span></th><th scope="col">Run</th>
        <th scope="col">Experiment</th><th scope="col">Status</th><th scope="col">User</th>
        <th scope="col">Started</th><th scope="col">Duration</th><th scope="col">Metrics</th><th scope="col">Source</th></tr></thead>
      <tbody>${runs.map((r) => html`<tr key=${r.run_id} data-run=${r.run_id} class=${selected.includes(r.run_id) ? 'selected' : ''}>
        <td><input type="checkbox" aria-label=${'compare ' + (r.name || r.run_id)} checked=${selected.includes(r.run_id)}
          onChange=${() => toggle(r.run_id)} /></td>
        <td><a href=${runHref(connectionId, r.run_id)}>${r.name || r.run_id}</a>
          ${r.name && r.name !== r.run_id && html`<div class="muted mono">${r.run_id}</div>`}</td>
        <td>${r.experiment || '–'}</td>
        <td><${RunStatus} run=${r} /></td>
        <td>${r.user || '–'}</td>
        <td><${Time} iso=${r.started_at} /></td>
        <td>${duration(r)}</td>
        <td>${r.metric_count}</td>
        <td><${Source} run=${r} /></td>
      </tr>`)}</tbody></table></div>`}
    ${hasMore && html`<button type="button" class="secondary" onClick=${loadMore}>Load more runs</button>`}
  </section>`;
}

function KeyValues({ title, values, redacted, prefix }) {
  const entries = Object.entries(values || {});
  return html`<section aria-label=${title}>
    <h2>${title}</h2>
    ${entries.length === 0 ? html`<p class="muted">None.</p>` : html`<div class="table-wrap"><table class="key-values">
      <tbody>${entries.map(([k, v]) => html`<tr key=${k}>
        <th scope="row"><code>${k}</code></th>
        <td class=${redacted.includes(prefix + k) ? 'redacted' : ''}>${typeof v === 'number' ? metricText(v) : String(v)}
          ${redacted.includes(prefix + k) && html` <span class="tag" title="removed by the agent: it looks like a credential">redacted</span>`}</td>
      </tr>`)}</tbody></table></div>`}
  </section>`;
}

export function RunPage({ connectionId, runId }) {
  usePageTitle('Run ' + runId);
  const { data: run, error } = usePoll(
    () => api('GET', runsPath(connectionId) + '/' + encodeURIComponent(runId) + '?points=1000'), 15000,
    [connectionId, runId]);
  const { data: connection } = usePoll(() => api('GET', '/api/v1/connections/' + encodeURIComponent(connectionId)), 0, [connectionId]);
  const crumbs = html`<p class="crumbs"><a href=${'#/connections/' + encodeURIComponent(connectionId)}>${connection ? connection.cluster_name : 'Connection'}</a>${' › '}
    <a href=${'#/connections/' + encodeURIComponent(connectionId) + '/runs'}>Experiment runs</a>${' ›'}</p>`;
  if (!run) return html`<section>${crumbs}<h1>Run</h1><${ErrorText} error=${error} /></section>`;
  const redacted = run.redacted || [];
  return html`<section>
    ${crumbs}
    <h1>${run.name || run.run_id} <${RunStatus} run=${run} /></h1>
    <${ErrorText} error=${error} />
    <dl class="facts">
      <dt>Run</dt><dd><code>${run.run_id}</code></dd>
      <dt>Experiment</dt><dd>${run.experiment || '–'}</dd>
      <dt>User</dt><dd>${run.user || '–'}</dd>
      <dt>Started</dt><dd><${Time} iso=${run.started_at} /></dd>
      <dt>Ended</dt><dd><${Time} iso=${run.ended_at} /></dd>
      <dt>Duration</dt><dd>${duration(run)}</dd>
      <dt>Source</dt><dd><${Source} run=${run} /> <code>${run.location}</code></dd>
      <dt>Last update</dt><dd><${Time} iso=${run.updated_at} /></dd>
    </dl>
    ${redacted.length > 0 && html`<p class="notice">${redacted.length} value${redacted.length === 1 ? ' was' : 's were'} removed
      by the agent before ${redacted.length === 1 ? 'it' : 'they'} left the cluster, because ${redacted.length === 1 ? 'it looks' : 'they look'} like
      credentials: ${redacted.join(', ')}.</p>`}
    <h2>Metrics</h2>
    ${run.metrics.length === 0 ? html`<p class="muted">No metrics logged.</p>` : html`<div class="table-wrap"><table class="metrics">
      <thead><tr><th scope="col">Metric</th><th scope="col">Latest</th><th scope="col">Step</th><th scope="col">Points</th></tr></thead>
      <tbody>${run.metrics.map((m) => html`<tr key=${m.key}>
        <td><code>${m.key}</code></td><td class="number">${metricText(m.value)}</td><td class="number">${m.step}</td><td class="number">${m.points}</td>
      </tr>`)}</tbody></table></div>
      <div class="charts">${run.metrics.map((m) => html`<${StepChart} key=${m.key} id=${m.key}
        title=${m.key + (run.history[m.key] && run.history[m.key].length < m.points ? ' (every ' + Math.ceil(m.points / run.history[m.key].length) + 'th point)' : '')}
        series=${[{ label: m.key, points: (run.history[m.key] || []).map((p) => [p[0], p[1]]) }]} />`)}</div>`}
    <${KeyValues} title="Params" values=${run.params} redacted=${redacted} prefix="params." />
    <${KeyValues} title="Summary" values=${run.summary} redacted=${redacted} prefix="summary." />
    <${KeyValues} title="Tags" values=${run.tags} redacted=${redacted} prefix="tags." />
  </section>`;
}
