// A node series reply (`…/nodes/{node}/series`, docs/api.md) made ready to draw: the API
// answers one point per step, and a step finer than the node's sampling (30 s steps for a
// node sampled every 60 s) leaves every other point null. Drawn as such, a line breaks at
// every sample and nothing shows. Here the steps where no series has data are left out, and a
// line is broken only where samples are really missing: where two samples are further apart
// than 2.5 times the usual spacing. A point with no neighbour to join is drawn as a dot. No
// imports: the unit tests (tests/web) run this in Node.

const gapFactor = 2.5;

function median(values) {
  if (!values.length) return null;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)];
}

// `series`: [{labels, points: [[t, value|null], ...]}] sharing their times. Returns
// {times, columns, lone, stats}: uPlot's x values and one column per series (null where the
// line breaks), for each series the indices of its lone points, and its {last, min, max}
// (null without data).
export function prepareSeries(series) {
  const times = series.length ? series[0].points.map((p) => p[0]) : [];
  const raw = series.map((s) => s.points.map((p) => (typeof p[1] === 'number' && Number.isFinite(p[1]) ? p[1] : null)));
  const kept = [];
  for (let i = 0; i < times.length; i++) {
    if (raw.some((column) => column[i] !== null)) kept.push(i);
  }
  const spacing = median(kept.slice(1).map((k, j) => times[k] - times[kept[j]]));
  const outTimes = [];
  const columns = raw.map(() => []);
  kept.forEach((index, j) => {
    if (j > 0 && spacing !== null && times[index] - times[kept[j - 1]] > gapFactor * spacing) {
      // A break: one empty step between the two samples.
      outTimes.push((times[index] + times[kept[j - 1]]) / 2);
      columns.forEach((column) => column.push(null));
    }
    outTimes.push(times[index]);
    raw.forEach((column, s) => columns[s].push(column[index]));
  });
  const lone = columns.map((column) => column.reduce((list, value, i) => {
    if (value !== null && (i === 0 || column[i - 1] === null) &&
        (i === column.length - 1 || column[i + 1] === null)) list.push(i);
    return list;
  }, []));
  const stats = columns.map((column) => {
    const values = column.filter((v) => v !== null);
    if (!values.length) return null;
    return { last: values[values.length - 1], min: Math.min(...values), max: Math.max(...values) };
  });
  return { times: outTimes, columns, lone, stats };
}

// The y range a chart draws: 0–100 for percentages; from 0 to a little over the highest
// value for quantities that are never negative; a flat line gets room around it.
export function valueRange(unit, min, max) {
  if (unit === 'percent') return [0, 100];
  const low = Math.min(0, min ?? 0);
  const high = max ?? 1;
  if (high <= low) return [low, low + 1];
  return [low, high * 1.1];
}
