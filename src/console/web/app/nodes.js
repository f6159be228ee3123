// A connection's Nodes tab: the inventory's nodes (sortable, filterable, the name pinned when
// the table scrolls sideways, NotReady and cordoned ones coloured), telemetry from nodes the
// inventory does not list, and one node's charts (uPlot) with legends that need no hovering.
import { h } from 'preact';
import { useEffect, useRef, useState } from 'preact/hooks';
import htm from 'htm';
import uPlot from 'uplot';
import { api } from './api.js';
import { bytes, number, plural, timeZoneLabel } from './format.js';
import { prepareSeries, valueRange } from './series.js';
import { ErrorText, Time } from './ui.js';

const html = htm.bind(h);

const palette = ['#2563eb', '#d97706', '#059669', '#dc2626', '#7c3aed', '#0891b2', '#be185d', '#4d7c0f'];

function ReadyCell({ node }) {
  return node.ready ? html`<span>Ready</span>`
    : html`<span class="badge state-bad" data-node-state="not-ready">NotReady</span>`;
}

function CordonCell({ node }) {
  return node.unschedulable ? html`<span class="badge state-warn" data-node-state="cordoned">cordoned</span>`
    : html`<span class="muted">no</span>`;
}

const nodeColumns = [
  ['name', 'Name', (n) => n.name],
  ['ready', 'Ready', (n) => html`<${ReadyCell} node=${n} />`],
  ['cordoned', 'Cordoned', (n) => html`<${CordonCell} node=${n} />`],
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

function rowClass(node, selected) {
  const classes = [];
  if (selected === node.name) classes.push('selected');
  if (!node.ready) classes.push('node-bad');
  else if (node.unschedulable) classes.push('node-warn');
  return classes.join(' ');
}

export function NodesTable({ nodes, samples, selected, chartsHref, now }) {
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
    <div class="table-wrap"><table class="nodes pinned">
      <thead><tr>${nodeColumns.map(([key, label]) => html`<th key=${key} scope="col"
        aria-sort=${sort.column === key ? (sort.ascending ? 'ascending' : 'descending') : 'none'}>
        <button type="button" class="link" onClick=${() => sortBy(key)}>${label}</button></th>`)}
        <th scope="col">Telemetry</th></tr></thead>
      <tbody>${rows.map((n) => html`<tr key=${n.name} class=${rowClass(n, selected)} data-node=${n.name}>
        ${nodeColumns.map(([key, , cell]) => key === 'name'
          ? html`<th key=${key} scope="row">${cell(n)}</th>` : html`<td key=${key}>${cell(n)}</td>`)}
        <td>${n.sample ? html`<a class="button secondary" href=${chartsHref(n.name)}
            aria-label=${'Show the charts of ' + n.name}>Show</a>
            ${n.sample.stale && html`<div class="muted">last sample <${Time} iso=${n.sample.last_sample_at} now=${now} /></div>`}`
          : html`<span class="muted">no telemetry</span>`}</td>
      </tr>`)}</tbody>
    </table></div>
  </div>`;
}

// Telemetry from node names the inventory does not list (a node agent given another name, or
// a node outside the selector): shown, never dropped.
export function UnknownNodes({ nodes, samples, chartsHref, now }) {
  const known = new Set(nodes.map((n) => n.name));
  const unknown = (samples || []).filter((s) => !known.has(s.node));
  if (unknown.length === 0) return null;
  return html`<section class="unknown-nodes" aria-labelledby="unknown-title">
    <h3 id="unknown-title">Telemetry from nodes the inventory does not list</h3>
    <p class="muted">The inventory lists the nodes that match its selector; these names sent
      node samples all the same (a node agent started with another name, or a node outside the
      selector).</p>
    <ul>${unknown.map((s) => html`<li key=${s.node} data-unknown-node=${s.node}>
      Received from unknown node <strong>${s.node}</strong>, last sample <${Time} iso=${s.last_sample_at} now=${now} />
      ${' '}<a class="button secondary" href=${chartsHref(s.node)} aria-label=${'Show the charts of ' + s.node}>Show</a>
    </li>`)}</ul>
  </section>`;
}

const ranges = [['1h', 'Last hour'], ['6h', '6 hours'], ['24h', '24 hours'], ['7d', '7 days']];

// The legend, shown without hovering: per series its colour and name, then its last, min and
// max in the range, as a table; more than four series go in two groups side by side when the
// chart is wide enough, so 8 GPUs take 4 rows.
function Legend({ entries, format, width }) {
  const groups = entries.length > 4 && width >= 520 ? 2 : 1;
  const rows = Math.ceil(entries.length / groups);
  const describe = (e) => (e.stats ? e.label + ': last ' + format(e.stats.last) + ', min ' +
    format(e.stats.min) + ', max ' + format(e.stats.max) : e.label + ': no data');
  const cells = (e) => (e ? html`
    <th scope="row" class="series-name" data-series=${e.label} title=${describe(e)}>
      <span class="swatch" style=${{ background: e.color }}></span>${e.label}</th>
    ${e.stats ? html`<td><b>${format(e.stats.last)}</b></td><td>${format(e.stats.min)}</td><td>${format(e.stats.max)}</td>`
      : html`<td colspan="3" class="muted">no data</td>`}` : html`<td colspan="4"></td>`);
  return html`<table class="legend">
    <thead><tr>${Array.from({ length: groups }, (_, g) => html`<th key=${g} scope="col"><span class="sr-only">series</span></th>
      <th scope="col">last</th><th scope="col">min</th><th scope="col">max</th>`)}</tr></thead>
    <tbody>${Array.from({ length: rows }, (_, r) => html`<tr key=${r}>
      ${Array.from({ length: groups }, (_, g) => cells(entries[g * rows + r]))}</tr>`)}</tbody>
  </table>`;
}

// One metric's chart over the chosen range (the whole range on the time axis, so the charts of
// a node line up and a lone sample sits where it was taken), with its legend; without data, a
// line saying so instead of empty axes. `rate`: the figure needs two samples.
function Chart({ connectionId, node, metric, title, since, format, unit, rate, tick }) {
  const target = useRef(null);
  const [error, setError] = useState(null);
  const [shown, setShown] = useState(null);  // {entries, points, range}
  const [width, setWidth] = useState(0);
  useEffect(() => {
    let plot = null;
    let live = true;
    let observer = null;
    const box = target.current;
    const path = '/api/v1/connections/' + encodeURIComponent(connectionId) + '/nodes/' +
      encodeURIComponent(node) + '/series?metric=' + metric + '&since=' + since;
    api('GET', path).then((reply) => {
      if (!live) return;
      const series = reply.series || [];
      const prepared = prepareSeries(series);
      const all = prepared.stats.filter(Boolean);
      const range = valueRange(unit, all.length ? Math.min(...all.map((s) => s.min)) : null,
                               all.length ? Math.max(...all.map((s) => s.max)) : null);
      const label = (s) => (s.labels && s.labels.gpu !== undefined ? 'GPU ' + s.labels.gpu : title);
      const entries = series.map((s, i) => ({ label: label(s), color: palette[i % palette.length], stats: prepared.stats[i] }));
      const points = prepared.columns.reduce((n, c) => n + c.filter((v) => v !== null).length, 0);
      setShown({ entries, points, range });
      if (points === 0) return;
      const steps = series[0].points;
      const span = [steps[0][0], Math.max(steps[steps.length - 1][0] + (reply.step_seconds || 0), Date.now() / 1000)];
      const width = () => Math.max(260, box.clientWidth || 600);
      plot = new uPlot({
        width: width(),
        height: 190,
        legend: { show: false },
        scales: { x: { time: true, range: () => span }, y: { range: () => range } },
        series: [{}, ...series.map((s, i) => ({
          label: label(s),
          stroke: palette[i % palette.length],
          width: 2,
          // Only the samples with no neighbour to join are dots; the rest is the line.
          points: { show: false, filter: () => (prepared.lone[i].length ? prepared.lone[i] : null), size: 7,
                    fill: palette[i % palette.length] },
        }))],
        axes: [{}, { values: (u, values) => values.map(format), size: 96 }],
      }, [prepared.times, ...prepared.columns], box);
      // The chart follows its box's width (a window resized, a narrower layout).
      observer = new ResizeObserver(() => {
        if (!live) return;
        plot.setSize({ width: width(), height: 190 });
        setWidth(box.clientWidth);
      });
      observer.observe(box);
    }, (e) => live && setError(e));
    return () => {
      live = false;
      if (observer) observer.disconnect();
      if (plot) plot.destroy();
    };
  }, [connectionId, node, metric, since, tick]);
  const empty = shown && shown.points === 0;
  return html`<figure class="chart" data-metric=${metric} data-points=${shown ? shown.points : undefined}
      data-y-min=${shown ? shown.range[0] : undefined} data-y-max=${shown ? shown.range[1] : undefined}>
    <figcaption>${title}${empty ? ' (no data in this range)' : ''}</figcaption>
    <${ErrorText} error=${error} />
    <div class=${empty ? 'plot empty' : 'plot'} ref=${target}>${empty && html`<p class="muted">${rate
      ? 'Nothing to draw yet: a rate needs two samples of the node, which its agent takes every 30 s by default.'
      : 'No samples of this node in the range.'}</p>`}</div>
    ${shown && !empty && html`<${Legend} entries=${shown.entries} format=${format} width=${width} />`}
  </figure>`;
}

// Why a node has no GPU charts: its agent found no GPU (gpu_source "none": no NVIDIA driver),
// or the GPU collector is off.
function noGpuText(sample) {
  if (sample.gpu_source === 'none') return 'No GPUs: this node\u2019s agent found no NVIDIA driver, so there is nothing to chart.';
  if (!sample.gpu_source) return 'No GPU figures: the GPU collector is not in this node\u2019s collection plan.';
  return 'No GPUs: this node\u2019s agent reports none.';
}

// Drawn again every 30 s, as samples arrive.
const chartRefresh = 30000;

export function NodeCharts({ connectionId, node, sample, closeHref }) {
  const [since, setSince] = useState('1h');
  const [tick, setTick] = useState(0);
  useEffect(() => {
    const timer = setInterval(() => setTick((t) => t + 1), chartRefresh);
    return () => clearInterval(timer);
  }, []);
  const section = useRef(null);
  useEffect(() => {
    section.current.scrollIntoView({ block: 'start' });
    section.current.focus({ preventScroll: true });
  }, [node]);
  const percent = (v) => number(v, 0) + ' %';
  const perSecond = (v) => bytes(v) + '/s';
  const chart = (metric, title, format, unit) => html`<${Chart} key=${metric + since} connectionId=${connectionId}
    node=${node} metric=${metric} title=${title} since=${since} format=${format} unit=${unit} tick=${tick}
    rate=${metric === 'cpu_percent' || metric.endsWith('_per_second')} />`;
  const gpus = sample && sample.gpus ? sample.gpus.length : 0;
  return html`<section class="node-charts" aria-labelledby="charts-title" ref=${section} tabindex="-1">
    <div class="charts-head">
      <h2 id="charts-title">Node ${node}</h2>
      <a class="button secondary" href=${closeHref}>Close charts</a>
    </div>
    <div class="row">
      <label class="inline">Range <select value=${since} onChange=${(e) => setSince(e.target.value)}>
        ${ranges.map(([value, label]) => html`<option key=${value} value=${value}>${label}</option>`)}
      </select></label>
      <span class="muted" data-timezone>Times in ${timeZoneLabel()}</span>
    </div>
    <div class="charts">
      ${chart('cpu_percent', 'CPU busy', percent, 'percent')}
      ${chart('memory_used_bytes', 'Memory used', bytes, 'bytes')}
      ${chart('network_receive_bytes_per_second', 'Network receive', perSecond, 'bytes_per_second')}
      ${chart('network_transmit_bytes_per_second', 'Network transmit', perSecond, 'bytes_per_second')}
      ${chart('disk_read_bytes_per_second', 'Disk read', perSecond, 'bytes_per_second')}
      ${chart('disk_written_bytes_per_second', 'Disk write', perSecond, 'bytes_per_second')}
    </div>
    ${gpus === 0 && sample ? html`<p class="notice" data-no-gpus>${noGpuText(sample)}</p>`
      : html`<h3>${plural(gpus, 'GPU')}</h3><div class="charts">
        ${chart('gpu_utilization_percent', 'GPU utilisation', percent, 'percent')}
        ${chart('gpu_memory_used_bytes', 'GPU memory used', bytes, 'bytes')}
        ${chart('gpu_temperature_celsius', 'GPU temperature', (v) => number(v, 0) + ' °C', 'celsius')}
        ${chart('gpu_power_watts', 'GPU power', (v) => number(v, 0) + ' W', 'watts')}
      </div>`}
  </section>`;
}
