// The uplink web console: sign-in, the connections (the fleet's health), a connection's tabs,
// experiment runs, approvals, agent tokens, offers and reservations (workspaces.js), audit
// log, API keys and users; a not-found view
// for any other address. Everything from the cluster is rendered as text (htm escapes it);
// nothing is ever set as HTML.
import { h, render } from 'preact';
import { useEffect, useRef, useState } from 'preact/hooks';
import htm from 'htm';
import 'uplot/dist/uPlot.min.css';
import './style.css';
import { api, ApiError, setCsrfToken } from './api.js';
import { ApprovalsLabel, ApprovalsPage } from './approvals.js';
import { ConnectionPage, connectionTabs } from './connection.js';
import { ConnectionsPage } from './connections.js';
import { RunPage, RunsPage } from './runs.js';
import { TokensPage } from './tokens.js';
import { OfferPage, OffersPage, ReservationPage, ReservationsPage } from './workspaces.js';
import { ApiKeysPage, AuditPage, UsersPage } from './admin.js';
import { CodeInput, TwoFactorPage, secondFactor } from './two_factor.js';
import { ErrorText, usePageTitle } from './ui.js';

const html = htm.bind(h);

function useHashRoute() {
  // The hash as it is (not defaulted), so that following a link to the default page renders.
  const [hash, setHash] = useState(location.hash);
  useEffect(() => {
    const onChange = () => setHash(location.hash);
    addEventListener('hashchange', onChange);
    return () => removeEventListener('hashchange', onChange);
  }, []);
  // A part that is not valid percent-encoding stays as typed (and names nothing).
  const decode = (part) => {
    try {
      return decodeURIComponent(part);
    } catch {
      return part;
    }
  };
  return (hash || '#/connections').slice(1).split('/').filter(Boolean).map(decode);
}

// Why the sign-in form is back: the session ended behind the page's back (the API said 401).
const endedText = {
  expired: 'Your session expired. Sign in again to go on where you were.',
  revoked: 'Your session was ended (signed out elsewhere, a password change or a deactivation). Sign in again.',
};

function SignIn({ onSignedIn, ended }) {
  usePageTitle('Sign in');
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
      ${ended && html`<p class="notice" role="status" data-session-ended>${endedText[ended] ||
        'You were signed out. Sign in again.'}</p>`}
      <label>Email<input type="email" name="email" autocomplete="username" required autofocus
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

function NotFoundPage() {
  usePageTitle('Page not found');
  return html`<section>
    <h1>Page not found</h1>
    <p>Nothing lives at <code>${location.hash || '/'}</code> in the uplink console.</p>
    <p><a href="#/connections">Go to the connections</a></p>
  </section>`;
}

function App() {
  const [session, setSession] = useState(undefined);
  // Why the session ended while the page was open ('expired', 'revoked', ...), for the form.
  const [ended, setEnded] = useState(null);
  const route = useHashRoute();
  const signedIn = useRef(false);
  signedIn.current = Boolean(session);
  useEffect(() => {
    const signedOut = (event) => {
      setCsrfToken('');
      if (signedIn.current) setEnded((event.detail && event.detail.code) || 'signed_out');
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
      // A cookie whose session expired or was ended: said on the form, as when it happens
      // while the page is open.
      (e) => {
        if (e.code === 'expired' || e.code === 'revoked') setEnded(e.code);
        setSession(null);
      },
    );
  }, []);
  if (session === undefined) return html`<p class="loading">Loading…</p>`;
  if (!session) {
    return html`<${SignIn} ended=${ended} onSignedIn=${(s) => { setEnded(null); setSession(s); }} />`;
  }
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
      ['approvals', html`<${ApprovalsLabel} />`], ['offers', 'Offers'], ['reservations', 'Reservations'],
      ['audit', 'Audit log'], ['api-keys', 'API keys']];
  if (admin && !enrolOnly) nav.push(['users', 'Users']);
  if (!enrolOnly) nav.push(['two-factor', 'Two-factor']);
  let content;
  const tabs = connectionTabs.map(([key]) => key);
  if (enrolOnlyConnections) {
    // Their connections' list (where refused agents show) and nothing else of them.
    content = html`<${ConnectionsPage} linked=${false} />`;
  } else if (page === 'two-factor' || enrolOnly) {
    content = html`<${TwoFactorPage} user=${session.user} onChanged=${reloadSession} />`;
  } else if (page === 'connections' && id && sub === 'runs' && subId && route.length === 4) {
    content = html`<${RunPage} connectionId=${id} runId=${subId} />`;
  } else if (page === 'connections' && id && sub === 'runs' && route.length === 3) {
    content = html`<${RunsPage} connectionId=${id} />`;
  } else if (page === 'connections' && id && (!sub || tabs.includes(sub)) &&
             (route.length <= 3 || (sub === 'nodes' && route.length === 4))) {
    content = html`<${ConnectionPage} id=${id} tab=${sub || 'overview'} node=${sub === 'nodes' ? subId : undefined} />`;
  } else if (!page || (page === 'connections' && route.length === 1)) content = html`<${ConnectionsPage} />`;
  else if (page === 'tokens' && route.length === 1) content = html`<${TokensPage} />`;
  else if (page === 'approvals' && route.length === 1) content = html`<${ApprovalsPage} />`;
  else if (page === 'offers' && route.length === 1) content = html`<${OffersPage} />`;
  else if (page === 'offers' && id && route.length === 2) content = html`<${OfferPage} id=${id} admin=${admin} me=${session.user.id} />`;
  else if (page === 'reservations' && route.length === 1) content = html`<${ReservationsPage} />`;
  else if (page === 'reservations' && id && route.length === 2) content = html`<${ReservationPage} id=${id} />`;
  else if (page === 'audit' && route.length === 1) content = html`<${AuditPage} />`;
  else if (page === 'api-keys' && route.length === 1) content = html`<${ApiKeysPage} />`;
  else if (page === 'users' && admin && route.length === 1) content = html`<${UsersPage} me=${session.user.id} />`;
  else content = html`<${NotFoundPage} />`;
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
