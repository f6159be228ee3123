// The uplink web console: sign-in, connections, a connection's nodes, charts, cluster view,
// kubectl console and experiment runs, approvals, agent tokens, audit log and users.
// Everything from the cluster is rendered as text (htm escapes it); nothing is ever set as HTML.
import { h, render } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import htm from 'htm';
import 'uplot/dist/uPlot.min.css';
import './style.css';
import { api, ApiError, setCsrfToken } from './api.js';
import { ApprovalsLabel, ApprovalsPage } from './approvals.js';
import { ConnectionPage } from './connection.js';
import { RunPage, RunsPage } from './runs.js';
import { TokensPage } from './tokens.js';
import { ApiKeysPage, AuditPage, UsersPage } from './admin.js';
import { ago } from './format.js';
import { AgentRefusedNotice, CodeInput, TwoFactorPage, secondFactor } from './two_factor.js';
import { Badge, ErrorText, useNow, usePoll } from './ui.js';

const html = htm.bind(h);

function useHashRoute() {
  // The hash as it is (not defaulted), so that following a link to the default page renders.
  const [hash, setHash] = useState(location.hash);
  useEffect(() => {
    const onChange = () => setHash(location.hash);
    addEventListener('hashchange', onChange);
    return () => removeEventListener('hashchange', onChange);
  }, []);
  return (hash || '#/connections').slice(1).split('/').filter(Boolean).map(decodeURIComponent);
}

// `linked`: names open the connection's page (not for a user held to two-factor enrolment).
function ConnectionsPage({ linked = true }) {
  const now = useNow();
  const { data, error } = usePoll(() => api('GET', '/api/v1/connections'), 5000, []);
  const connections = data ? data.connections : null;
  return html`<section>
    <h1>Connections</h1>
    <${ErrorText} error=${error} />
    ${connections && connections.length === 0 &&
    html`<p>No connections yet. <a href="#/tokens">Create an agent token</a> to connect a cluster.</p>`}
    ${connections && connections.length > 0 && html`<div class="table-wrap"><table class="connections">
      <thead><tr><th scope="col">Cluster</th><th scope="col">State</th><th scope="col">Last seen</th>
        <th scope="col">Agent version</th><th scope="col">Nodes</th><th scope="col">GPUs ready / total</th></tr></thead>
      <tbody>${connections.map((c) => html`<tr key=${c.id} data-connection=${c.cluster_name}>
        <td>${linked ? html`<a href=${'#/connections/' + encodeURIComponent(c.id)}>${c.cluster_name}</a>` : c.cluster_name}
          <div class="muted">${c.agent_name}</div></td>
        <td><${Badge} connection=${c} now=${now} /><${AgentRefusedNotice} connection=${c} brief /></td>
        <td>${ago(c.last_seen_at, now)}</td>
        <td>${c.agent_version || '–'}</td>
        <td>${c.last_report_at ? c.totals.nodes : '–'}</td>
        <td>${c.last_report_at ? c.totals.gpus_ready + ' / ' + c.totals.gpu_capacity : '–'}</td>
      </tr>`)}</tbody></table></div>`}
  </section>`;
}

function SignIn({ onSignedIn }) {
  const [email, setEmail] = useState('');
  const [password, setPassword] = useState('');
  // Asked once the console answers that the account has two-factor sign-in.
  const [code, setCode] = useState(null);
  const [error, setError] = useState(null);
  const [busy, setBusy] = useState(false);
  const submit = async (event) => {
    event.preventDefault();
    setBusy(true);
    setError(null);
    try {
      const body = { email, password, ...(code === null ? {} : secondFactor(code)) };
      const session = await api('POST', '/api/v1/web/sign-in', body);
      setCsrfToken(session.csrf_token);
      setPassword('');
      onSignedIn(session);
    } catch (e) {
      if (e.code === 'two_factor_required') setCode('');
      else setError(e);
    } finally {
      setBusy(false);
    }
  };
  return html`<main class="sign-in">
    <form onSubmit=${submit} aria-labelledby="sign-in-title">
      <h1 id="sign-in-title">Sign in to uplink</h1>
      <label>Email<input type="email" name="email" autocomplete="username" required
        value=${email} onInput=${(e) => setEmail(e.target.value)} /></label>
      <label>Password<input type="password" name="password" autocomplete="current-password" required
        value=${password} onInput=${(e) => setPassword(e.target.value)} /></label>
      ${code !== null && html`<p>This account signs in with two factors.</p>
        <${CodeInput} value=${code} onInput=${setCode} label="Code from your authenticator app, or a recovery code" />`}
      <${ErrorText} error=${error} />
      <button type="submit" disabled=${busy}>Sign in</button>
    </form>
  </main>`;
}

function App() {
  const [session, setSession] = useState(undefined);
  const route = useHashRoute();
  useEffect(() => {
    const signedOut = () => {
      setCsrfToken('');
      setSession(null);
    };
    addEventListener('uplink:signed-out', signedOut);
    return () => removeEventListener('uplink:signed-out', signedOut);
  }, []);
  useEffect(() => {
    api('GET', '/api/v1/web/session').then(
      (s) => {
        setCsrfToken(s.csrf_token);
        setSession(s);
      },
      () => setSession(null),
    );
  }, []);
  if (session === undefined) return html`<p class="loading">Loading…</p>`;
  if (!session) return html`<${SignIn} onSignedIn=${setSession} />`;
  const signOut = async () => {
    try {
      await api('POST', '/api/v1/web/sign-out');
    } catch (e) {
      if (!(e instanceof ApiError) || e.status !== 401) throw e;
    }
    setCsrfToken('');
    setSession(null);
  };
  const admin = session.user.role === 'admin';
  const [page, id, sub, subId] = route;
  // A user the console requires two-factor sign-in of may do nothing else until it is set up.
  const enrolOnly = session.two_factor_enrollment_required;
  // Held to enrolment, the list of connections is shown only when asked for: the page opens
  // on setting up two-factor.
  const enrolOnlyConnections = enrolOnly && location.hash.startsWith('#/connections');
  const reloadSession = () => api('GET', '/api/v1/web/session').then(setSession, () => {});
  const nav = enrolOnly ? [['two-factor', 'Two-factor'], ['connections', 'Connections']]
    : [['connections', 'Connections'], ['tokens', 'Agent tokens'],
      ['approvals', html`<${ApprovalsLabel} />`], ['audit', 'Audit log'], ['api-keys', 'API keys']];
  if (admin && !enrolOnly) nav.push(['users', 'Users']);
  if (!enrolOnly) nav.push(['two-factor', 'Two-factor']);
  let content;
  if (enrolOnlyConnections) {
    // Their connections' list (where refused agents show) and nothing else of them.
    content = html`<${ConnectionsPage} linked=${false} />`;
  } else if (page === 'two-factor' || enrolOnly) {
    content = html`<${TwoFactorPage} user=${session.user} onChanged=${reloadSession} />`;
  } else if (page === 'connections' && id && sub === 'runs' && subId) {
    content = html`<${RunPage} connectionId=${id} runId=${subId} />`;
  } else if (page === 'connections' && id && sub === 'runs') {
    content = html`<${RunsPage} connectionId=${id} />`;
  } else if (page === 'connections' && id) content = html`<${ConnectionPage} id=${id} />`;
  else if (page === 'tokens') content = html`<${TokensPage} />`;
  else if (page === 'approvals') content = html`<${ApprovalsPage} />`;
  else if (page === 'audit') content = html`<${AuditPage} />`;
  else if (page === 'api-keys') content = html`<${ApiKeysPage} />`;
  else if (page === 'users' && admin) content = html`<${UsersPage} me=${session.user.id} />`;
  else content = html`<${ConnectionsPage} />`;
  return html`<div class="shell">
    <header>
      <a class="brand" href="#/connections">uplink</a>
      <nav aria-label="Main">${nav.map(([key, label]) => html`<a key=${key} href=${'#/' + key}
        aria-current=${(enrolOnly && !enrolOnlyConnections ? 'two-factor' : page || 'connections') === key ? 'page' : undefined}>${label}</a>`)}</nav>
      <span class="who">${session.user.email}</span>
      <button type="button" class="secondary" onClick=${signOut}>Sign out</button>
    </header>
    <main>${content}</main>
  </div>`;
}

render(html`<${App} />`, document.getElementById('app'));
