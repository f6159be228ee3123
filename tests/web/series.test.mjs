// Chart data (src/console/web/app/series.js): a series sampled more coarsely than the API's
// step still draws as a line, breaks only where samples are missing, and a lone sample shows.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { prepareSeries, valueRange } from '../../src/console/web/app/series.js';

// 30 s steps over an hour, a value every other step: a node sampled every 60 s.
function everyOtherStep(from = 0, steps = 120) {
  return Array.from({ length: steps }, (_, i) => [from + i * 30, i % 2 === 0 ? 40 + (i % 7) : null]);
}

test('a series sampled every 60 s on 30 s steps is one unbroken line', () => {
  const { times, columns, lone, stats } = prepareSeries([{ labels: {}, points: everyOtherStep() }]);
  assert.equal(times.length, 60);
  assert.equal(columns[0].filter((v) => v === null).length, 0);
  assert.deepEqual(lone, [[]]);
  assert.deepEqual(stats[0], { last: 40 + (118 % 7), min: 40, max: 46 });
});

test('a real outage breaks the line once, where it is', () => {
  const points = everyOtherStep().map(([t, v]) => [t, t >= 1200 && t < 2400 ? null : v]);
  const { times, columns } = prepareSeries([{ labels: {}, points }]);
  const breaks = columns[0].map((v, i) => (v === null ? times[i] : null)).filter((t) => t !== null);
  assert.equal(breaks.length, 1);
  assert.ok(breaks[0] > 1140 && breaks[0] < 2400, String(breaks[0]));
});

test('a lone sample is marked to be drawn as a dot', () => {
  const points = Array.from({ length: 120 }, (_, i) => [i * 30, null]);
  points[100][1] = 12.5;
  const { times, columns, lone, stats } = prepareSeries([{ labels: {}, points }]);
  assert.deepEqual(times, [3000]);
  assert.deepEqual(columns, [[12.5]]);
  assert.deepEqual(lone, [[0]]);
  assert.deepEqual(stats, [{ last: 12.5, min: 12.5, max: 12.5 }]);
});

test('GPUs that report at different times keep their own gaps and figures', () => {
  const gpu0 = everyOtherStep();
  const gpu1 = gpu0.map(([t, v], i) => [t, i < 60 ? v : null]);
  const { columns, stats } = prepareSeries([{ labels: { gpu: '0' }, points: gpu0 }, { labels: { gpu: '1' }, points: gpu1 }]);
  assert.equal(columns[0].length, columns[1].length);
  assert.equal(columns[1].slice(30).every((v) => v === null), true);
  assert.notEqual(stats[1], null);
});

test('no data, and values that are not numbers', () => {
  assert.deepEqual(prepareSeries([]), { times: [], columns: [], lone: [], stats: [] });
  const odd = prepareSeries([{ labels: {}, points: [[0, 'NaN'], [30, Infinity], [60, null], [90, 5]] }]);
  assert.deepEqual(odd.columns, [[5]]);
  assert.deepEqual(prepareSeries([{ labels: {}, points: [[0, null], [30, null]] }]).stats, [null]);
});

test('percent charts are 0–100; others start at 0 with room above', () => {
  assert.deepEqual(valueRange('percent', 3, 7), [0, 100]);
  assert.deepEqual(valueRange('bytes', 100, 200), [0, 220.00000000000003]);
  assert.deepEqual(valueRange('watts', 0, 0), [0, 1]);
  assert.deepEqual(valueRange('celsius', null, null), [0, 1.1]);
});
