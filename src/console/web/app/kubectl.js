// A connection's kubectl tab: read-only kubectl through the cluster agent (a command line
// split into argv like a shell's words, with the up and down arrows recalling earlier ones),
// disabled with the reason while no cluster agent is connected; a command waiting for
// approval is followed until it ends and can be cancelled; then the commands waiting for a
// decision.
import { h } from 'preact';
import { useEffect, useRef, useState } from 'preact/hooks';
import htm from 'htm';
import { api } from './api.js';
import { ConnectionWaiting, followCommand } from './approvals.js';
import { splitArgv } from './format.js';
import { kubectlBlocked } from './health.js';
import { describeError } from './ui.js';

const html = htm.bind(h);

const historyLength = 50;

// What the history shows for a refusal or failure: one word for what happened, then the
// reason for people (no "refused: refused").
const failureLabel = {
  refused: 'refused',
  namespaces_not_chosen: 'refused: no namespaces chosen',
  namespace_not_allowed: 'refused: namespace not in scope',
  too_many_commands: 'refused: too many commands waiting',
  agent_timeout: 'timed out',
  agent_refused: 'refused by the agent',
  agent_output_too_large: 'output too large',
  agent_failed: 'kubectl did not run',
  network: 'no answer from the console',
};

// A history entry for a command that waited for approval, as it is now.
function approvalEntry(line, command) {
  if (command.status === 'completed') {
    return { line, id: command.id, ok: command.exit_code === 0,
             status: 'approved, exit ' + command.exit_code,
             output: (command.stdout || '') + (command.stderr ? '\n' + command.stderr : '') };
  }
  if (command.status === 'waiting_for_approval') {
    const rule = command.rule ? ' (rule ' + command.rule.id + ')' : '';
    return { line, id: command.id, ok: true, waiting: true, cancellable: true, status: 'waiting for approval',
             output: 'It matches an approval rule' + rule + '. The connection\u2019s owner or an admin ' +
               'approves or rejects it on the Approvals page; unless decided it expires ' +
               new Date(command.expires_at).toLocaleTimeString() + '.' };
  }
  if (command.status === 'approved') {
    return { line, id: command.id, ok: true, waiting: true, status: 'approved, running', output: '' };
  }
  const cancelled = command.status === 'rejected' && command.reason === cancelReason;
  return { line, id: command.id, ok: false, status: cancelled ? 'cancelled' : command.status.replace(/_/g, ' '),
           output: cancelled ? 'You cancelled it before anyone decided; it never ran.'
             : command.reason || (command.error ? command.error.message : command.message || '') };
}

const cancelReason = 'cancelled by the requester';

export function KubectlConsole({ connection, now }) {
  const connectionId = connection.id;
  const [line, setLine] = useState('kubectl get nodes');
  const [history, setHistory] = useState([]);
  const [recall, setRecall] = useState(-1);  // index into history while arrowing through it
  const [running, setRunning] = useState(null);  // {controller} while a command runs
  const [asked, setAsked] = useState(0);  // commands sent to approval or cancelled here
  const following = useRef([]);
  useEffect(() => () => following.current.forEach((stop) => stop()), [connectionId]);
  const blocked = kubectlBlocked(connection, now);
  const update = (command, typed) =>
    setHistory((list) => list.map((e) => (e.id === command.id ? approvalEntry(typed, command) : e)));
  const run = async (event) => {
    event.preventDefault();
    const argv = splitArgv(line.trim());
    if (!argv || argv.length === 0 || blocked || running) return;
    const controller = new AbortController();
    setRunning({ controller });
    setRecall(-1);
    const typed = line;
    let entry;
    try {
      const reply = await api('POST', '/api/v1/connections/' + encodeURIComponent(connectionId) +
        '/kubectl', { argv }, { signal: controller.signal });
      if (reply.status === 'waiting_for_approval') {
        // It runs once the owner or an admin approves it: follow it until its result.
        entry = approvalEntry(typed, reply);
        setAsked((n) => n + 1);
        following.current.push(followCommand(connectionId, reply.id, (command) => update(command, typed)));
      } else {
        entry = { line: typed, ok: reply.exit_code === 0, status: 'exit ' + reply.exit_code,
                  output: reply.stdout + (reply.stderr ? '\n' + reply.stderr : '') };
      }
    } catch (e) {
      entry = e.code === 'aborted'
        ? { line: typed, ok: false, status: 'stopped waiting',
            output: 'The page stopped waiting. The agent may still run it (it is read-only); the Audit log has how it ended.',
            wrap: true }
        : { line: typed, ok: false, status: failureLabel[e.code] || e.code, output: describeError(e), wrap: true };
    }
    setHistory((h) => [entry, ...h].slice(0, historyLength));
    setRunning(null);
  };
  const cancel = async (entry) => {
    try {
      update(await api('POST', '/api/v1/approvals/' + encodeURIComponent(entry.id) + '/reject',
                       { reason: cancelReason }), entry.line);
      setAsked((n) => n + 1);
    } catch (e) {
      setHistory((list) => list.map((x) => (x.id === entry.id ? { ...x, output: describeError(e) } : x)));
    }
  };
  // Up and down walk through the lines run before, newest first, as in a shell.
  const keyDown = (event) => {
    if (event.key !== 'ArrowUp' && event.key !== 'ArrowDown') return;
    if (history.length === 0) return;
    event.preventDefault();
    const next = event.key === 'ArrowUp' ? Math.min(recall + 1, history.length - 1) : recall - 1;
    setRecall(Math.max(next, -1));
    setLine(next < 0 ? '' : history[next].line);
  };
  return html`<section aria-labelledby="kubectl-title">
    <h2 id="kubectl-title">kubectl (read-only)</h2>
    <form class="row" onSubmit=${run}>
      <label>Command<input type="text" name="argv" class="mono" value=${line} autocomplete="off"
        spellcheck="false" onInput=${(e) => { setLine(e.target.value); setRecall(-1); }} onKeyDown=${keyDown}
        aria-describedby=${blocked ? 'kubectl-blocked' : undefined} /></label>
      ${running
        // Keyed apart: the same element turned back into the submit button while its click is
        // still being handled would submit the form again.
        ? html`<button key="stop" type="button" class="secondary" onClick=${() => running.controller.abort()}>Stop waiting</button>`
        : html`<button key="run" type="submit" disabled=${Boolean(blocked)}>Run</button>`}
    </form>
    ${blocked && html`<p class="notice" id="kubectl-blocked" data-kubectl-blocked>${blocked}</p>`}
    ${running && html`<p class="muted" role="status">Running…</p>`}
    <p class="muted">↑ and ↓ recall earlier command lines.</p>
    <ol class="history">${history.map((e, i) => html`<li key=${history.length - i}
      class=${e.waiting ? 'waiting' : e.ok ? 'ok' : 'failed'} data-command=${e.id}>
      <div><code>${e.line}</code> <span class="status">${e.status}</span>
        ${e.cancellable && html` <button type="button" class="secondary small" onClick=${() => cancel(e)}>Cancel</button>`}</div>
      ${e.output && html`<pre class=${e.waiting || e.wrap ? 'output wrap' : 'output'}>${e.output}</pre>`}
    </li>`)}</ol>
    <${ConnectionWaiting} connectionId=${connectionId} changed=${asked} />
  </section>`;
}
