// The audit log (everyone sees their own; admins see all), the users page (admins: create,
// deactivate, reactivate) and your API keys (create, shown once; revoke).
import { h } from 'preact';
import { useState } from 'preact/hooks';
import htm from 'htm';
import { api } from './api.js';
import { dateTime } from './format.js';
import { PasswordPrompt, usePasswordPrompt, withConfirmation } from './tokens.js';
import { RequireTwoFactorSetting, ResetTwoFactor } from './two_factor.js';
import { ErrorText, usePoll } from './ui.js';

const html = htm.bind(h);

export function AuditPage() {
  const [before, setBefore] = useState(null);
  const { data, error } = usePoll(
    () => api('GET', '/api/v1/audit?limit=100' + (before ? '&before=' + before : '')), 0, [before]);
  return html`<section>
    <h1>Audit log</h1>
    <${ErrorText} error=${error} />
    ${data && html`<div class="table-wrap"><table class="audit">
      <thead><tr><th scope="col">When</th><th scope="col">Actor</th><th scope="col">Action</th>
        <th scope="col">Target</th><th scope="col">Outcome</th><th scope="col">From</th><th scope="col">Detail</th></tr></thead>
      <tbody>${data.events.map((e) => html`<tr key=${e.id}>
        <td>${dateTime(e.at)}</td><td>${e.actor_label || e.actor_type}</td><td><code>${e.action}</code></td>
        <td>${e.target_type} <code>${e.target_id}</code></td><td>${e.outcome}</td><td>${e.source_address}</td>
        <td><code class="detail">${e.detail ? JSON.stringify(e.detail) : ''}</code></td>
      </tr>`)}</tbody></table></div>
      <div class="row">
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
  const [version, setVersion] = useState(0);
  const { data, error } = usePoll(() => api('GET', '/api/v1/users'), 0, [version]);
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
      <tbody>${data.users.map((u) => html`<tr key=${u.id} data-user=${u.email}>
        <td>${u.email}</td><td>${u.role}</td><td>${dateTime(u.created_at)}</td>
        <td>${u.deactivated_at ? 'deactivated ' + dateTime(u.deactivated_at) : 'active'}</td>
        <td class="two-factor">${u.two_factor_enabled ? 'on' : 'off'}
          ${u.id !== me && html`<${ResetTwoFactor} user=${u} onReset=${() => setVersion((v) => v + 1)} />`}</td>
        <td><button type="button" class="secondary" onClick=${() => toggle(u)}>
          ${u.deactivated_at ? 'Reactivate' : 'Deactivate'}</button></td>
      </tr>`)}</tbody></table></div>`}
  </section>`;
}

export function ApiKeysPage() {
  const [version, setVersion] = useState(0);
  const { data, error } = usePoll(() => api('GET', '/api/v1/api-keys'), 0, [version]);
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
        <td>${dateTime(k.created_at)}</td><td>${dateTime(k.expires_at)}</td>
        <td class="actions">${k.status === 'active' &&
          html`<button type="button" class="danger" onClick=${() => revoke(k)}>Revoke</button>`}</td>
      </tr>`)}</tbody></table></div>`}
  </section>`;
}
