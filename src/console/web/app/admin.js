// The audit log (everyone sees their own; admins see all) and the users page (admins).
import { h } from 'preact';
import { useState } from 'preact/hooks';
import htm from 'htm';
import { api } from './api.js';
import { dateTime } from './format.js';
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

export function UsersPage() {
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
    <${ErrorText} error=${actionError || error} />
    ${data && html`<div class="table-wrap"><table class="users">
      <thead><tr><th scope="col">Email</th><th scope="col">Role</th><th scope="col">Created</th>
        <th scope="col">State</th><th scope="col">Actions</th></tr></thead>
      <tbody>${data.users.map((u) => html`<tr key=${u.id}>
        <td>${u.email}</td><td>${u.role}</td><td>${dateTime(u.created_at)}</td>
        <td>${u.deactivated_at ? 'deactivated ' + dateTime(u.deactivated_at) : 'active'}</td>
        <td><button type="button" class="secondary" onClick=${() => toggle(u)}>
          ${u.deactivated_at ? 'Reactivate' : 'Deactivate'}</button></td>
      </tr>`)}</tbody></table></div>`}
  </section>`;
}
