// Approvals: the kubectl commands waiting for a decision (approve or reject, with who asked,
// what, under which rule and until when), a connection's approval rules (add, remove), and
// how a command that waits is followed until its result arrives.
import { h } from 'preact';
import { useState } from 'preact/hooks';
import htm from 'htm';
import { api } from './api.js';
import { ErrorText, Time, useNow, usePageTitle, usePoll } from './ui.js';

const html = htm.bind(h);

const verbs = ['*', 'get', 'logs', 'top', 'describe', 'api-resources', 'api-versions', 'version',
  'cluster-info', 'explain'];

const statusText = {
  waiting_for_approval: 'waiting for approval',
  approved: 'approved, running',
  rejected: 'rejected',
  expired: 'expired',
  completed: 'approved and run',
  failed: 'approved, did not run',
};

export function ApprovalBadge({ status }) {
  return html`<span class=${'badge approval-' + status} data-approval=${status}>
    ${statusText[status] || status}</span>`;
}

export function ruleText(rule) {
  const verb = rule.verb === '*' ? 'any command' : 'kubectl ' + rule.verb;
  const resource = rule.resource === '*' ? '' : ' on ' + rule.resource;
  const where = rule.namespace === '*' ? ' in any namespace' : ' in namespace ' + rule.namespace;
  return verb + resource + where;
}

const commandPath = (connectionId, id) => '/api/v1/connections/' + encodeURIComponent(connectionId) +
  '/commands/' + encodeURIComponent(id);

// Asks for a waiting command's state every 2 s until it ends; `onChange` gets each new state.
export function followCommand(connectionId, id, onChange) {
  let stopped = false;
  const step = async () => {
    if (stopped) return;
    try {
      const command = await api('GET', commandPath(connectionId, id));
      onChange(command);
      if (command.status === 'waiting_for_approval' || command.status === 'approved') {
        setTimeout(step, 2000);
      }
    } catch (e) {
      onChange({ id, status: 'failed', message: e.message });
    }
  };
  setTimeout(step, 2000);
  return () => { stopped = true; };
}

function Decision({ approval, onDecided }) {
  const [reason, setReason] = useState('');
  const [rejecting, setRejecting] = useState(false);
  const [error, setError] = useState(null);
  const decide = async (action, body) => {
    setError(null);
    try {
      await api('POST', '/api/v1/approvals/' + encodeURIComponent(approval.id) + '/' + action, body);
      onDecided();
    } catch (e) {
      setError(e);
    }
  };
  return html`<div class="decision">
    ${rejecting
      ? html`<form class="row" onSubmit=${(e) => { e.preventDefault(); decide('reject', reason ? { reason } : {}); }}>
          <label>Reason (shown to the requester)<input name="reason" maxlength="500" value=${reason}
            onInput=${(e) => setReason(e.target.value)} /></label>
          <button type="submit" class="danger">Reject</button>
          <button type="button" class="secondary" onClick=${() => setRejecting(false)}>Cancel</button>
        </form>`
      : html`<div class="row">
          ${approval.asked_by_you
            ? html`<span class="muted" data-own-request>You asked for this command: another person
                (or another of your credentials) approves it.</span>`
            : html`<button type="button" onClick=${() => decide('approve')}>Approve</button>`}
          <button type="button" class="danger" onClick=${() => setRejecting(true)}>Reject…</button>
        </div>`}
    <${ErrorText} error=${error} />
  </div>`;
}

// The waiting commands, one card each: who asked, the command, the rule, the time left.
function ApprovalList({ approvals, clusters, onDecided }) {
  const now = useNow();
  if (approvals.length === 0) return html`<p>No kubectl commands are waiting for approval.</p>`;
  return html`<ul class="approvals">${approvals.map((a) => html`<li key=${a.id} class="approval" data-command=${a.id}>
    <div class="approval-head">
      <${ApprovalBadge} status=${a.status} />
      ${clusters && html`<a href=${'#/connections/' + encodeURIComponent(a.connection_id)}>
        ${clusters[a.connection_id] || a.connection_id}</a>`}
      <span class="muted">asked by ${a.requested_by ? a.requested_by.email : '–'} <${Time} iso=${a.requested_at} now=${now} />;
        expires <${Time} iso=${a.expires_at} now=${now} /></span>
    </div>
    <pre class="output command">${a.argv.join(' ')}</pre>
    <p class="muted">Rule <code>${a.rule.id}</code>: ${ruleText(a.rule)}</p>
    <${Decision} approval=${a} onDecided=${onDecided} />
  </li>`)}</ul>`;
}

// The navigation bar's link text: how many commands wait for the signed-in user's decision.
export function ApprovalsLabel() {
  const { data } = usePoll(() => api('GET', '/api/v1/approvals'), 15000, []);
  const waiting = data ? data.approvals.length : 0;
  return waiting > 0 ? 'Approvals (' + waiting + ' waiting)' : 'Approvals';
}

// Every command waiting for the signed-in user's decision, across connections.
export function ApprovalsPage() {
  usePageTitle('Approvals');
  const [version, setVersion] = useState(0);
  const { data, error } = usePoll(() => api('GET', '/api/v1/approvals'), 5000, [version], []);
  const { data: connections } = usePoll(() => api('GET', '/api/v1/connections'), 0, []);
  // The list waits for the connections too, so that it names clusters, never flashes their ids.
  const clusters = {};
  for (const c of connections ? connections.connections : []) clusters[c.id] = c.cluster_name;
  return html`<section>
    <h1>Approvals</h1>
    <p>kubectl commands that match a connection's approval rules wait here until you approve
      (they run at once) or reject them. Nothing is approved automatically; a command expires
      15 minutes after it was asked.</p>
    <${ErrorText} error=${error} />
    ${data && connections && html`<${ApprovalList} approvals=${data.approvals} clusters=${clusters}
      onDecided=${() => setVersion((v) => v + 1)} />`}
  </section>`;
}

// A connection's commands waiting for a decision, on its kubectl tab; asked again at once
// when `changed` does (a command of the page's sent to approval, or cancelled).
export function ConnectionWaiting({ connectionId, changed }) {
  const [version, setVersion] = useState(0);
  const { data: waiting, error } = usePoll(
    () => api('GET', '/api/v1/approvals?connection_id=' + encodeURIComponent(connectionId)),
    5000, [connectionId, version, changed], [connectionId]);
  return html`<section aria-labelledby="approvals-title">
    <h2 id="approvals-title">Waiting for approval</h2>
    <${ErrorText} error=${error} />
    ${waiting && html`<${ApprovalList} approvals=${waiting.approvals}
      onDecided=${() => setVersion((v) => v + 1)} />`}
  </section>`;
}

// A connection's approval rules (add, remove), in its Settings.
export function ApprovalRules({ connectionId }) {
  const base = '/api/v1/connections/' + encodeURIComponent(connectionId);
  const [version, setVersion] = useState(0);
  const refresh = () => setVersion((v) => v + 1);
  const { data: rules, error: rulesError } = usePoll(() => api('GET', base + '/approval-rules'),
    0, [connectionId, version], [connectionId]);
  const [form, setForm] = useState({ verb: '*', resource: '*', namespace: '*' });
  const [error, setError] = useState(null);
  const field = (key) => (e) => setForm({ ...form, [key]: e.target.value });
  const add = async (event) => {
    event.preventDefault();
    setError(null);
    try {
      await api('POST', base + '/approval-rules', form);
      setForm({ verb: '*', resource: '*', namespace: '*' });
      refresh();
    } catch (e) {
      setError(e);
    }
  };
  const remove = async (rule) => {
    if (!confirm('Remove the rule "' + ruleText(rule) + '"? Matching commands then run without approval.')) return;
    setError(null);
    try {
      await api('DELETE', base + '/approval-rules/' + encodeURIComponent(rule.id));
      refresh();
    } catch (e) {
      setError(e);
    }
  };
  return html`<section aria-labelledby="rules-title">
    <h2 id="rules-title">Approval rules</h2>
    <p class="muted">${'A kubectl command waits for approval when a rule matches its verb, a ' +
      'resource it reads and a namespace it reads (-n, default without it, every namespace with ' +
      '-A); * matches anything.'}</p>
    <${ErrorText} error=${rulesError || error} />
    ${rules && (rules.rules.length === 0
      ? html`<p>No rules: every allowed command runs at once.</p>`
      : html`<div class="table-wrap"><table class="rules">
          <thead><tr><th scope="col">Verb</th><th scope="col">Resource</th><th scope="col">Namespace</th>
            <th scope="col">Matches</th><th scope="col">Created</th><th scope="col">Actions</th></tr></thead>
          <tbody>${rules.rules.map((r) => html`<tr key=${r.id} data-rule=${r.id}>
            <td><code>${r.verb}</code></td><td><code>${r.resource}</code></td><td><code>${r.namespace}</code></td>
            <td>${ruleText(r)}</td><td><${Time} iso=${r.created_at} /></td>
            <td class="actions"><button type="button" class="danger" onClick=${() => remove(r)}>Remove</button></td>
          </tr>`)}</tbody></table></div>`)}
    <form class="row rule-form" onSubmit=${add} aria-label="New approval rule">
      <label>Verb<select name="rule-verb" value=${form.verb} onChange=${field('verb')}>
        ${verbs.map((v) => html`<option key=${v} value=${v}>${v}</option>`)}</select></label>
      <label>Resource<input name="rule-resource" value=${form.resource} onInput=${field('resource')}
        placeholder="pods, deploy, * …" spellcheck="false" autocomplete="off" /></label>
      <label>Namespace<input name="rule-namespace" value=${form.namespace} onInput=${field('namespace')}
        placeholder="ml, * …" spellcheck="false" autocomplete="off" /></label>
      <button type="submit">Add rule</button>
    </form>
  </section>`;
}
