// The kubectl table reader of the Workloads tab (src/console/web/app/kubetable.js): real
// kubectl output, and text that is not (the snapshot comes from the cluster: anything).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import {
  parseTable, podProblem, podsOverview, readyCount, restartCount, snapshotRows, unavailableWorkloads,
  warningEvents,
} from '../../src/console/web/app/kubetable.js';

const podsWide = [
  'NAMESPACE     NAME                         READY   STATUS             RESTARTS        AGE   IP           NODE            NOMINATED NODE   READINESS GATES',
  'kube-system   coredns-5d78c9869d-abcde     1/1     Running            0               12d   10.0.0.5     gpu-node-0001   <none>           <none>',
  'ml            trainer-0                    0/1     CrashLoopBackOff   7 (2m14s ago)   1h    10.0.1.9     gpu-node-0002   <none>           <none>',
  'ml            notebook-0                   1/2     Running            1 (5h ago)      3d    10.0.1.10    gpu-node-0001   <none>           <none>',
  'ml            queued-job-x                 0/1     Pending            0               5m    <none>       <none>          <none>           <none>',
  'ml            done-job-y                   0/1     Completed          0               2d    10.0.1.11    gpu-node-0002   <none>           <none>',
  '',
].join('\n');

test('reads kubectl get pods -A -o wide by its header', () => {
  const table = parseTable(podsWide);
  assert.deepEqual(table.columns, ['NAMESPACE', 'NAME', 'READY', 'STATUS', 'RESTARTS', 'AGE', 'IP', 'NODE',
                                   'NOMINATED NODE', 'READINESS GATES']);
  assert.equal(table.rows.length, 5);
  assert.deepEqual(table.unparsed, []);
  const trainer = table.rows[1];
  assert.equal(trainer.NAME, 'trainer-0');
  assert.equal(trainer.RESTARTS, '7 (2m14s ago)');
  assert.equal(trainer.NODE, 'gpu-node-0002');
  assert.equal(trainer['READINESS GATES'], '<none>');
});

test('puts problem pods first and counts pods by status', () => {
  const overview = podsOverview([{ name: 'pods', exit_code: 0, stdout: podsWide }]);
  assert.deepEqual(overview.pods.map((p) => p.name),
                   ['trainer-0', 'notebook-0', 'queued-job-x', 'coredns-5d78c9869d-abcde', 'done-job-y']);
  assert.deepEqual(overview.pods.map((p) => p.problem),
                   ['CrashLoopBackOff', 'not ready (1/2)', 'Pending', null, null]);
  assert.equal(overview.problems, 3);
  assert.deepEqual(overview.byStatus, [['CrashLoopBackOff', 1], ['Pending', 1], ['Running', 2], ['Completed', 1]]);
  assert.equal(overview.pods[0].restarts, 7);
});

test('takes the namespace from a per-namespace result and skips failed results', () => {
  const perNamespace = 'NAME        READY   STATUS    RESTARTS   AGE\nworker-1    1/1     Running   0          1d\n';
  const { rows } = snapshotRows([
    { name: 'pods/ml', exit_code: 0, stdout: perNamespace },
    { name: 'pods/dev', exit_code: 1, stdout: perNamespace },
    { name: 'pods/prod', error: { code: 'timeout', message: 'x' } },
    { name: 42, stdout: perNamespace },
    { name: 'deployments/ml', exit_code: 0, stdout: perNamespace },
  ], 'pods');
  assert.deepEqual(rows, [{ NAMESPACE: 'ml', NAME: 'worker-1', READY: '1/1', STATUS: 'Running', RESTARTS: '0', AGE: '1d' }]);
});

test('reads Warning events with messages full of spaces', () => {
  const events = 'NAMESPACE   LAST SEEN   TYPE      REASON    OBJECT              MESSAGE\n' +
    'ml          2m          Warning   BackOff   pod/trainer-0       Back-off restarting failed container trainer in pod trainer-0\n';
  const { events: list } = warningEvents([{ name: 'warning_events', exit_code: 0, stdout: events }]);
  assert.deepEqual(list, [{ namespace: 'ml', lastSeen: '2m', reason: 'BackOff', object: 'pod/trainer-0',
                            message: 'Back-off restarting failed container trainer in pod trainer-0' }]);
  assert.deepEqual(warningEvents([{ name: 'warning_events', exit_code: 0, stdout: 'No resources found in ml namespace.\n' }]).events, []);
});

test('names workloads that are not fully available', () => {
  const deployments = 'NAME      READY   UP-TO-DATE   AVAILABLE   AGE\napi       1/3     3            1           4d\nweb       2/2     2            2           4d\n';
  assert.deepEqual(unavailableWorkloads([{ name: 'deployments/ml', exit_code: 0, stdout: deployments }]),
                   [{ kind: 'deployment', namespace: 'ml', name: 'api', ready: '1/3' }]);
});

test('hostile text: nothing is guessed, nothing throws, sizes are bounded', () => {
  for (const text of [undefined, null, 42, {}, '', '\n\n', 'No resources found in default namespace.',
                      'error: the server does not have a resource type "podz"', 'name  ready\nx  1/1',
                      '\u0000\u0001\u0002', 'A'.repeat(100000)]) {
    assert.equal(parseTable(text), null, String(text).slice(0, 40));
  }
  // Header only: no rows.
  assert.deepEqual(parseTable('NAME   READY   STATUS\n').rows, []);
  // Markup stays text: the pages render it as text.
  const markup = 'NAME                       STATUS\n<img src=x onerror=1>      Running\n';
  assert.equal(parseTable(markup).rows[0].NAME, '<img src=x onerror=1>');
  // A line that does not line up with the header is kept whole, not cut inside a word.
  const ragged = parseTable('NAME      STATUS\nverylongname-that-overflows Running\nok        Running\n');
  assert.deepEqual(ragged.rows.map((r) => r.NAME), ['ok']);
  assert.deepEqual(ragged.unparsed, ['verylongname-that-overflows Running']);
  // CRLF line ends, as some tools write them, are read; a tab does not line up, so its line is
  // kept whole.
  assert.deepEqual(parseTable('NAME   STATUS\r\nx      Running\r\n').rows, [{ NAME: 'x', STATUS: 'Running' }]);
  assert.deepEqual(parseTable('NAME   STATUS\nx\tRunning\n').unparsed, ['x Running']);
  // A huge output is read up to a bound, and an over-long line is kept, cut.
  const huge = 'NAME   STATUS\n' + 'pod    Running\n'.repeat(50000);
  assert.equal(parseTable(huge).rows.length, 19999);
  const long = parseTable('NAME   STATUS\n' + 'x'.repeat(10000) + '\n');
  assert.equal(long.unparsed[0].length, 4096);
  // Fields that are not what they should be.
  assert.equal(readyCount('1/'), null);
  assert.equal(readyCount('99999999/1'), null);
  assert.equal(restartCount('often'), 0);
  assert.equal(podProblem({ STATUS: '' }), 'unknown status');
  assert.equal(podProblem({ STATUS: 'Running', READY: 'lots' }), null);
  assert.deepEqual(podsOverview(null), { pods: [], byStatus: [], problems: 0, unparsed: [] });
});
