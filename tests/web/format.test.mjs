// Times and command lines as the pages write and read them (src/console/web/app/format.js).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { absoluteTime, plural, relativeTime, splitArgv, timeZoneLabel } from '../../src/console/web/app/format.js';

const now = Date.parse('2026-03-01T12:00:00Z');

test('one relative style for the past and the future', () => {
  assert.equal(relativeTime(new Date(now - 12000).toISOString(), now), '12 s ago');
  assert.equal(relativeTime(new Date(now - 3 * 86400000).toISOString(), now), '3 d ago');
  assert.equal(relativeTime(new Date(now + 89 * 86400000).toISOString(), now), 'in 89 d');
  // Clocks a few seconds apart are not the future.
  assert.equal(relativeTime(new Date(now + 3000).toISOString(), now), '0 s ago');
  assert.equal(relativeTime(null, now), '–');
  assert.equal(relativeTime('not a time', now), '–');
});

test('the absolute time names its zone', () => {
  assert.match(absoluteTime('2026-03-01T12:00:00Z'), /2026/);
  assert.match(absoluteTime('2026-03-01T12:00:00Z'), /UTC|GMT|[A-Z]{3,4}/);
  assert.equal(absoluteTime('garbage'), 'garbage');
  assert.match(timeZoneLabel(), /\(UTC[+−]\d\d:\d\d\)$/);
});

test('plural', () => {
  assert.equal(plural(1, 'node'), '1 node');
  assert.equal(plural(3, 'node'), '3 nodes');
  assert.equal(plural(2, 'pod needs', 'pods need'), '2 pods need');
});

test('command lines split like a shell, hostile ones included', () => {
  assert.deepEqual(splitArgv("kubectl get pods -n 'my ns'"), ['kubectl', 'get', 'pods', '-n', 'my ns']);
  assert.equal(splitArgv('kubectl "unclosed'), null);
  assert.deepEqual(splitArgv(''), []);
  assert.deepEqual(splitArgv('a  \t b'), ['a', 'b']);
  assert.deepEqual(splitArgv("''"), ['']);
  assert.equal(splitArgv('x'.repeat(100000))[0].length, 100000);
});
