// kubectl's table output (`get pods -o wide`, `get events`, `get deployments`) read back into
// rows, for the Workloads tab. The text comes from the cluster, so anything may be in it: a
// line that does not fit the header is kept whole rather than guessed at, sizes are bounded,
// and nothing here ever becomes markup (the pages render it as text). No imports: the unit
// tests (tests/web) run this in Node.

const maxLines = 20000;
const maxLineChars = 4096;

// kubectl pads columns with at least three spaces; a header name has at most one space
// inside ("LAST SEEN", "NOMINATED NODE").
function headerColumns(header) {
  const columns = [];
  const pattern = /\S+(?: \S+)*/g;
  for (let match = pattern.exec(header); match; match = pattern.exec(header)) {
    columns.push({ name: match[0], start: match.index });
  }
  return columns;
}

// The cells of `line` under `columns`; null when the line does not line up with the header
// (a cell boundary inside a word), which happens only with text kubectl did not align.
function cellsAt(line, columns) {
  const cells = [];
  for (let i = 0; i < columns.length; i++) {
    const start = columns[i].start;
    const end = i + 1 < columns.length ? columns[i + 1].start : line.length;
    if (start > 0 && start < line.length && line[start - 1] !== ' ') return null;
    cells.push(line.slice(start, Math.max(start, end)).trim());
  }
  return cells;
}

// {columns: [names], rows: [{NAME: value, ...}], unparsed: [lines]} from a kubectl table; null
// when `text` has no header line in capitals.
export function parseTable(text) {
  if (typeof text !== 'string') return null;
  const lines = text.split('\n', maxLines).map((l) => l.replace(/\r$/, '').replace(/\t/g, ' '));
  while (lines.length && !lines[0].trim()) lines.shift();
  if (!lines.length || lines[0].length > maxLineChars || !/^[A-Z][A-Z0-9() -]*$/.test(lines[0].trim())) {
    return null;
  }
  const columns = headerColumns(lines[0]);
  const rows = [];
  const unparsed = [];
  for (const line of lines.slice(1)) {
    if (!line.trim()) continue;
    const cells = line.length <= maxLineChars ? cellsAt(line, columns) : null;
    if (!cells || !cells[0]) {
      unparsed.push(line.slice(0, maxLineChars));
      continue;
    }
    const row = {};
    columns.forEach((c, i) => { row[c.name] = cells[i]; });
    rows.push(row);
  }
  return { columns: columns.map((c) => c.name), rows, unparsed };
}

// The rows of every snapshot result whose name is `kind` or `kind/NAMESPACE`, with NAMESPACE
// filled in from the result's name when kubectl ran with -n.
export function snapshotRows(results, kind) {
  const rows = [];
  const unparsed = [];
  for (const result of results || []) {
    if (typeof result.name !== 'string') continue;
    const [name, namespace] = result.name.split('/', 2);
    if (name !== kind || result.error || result.exit_code) continue;
    const table = parseTable(result.stdout);
    if (!table) continue;
    for (const row of table.rows) rows.push({ NAMESPACE: namespace || '', ...row });
    unparsed.push(...table.unparsed);
  }
  return { rows, unparsed };
}

const fine = new Set(['Running', 'Completed', 'Succeeded']);

// "2/3" → [2, 3]; null for anything else.
export function readyCount(text) {
  const match = /^(\d{1,6})\/(\d{1,6})$/.exec(text || '');
  return match ? [Number(match[1]), Number(match[2])] : null;
}

// "3 (2m ago)" → 3; 0 for anything else.
export function restartCount(text) {
  const match = /^(\d{1,9})/.exec(text || '');
  return match ? Number(match[1]) : 0;
}

// Why a pod needs looking at, or null: its status is not Running, Completed or Succeeded, or
// it runs with containers not ready.
export function podProblem(pod) {
  const status = pod.STATUS || '';
  if (!fine.has(status)) return status || 'unknown status';
  const ready = readyCount(pod.READY);
  if (status === 'Running' && ready && ready[0] < ready[1]) return 'not ready (' + pod.READY + ')';
  return null;
}

// The pods of a snapshot, problems first (then by restarts, namespace, name), with counts by
// status: {pods: [{namespace, name, ready, status, restarts, age, node, problem}], byStatus:
// [[status, count]], problems, unparsed}.
export function podsOverview(results) {
  const { rows, unparsed } = snapshotRows(results, 'pods');
  const pods = rows.map((r) => ({
    namespace: r.NAMESPACE, name: r.NAME, ready: r.READY || '', status: r.STATUS || '',
    restarts: restartCount(r.RESTARTS), restartsText: r.RESTARTS || '', age: r.AGE || '',
    node: r.NODE || '', problem: podProblem(r),
  }));
  pods.sort((a, b) => (a.problem ? 0 : 1) - (b.problem ? 0 : 1) || b.restarts - a.restarts ||
    a.namespace.localeCompare(b.namespace) || a.name.localeCompare(b.name));
  const counts = new Map();
  for (const pod of pods) counts.set(pod.status, (counts.get(pod.status) || 0) + 1);
  const byStatus = [...counts].sort((a, b) => (fine.has(a[0]) ? 1 : 0) - (fine.has(b[0]) ? 1 : 0) || b[1] - a[1]);
  return { pods, byStatus, problems: pods.filter((p) => p.problem).length, unparsed };
}

// Warning events, as `kubectl get events --field-selector type=Warning` lists them.
export function warningEvents(results) {
  const { rows, unparsed } = snapshotRows(results, 'warning_events');
  return {
    events: rows.map((r) => ({
      namespace: r.NAMESPACE, lastSeen: r['LAST SEEN'] || '', reason: r.REASON || '',
      object: r.OBJECT || '', message: r.MESSAGE || '',
    })),
    unparsed,
  };
}

// Deployments and statefulsets whose READY says fewer than wanted.
export function unavailableWorkloads(results) {
  const out = [];
  for (const kind of ['deployments', 'statefulsets']) {
    for (const row of snapshotRows(results, kind).rows) {
      const ready = readyCount(row.READY);
      if (ready && ready[0] < ready[1]) {
        out.push({ kind: kind === 'deployments' ? 'deployment' : 'statefulset',
                   namespace: row.NAMESPACE, name: row.NAME, ready: row.READY });
      }
    }
  }
  return out;
}
