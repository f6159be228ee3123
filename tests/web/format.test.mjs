// Times, sizes and command lines as the pages write and read them (src/console/web/app/format.js).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import {
  bytes, absoluteTime, forPeople, plural, relativeTime, splitArgv, timeZoneLabel,
} from '../../src/console/web/app/format.js';

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

test('messages lose the CLI and API advice the page has its own controls for', () => {
  assert.equal(forPeople('you have no connection with this id; list yours with GET /api/v1/connections'),
               'you have no connection with this id');
  assert.equal(forPeople('this session expired at 2026-03-01T12:00:00Z; sign in again with "uplink login"'),
               'this session expired at 2026-03-01T12:00:00Z');
  assert.equal(forPeople("no namespaces have been chosen; its owner chooses namespaces with 'uplink connections namespaces'"),
               'no namespaces have been chosen');
  assert.equal(forPeople('namespaces are not chosen yet (uplink connections namespaces), or the agent is old'),
               'namespaces are not chosen yet, or the agent is old');
  // Nothing to drop, or nothing but advice: kept as it is.
  assert.equal(forPeople('a plain message; with two clauses'), 'a plain message; with two clauses');
  assert.equal(forPeople('GET /api/v1/users'), 'GET /api/v1/users');
  assert.equal(forPeople(undefined), '');
});

test('sizes and rates in whole bytes below a KiB, one decimal above', () => {
  assert.equal(bytes(985.9666666666667), '986 B');
  assert.equal(bytes(0), '0 B');
  assert.equal(bytes(1536), '1.5 KiB');
  assert.equal(bytes(5 * 1024 ** 3), '5.0 GiB');
  assert.equal(bytes(null), '–');
});
