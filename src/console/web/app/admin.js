// The audit log (everyone sees their own; admins see all), the users page (admins: create,
// deactivate, reactivate) and your API keys (create, shown once; revoke).
import { h } from 'preact';
import { useState } from 'preact/hooks';
import htm from 'htm';
import { api } from './api.js';
import { PasswordPrompt, usePasswordPrompt, withConfirmation } from './tokens.js';
import { RequireTwoFactorSetting, ResetTwoFactor } from './two_factor.js';
import { ErrorText, Time, useNow, usePageTitle, usePoll } from './ui.js';

const html = htm.bind(h);

// Every action the audit log records (docs/api.md, "Audit log"), for the filter.
const auditActions = [
  'api_key.create', 'api_key.revoke', 'connection.approval_rule_add',
  'connection.approval_rule_remove', 'connection.bind', 'connection.cluster_mismatch',
  'connection.create', 'connection.install_plan', 'connection.namespaces', 'connection.node_plan',
  'connection.revoke', 'connection.rotate', 'connection.token_refused', 'handover.redeem',
  'handover.refused', 'kubectl.approval_expired', 'kubectl.approval_requested', 'kubectl.approve',
  'kubectl.reject', 'kubectl.run', 'offer.connected', 'offer.create', 'offer.execution_create',
  'offer.execution_disable', 'offer.execution_refused', 'offer.execution_revoke',
  'offer.execution_rotate', 'offer.resume', 'offer.review', 'offer.suspend',
  'reservation.cancelled', 'reservation.command', 'reservation.completed', 'reservation.create',
  'reservation.expired', 'reservation.extend', 'reservation.failed', 'reservation.provisioning',
  'reservation.running', 'reservation.stopping', 'session.confirm', 'session.create',
  'session.logout', 'session.refused', 'settings.update', 'stream.restart', 'two_factor.disable',
  'two_factor.enable', 'two_factor.enroll', 'two_factor.recovery_code_used',
  'two_factor.recovery_codes', 'two_factor.refused', 'two_factor.reset', 'user.create',
  'user.deactivate', 'user.password', 'user.reactivate',
];

// How a kubectl command that was allowed ended, when it did not run to an answer.
const commandFailure = {
  timeout: 'timed out: kubectl ran past 30 s',
  not_picked_up: 'timed out: no agent took it',
  no_result: 'timed out: no result came back',
  output_too_large: 'failed: output too large',
  failed: 'failed: kubectl did not run',
  shutdown: 'failed: the console stopped',
};

// The outcome as people read it: a kubectl command that was allowed but timed out or failed
// is not "ok", though the event's outcome (allowed or refused) is.
export function auditOutcome(event) {
  const detail = event.detail || {};
  if (event.outcome !== 'ok') return { key: 'refused', text: event.outcome };
  if (event.action === 'kubectl.run' && detail.error) {
    return { key: 'failed', text: commandFailure[detail.error] || 'failed: ' + detail.error };
  }
  if (event.action === 'kubectl.run' && typeof detail.exit_code === 'number' && detail.exit_code !== 0) {
    return { key: 'failed', text: 'exit ' + detail.exit_code };
  }
  return { key: 'ok', text: 'ok' };
}

// An event's detail as "key: value" pairs that wrap between words.
function Detail({ detail }) {
  if (!detail || typeof detail !== 'object') return null;
  const text = (v) => (Array.isArray(v) && v.every((x) => typeof x === 'string') ? v.join(' ')
    : typeof v === 'object' && v !== null ? JSON.stringify(v) : String(v));
  return html`<dl class="detail">${Object.entries(detail).map(([k, v]) => html`<div key=${k}>
    <dt>${k}</dt><dd>${text(v)}</dd></div>`)}</dl>`;
}

// Text that may break only after the given characters (an action at its dots, an email
// before its @), so that a narrow column never cuts a word in two.
function Breakable({ text, after }) {
  const parts = String(text).split(new RegExp('(?<=[' + after + '])'));
  return parts.map((part, i) => html`${i > 0 && html`<wbr />`}${part}`);
}

const actorKind = { api_key: 'API key', session: 'web or CLI session', password: 'password', agent_token: 'agent token',
                    handover_code: 'handover code' };

export function AuditPage() {
  usePageTitle('Audit log');
  const now = useNow();
  const [filter, setFilter] = useState({ action: '', connection: '' });
  const [before, setBefore] = useState(null);
  const query = '/api/v1/audit?limit=100' + (before ? '&before=' + before : '') +
    (filter.action ? '&action=' + encodeURIComponent(filter.action) : '') +
    (filter.connection ? '&connection_id=' + encodeURIComponent(filter.connection) : '');
  const { data, error } = usePoll(() => api('GET', query), 0, [query]);
  const { data: listed } = usePoll(() => api('GET', '/api/v1/connections'), 0, []);
  const connections = listed ? listed.connections : [];
  const clusters = Object.fromEntries(connections.map((c) => [c.id, c.cluster_name]));
  const choose = (key) => (e) => { setBefore(null); setFilter({ ...filter, [key]: e.target.value }); };
  const target = (t) => {
    if (!t || !t.type) return '–';
    if (t.type === 'connection' && clusters[t.id]) {
      return html`connection <a href=${'#/connections/' + encodeURIComponent(t.id)}>${clusters[t.id]}</a>`;
    }
    return html`${t.type} <code>${t.id}</code>`;
  };
  return html`<section>
    <h1>Audit log</h1>
    <div class="row filters">
      <label>Action<select name="audit-action" value=${filter.action} onChange=${choose('action')}>
        <option value="">Every action</option>
        ${auditActions.map((a) => html`<option key=${a} value=${a}>${a}</option>`)}</select></label>
      <label>Connection<select name="audit-connection" value=${filter.connection} onChange=${choose('connection')}>
        <option value="">Every connection</option>
        ${connections.map((c) => html`<option key=${c.id} value=${c.id}>${c.cluster_name}</option>`)}</select></label>
    </div>
    <${ErrorText} error=${error} />
    ${data && data.events.length === 0 && html`<p>No events${filter.action || filter.connection ? ' match' : ' yet'}.</p>`}
    ${data && data.events.length > 0 && html`<div class="table-wrap"><table class="audit">
      <thead><tr><th scope="col">When</th><th scope="col">Actor</th><th scope="col">Action</th>
        <th scope="col">Target</th><th scope="col">Outcome</th></tr></thead>
      ${data.events.map((e) => {
        const outcome = auditOutcome(e);
        const actor = e.actor || {};
        const hasDetail = e.detail && typeof e.detail === 'object' && Object.keys(e.detail).length > 0;
        return html`<tbody key=${e.id} data-action=${e.action}><tr>
          <td><${Time} iso=${e.at} now=${now} /></td>
          <td class="actor"><${Breakable} text=${actor.label || actor.type || '–'} after="@." />
            <div class="muted">${[actor.type === 'user' ? '' : actor.type, actorKind[actor.credential] || actor.credential,
              e.source_address].filter(Boolean).join(' · ')}</div></td>
          <td><code><${Breakable} text=${e.action} after="._" /></code></td>
          <td class="target">${target(e.target)}</td>
          <td><span class=${'badge outcome-' + outcome.key} data-outcome=${outcome.key}>${outcome.text}</span></td>
        </tr>
        ${hasDetail && html`<tr class="detail-row"><td colspan="5"><${Detail} detail=${e.detail} /></td></tr>`}</tbody>`;
      })}</table></div>`}
    ${data && html`<div class="row">
        ${before && html`<button type="button" class="secondary" onClick=${() => setBefore(null)}>Newest</button>`}
        ${data.next_before && html`<button type="button" class="secondary" onClick=${() => setBefore(data.next_before)}>Older</button>`}
      </div>`}
  </section>`;
}

function CreateUser({ onCreated }) {
  const empty = { email: '', role: 'member', password: '' };
  const [form, setForm] = useState(empty);
  const [error, setError] = useState(null);
  const [created, setCreated] = useState(null);
  const [prompt, ask] = usePasswordPrompt();
  const field = (key) => (e) => setForm({ ...form, [key]: e.target.value });
  const create = async (event) => {
    event.preventDefault();
    setError(null);
    setCreated(null);
    const body = { email: form.email, role: form.role };
    if (form.password) body.password = form.password;
    try {
      const user = await withConfirmation(() => api('POST', '/api/v1/users', body), ask);
      if (!user) return;
      setCreated(user);
      setForm(empty);
      onCreated();
    } catch (e) {
      setError(e);
    }
  };
  return html`<div>
    ${prompt && html`<${PasswordPrompt} onAnswer=${prompt} reason="Creating a user needs your password again." />`}
    <form class="create" onSubmit=${create} aria-labelledby="new-user-title">
      <h2 id="new-user-title">New user</h2>
      <label>Email<input type="email" name="email" required maxlength="254" autocomplete="off"
        value=${form.email} onInput=${field('email')} /></label>
      <label>Role<select name="role" value=${form.role} onChange=${field('role')}>
        <option value="member">member</option><option value="admin">admin</option></select></label>
      <label>Password (optional, 12 characters or more; without one the user cannot sign in here until a password is set)
        <input type="password" name="new-user-password" minlength="12" maxlength="256" autocomplete="new-password"
          value=${form.password} onInput=${field('password')} /></label>
      <button type="submit">Create user</button>
      ${created && html`<p class="ok" role="status">Created ${created.email} (${created.role}).</p>`}
      <${ErrorText} error=${error} />
    </form>
  </div>`;
}

// `me`: the signed-in admin's id (their own two-factor is theirs to turn off).
export function UsersPage({ me }) {
  usePageTitle('Users');
  const [version, setVersion] = useState(0);
  const { data, error } = usePoll(() => api('GET', '/api/v1/users'), 0, [version], []);
  const [actionError, setActionError] = useState(null);
  const toggle = async (user) => {
    const verb = user.deactivated_at ? 'reactivate' : 'deactivate';
    if (!confirm(verb[0].toUpperCase() + verb.slice(1) + ' ' + user.email + '?')) return;
    setActionError(null);
    try {
      await api('POST', '/api/v1/users/' + encodeURIComponent(user.id) + '/' + verb);
      setVersion((v) => v + 1);
    } catch (e) {
      setActionError(e);
    }
  };
  return html`<section>
    <h1>Users</h1>
    <${RequireTwoFactorSetting} />
    <${CreateUser} onCreated=${() => setVersion((v) => v + 1)} />
    <${ErrorText} error=${actionError || error} />
    ${data && html`<div class="table-wrap"><table class="users">
      <thead><tr><th scope="col">Email</th><th scope="col">Role</th><th scope="col">Created</th>
        <th scope="col">State</th><th scope="col">Two-factor</th><th scope="col">Actions</th></tr></thead>
      <tbody>${data.users.map((u) => html`<tr key=${u.id} data-user=${u.email} class=${u.id === me ? 'me' : ''}>
        <td>${u.email}${u.id === me && html` <strong class="you">(you)</strong>`}</td><td>${u.role}</td>
        <td><${Time} iso=${u.created_at} /></td>
        <td>${u.deactivated_at ? html`deactivated <${Time} iso=${u.deactivated_at} />` : 'active'}</td>
        <td class="two-factor">${u.two_factor_enabled ? 'on' : 'off'}
          ${u.id !== me && html`<${ResetTwoFactor} user=${u} onReset=${() => setVersion((v) => v + 1)} />`}</td>
        <td class="actions">${u.id === me ? html`<span class="muted">your own account</span>`
          : html`<button type="button" class="secondary" onClick=${() => toggle(u)}>
          ${u.deactivated_at ? 'Reactivate' : 'Deactivate'}</button>`}</td>
      </tr>`)}</tbody></table></div>`}
  </section>`;
}

export function ApiKeysPage() {
  usePageTitle('API keys');
  const [version, setVersion] = useState(0);
  const { data, error } = usePoll(() => api('GET', '/api/v1/api-keys'), 0, [version], []);
  const [name, setName] = useState('');
  const [revealed, setRevealed] = useState(null);
  const [copied, setCopied] = useState('');
  const [actionError, setActionError] = useState(null);
  const [prompt, ask] = usePasswordPrompt();
  const create = async (event) => {
    event.preventDefault();
    setActionError(null);
    try {
      const key = await withConfirmation(() => api('POST', '/api/v1/api-keys', { name }), ask);
      if (!key) return;
      setRevealed(key);
      setCopied('');
      setName('');
      setVersion((v) => v + 1);
    } catch (e) {
      setActionError(e);
    }
  };
  const revoke = async (key) => {
    if (!confirm('Revoke the API key ' + key.name + '? Anything using it is refused at once.')) return;
    setActionError(null);
    try {
      await api('POST', '/api/v1/api-keys/' + encodeURIComponent(key.id) + '/revoke');
      setVersion((v) => v + 1);
    } catch (e) {
      setActionError(e);
    }
  };
  const copy = async () => {
    try {
      await navigator.clipboard.writeText(revealed.key);
      setCopied('Key copied.');
    } catch {
      setCopied('Copying was not allowed: select the text and copy it.');
    }
  };
  return html`<section>
    <h1>API keys</h1>
    ${prompt && html`<${PasswordPrompt} onAnswer=${prompt} reason="Creating an API key needs your password again." />`}
    ${revealed ? html`<section class="reveal" aria-labelledby="key-title">
        <h2 id="key-title">API key ${revealed.name}</h2>
        <p><strong>This key is shown only once.</strong> Store it now; the console keeps only its hash.</p>
        <pre class="output token" data-api-key>${revealed.key}</pre>
        <div class="row"><button type="button" class="secondary" onClick=${copy}>Copy key</button></div>
        <p role="status">${copied}</p>
        <button type="button" onClick=${() => setRevealed(null)}>I stored the key</button>
      </section>`
      : html`<form class="create" onSubmit=${create} aria-labelledby="new-key-title">
        <h2 id="new-key-title">New API key</h2>
        <label>Key name<input name="key-name" required maxlength="63" value=${name}
          onInput=${(e) => setName(e.target.value)} /></label>
        <button type="submit">Create key</button>
      </form>`}
    <${ErrorText} error=${actionError || error} />
    ${data && html`<div class="table-wrap"><table class="api-keys">
      <thead><tr><th scope="col">Name</th><th scope="col">Key</th><th scope="col">Status</th>
        <th scope="col">Created</th><th scope="col">Expires</th><th scope="col">Actions</th></tr></thead>
      <tbody>${data.api_keys.map((k) => html`<tr key=${k.id} data-key=${k.name}>
        <td>${k.name}</td><td><code>${k.prefix}…</code></td><td class="key-status">${k.status}</td>
        <td><${Time} iso=${k.created_at} /></td><td><${Time} iso=${k.expires_at} /></td>
        <td class="actions">${k.status === 'active' &&
          html`<button type="button" class="danger" onClick=${() => revoke(k)}>Revoke</button>`}</td>
      </tr>`)}</tbody></table></div>`}
  </section>`;
}
