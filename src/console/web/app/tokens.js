// Agent tokens: create (the token shown once, with what to install and the commands that
// install it: install.js), rotate and revoke with confirmation, and the status of each.
import { h } from 'preact';
import { useRef, useState } from 'preact/hooks';
import htm from 'htm';
import { api } from './api.js';
import { InstallSection } from './install.js';
import { Badge, ErrorText, Modal, Time, useNow, usePageTitle, usePoll } from './ui.js';

const html = htm.bind(h);

// Runs a sensitive call; when the session needs a fresh password confirmation, asks for it
// through `ask` (a promise of the password, or null when cancelled), confirms, and retries.
export async function withConfirmation(call, ask) {
  try {
    return await call();
  } catch (e) {
    if (e.code !== 'confirmation_required') throw e;
    const password = await ask();
    if (password === null) return null;
    await api('POST', '/api/v1/session/confirm', { password });
    return call();
  }
}

// A password prompt for sensitive calls: `prompt` is shown while set; `ask` resolves with the
// password typed, or null when cancelled.
export function usePasswordPrompt() {
  const [prompt, setPrompt] = useState(null);
  const ask = () => new Promise((resolve) => setPrompt(() => (answer) => {
    setPrompt(null);
    resolve(answer);
  }));
  return [prompt, ask];
}

// The password prompt of a sensitive call, as a modal dialog: focus on the password field,
// Escape or Cancel answers null.
export function PasswordPrompt({ onAnswer, reason }) {
  const [password, setPassword] = useState('');
  return html`<${Modal} title="Confirm your password" labelledBy="confirm-title" onCancel=${() => onAnswer(null)}>
    <form onSubmit=${(e) => { e.preventDefault(); onAnswer(password); }}>
      <p>${reason || 'Creating or rotating an agent token needs your password again.'}</p>
      <label>Password<input type="password" name="confirm-password" autocomplete="current-password"
        required autofocus value=${password} onInput=${(e) => setPassword(e.target.value)} /></label>
      <div class="row">
        <button type="submit">Confirm</button>
        <button type="button" class="secondary" onClick=${() => onAnswer(null)}>Cancel</button>
      </div>
    </form>
  </${Modal}>`;
}

// Rotating and revoking a connection's token, each after a confirmation: the calls the
// tokens page and a connection's Settings make. `act` runs a call (with the password prompt
// when the session needs it).
export function rotateToken(connection, act) {
  if (confirm('Rotate the token of ' + connection.cluster_name + '? The agent using the old token is refused at once.')) {
    act(() => api('POST', '/api/v1/connections/' + encodeURIComponent(connection.id) + '/rotate'));
  }
}

export function revokeToken(connection, act) {
  if (confirm('Revoke the token of ' + connection.cluster_name + '? The agent is refused on its next request, and this cannot be undone.')) {
    act(() => api('POST', '/api/v1/connections/' + encodeURIComponent(connection.id) + '/revoke'));
  }
}

// Runs token calls for a page: the password prompt when needed, the token shown once, errors.
export function useTokenCalls(onChanged) {
  const [reveal, setReveal] = useState(null);
  const [prompt, ask] = usePasswordPrompt();
  const [error, setError] = useState(null);
  const act = async (call) => {
    setError(null);
    try {
      const reply = await withConfirmation(call, ask);
      if (reply && reply.token) setReveal(reply);
      onChanged();
    } catch (e) {
      setError(e);
    }
  };
  return { act, reveal, setReveal, prompt, error };
}

export function TokenReveal({ reveal, onDone }) {
  const [copied, setCopied] = useState('');
  const keepRef = useRef(null);
  const copy = async (text, what) => {
    try {
      await navigator.clipboard.writeText(text);
      setCopied(what + ' copied.');
    } catch {
      setCopied('Copying was not allowed: select the text and copy it.');
    }
  };
  // Closing the card keeps the install choice with the connection (its page shows it).
  const done = async () => {
    try {
      if (keepRef.current) await keepRef.current();
    } finally {
      onDone();
    }
  };
  return html`<section class="reveal" aria-labelledby="reveal-title">
    <h2 id="reveal-title">Token for ${reveal.cluster_name}</h2>
    <p><strong>This token is shown only once.</strong> Store it in the cluster now; the console keeps only its hash.</p>
    <pre class="output token" data-token>${reveal.token}</pre>
    <div class="row">
      <button type="button" onClick=${() => copy(reveal.token, 'Token')}>Copy token</button>
    </div>
    <p role="status">${copied}</p>
    <${InstallSection} connectionId=${reveal.id} keepRef=${keepRef} />
    <button type="button" onClick=${done}>I stored the token</button>
  </section>`;
}

export function TokensPage() {
  usePageTitle('Agent tokens');
  const now = useNow();
  const [version, setVersion] = useState(0);
  const { data, error } = usePoll(() => api('GET', '/api/v1/connections'), 5000, [version], []);
  const [form, setForm] = useState({ agent_name: 'uplink-agent', cluster_name: '', expires: '', namespaces: '' });
  const { act, reveal, setReveal, prompt, error: actionError } = useTokenCalls(() => setVersion((v) => v + 1));
  const create = (event) => {
    event.preventDefault();
    const body = { agent_name: form.agent_name, cluster_name: form.cluster_name };
    if (form.expires) body.expires_at = new Date(form.expires + 'T23:59:59Z').toISOString().replace('.000', '');
    // The namespace scope: names, * for all, "none" for cluster-scoped reads only; empty: later.
    const scope = form.namespaces.trim();
    if (scope) body.namespaces = scope === 'none' ? [] : scope.split(/[\s,]+/).filter(Boolean);
    act(() => api('POST', '/api/v1/connections', body));
  };
  const field = (key) => (e) => setForm({ ...form, [key]: e.target.value });
  return html`<section>
    <h1>Agent tokens</h1>
    ${prompt && html`<${PasswordPrompt} onAnswer=${prompt} />`}
    ${reveal ? html`<${TokenReveal} reveal=${reveal} onDone=${() => setReveal(null)} />`
      : html`<form class="create" onSubmit=${create} aria-labelledby="create-title">
      <h2 id="create-title">New agent token</h2>
      <label>Agent name<input name="agent_name" required maxlength="63" value=${form.agent_name} onInput=${field('agent_name')} /></label>
      <label>Cluster name<input name="cluster_name" required maxlength="63" value=${form.cluster_name} onInput=${field('cluster_name')} /></label>
      <label>Expires (optional, default 90 days)<input type="date" name="expires" value=${form.expires} onInput=${field('expires')} /></label>
      <label>Namespaces kubectl may read (optional: ml, dev · * for all · none for cluster-scoped reads only; empty to choose later)
        <input name="namespaces" value=${form.namespaces} onInput=${field('namespaces')} spellcheck="false" autocomplete="off" /></label>
      <button type="submit">Create token</button>
    </form>`}
    <${ErrorText} error=${actionError || error} />
    ${data && html`<div class="table-wrap"><table class="tokens">
      <thead><tr><th scope="col">Cluster and token</th><th scope="col">Status</th>
        <th scope="col">Last report</th><th scope="col" class="wide-only">Created</th><th scope="col">Expires</th>
        <th scope="col">Actions</th><th scope="col" class="wide-only">Agent version</th></tr></thead>
      <tbody>${data.connections.map((c) => html`<tr key=${c.id} data-connection=${c.cluster_name}>
        <td>${c.cluster_name}<div class="muted">${c.agent_name} · <code>${c.token_prefix}…</code></div></td>
        <td><${Badge} connection=${c} now=${now} /></td>
        <td><${Time} iso=${c.last_report_at} now=${now} none="never" /></td>
        <td class="wide-only"><${Time} iso=${c.created_at} now=${now} /></td>
        <td><${Time} iso=${c.expires_at} now=${now} /></td>
        <td class="actions">${c.status !== 'revoked' && html`
          <button type="button" class="secondary" onClick=${() => rotateToken(c, act)}>Rotate</button>
          <button type="button" class="danger" onClick=${() => revokeToken(c, act)}>Revoke</button>`}</td>
        <td class="wide-only">${c.agent_version || '–'}</td>
      </tr>`)}</tbody></table></div>`}
  </section>`;
}
