// Two-factor sign-in: your own (set up with a QR code and a first code, recovery codes shown
// once, turned off or given new recovery codes with your password and a code), the admins'
// setting that requires it, and the notice on a connection whose agent it shuts out.
import { h } from 'preact';
import { useState } from 'preact/hooks';
import htm from 'htm';
import { api } from './api.js';
import { PasswordPrompt, usePasswordPrompt, withConfirmation } from './tokens.js';
import { ErrorText, Time, usePageTitle, usePoll } from './ui.js';

const html = htm.bind(h);
const quietZone = 4;

// The console's QR code (rows of '0' and '1') as SVG: dark squares on white with a quiet
// zone, as scanners expect whatever the page's colours.
export function QrCode({ rows, label }) {
  const size = rows.length + 2 * quietZone;
  let path = '';
  rows.forEach((row, y) => {
    for (let x = 0; x < row.length; x++) {
      if (row[x] === '1') path += 'M' + (x + quietZone) + ' ' + (y + quietZone) + 'h1v1h-1z';
    }
  });
  return html`<svg class="qr" viewBox=${'0 0 ' + size + ' ' + size} role="img" aria-label=${label}
      shape-rendering="crispEdges" data-qr>
    <rect width=${size} height=${size} fill="#ffffff" /><path d=${path} fill="#000000" /></svg>`;
}

// What a person typed as the body field the console expects: six digits are an app's code
// (apps show "123 456"), anything else a recovery code.
export function secondFactor(typed) {
  const compact = typed.replace(/\s+/g, '');
  return /^\d{6}$/.test(compact) ? { code: compact } : { recovery_code: typed.trim() };
}

function grouped(secret) {
  return secret.replace(/(.{4})/g, '$1 ').trim();
}

export function CodeInput({ value, onInput, label = 'Code from your authenticator app' }) {
  return html`<label>${label}<input name="two-factor-code" inputmode="numeric" autocomplete="one-time-code"
    required maxlength="40" spellcheck="false" value=${value} onInput=${(e) => onInput(e.target.value)} /></label>`;
}

function RecoveryCodes({ codes, onDone }) {
  const [copied, setCopied] = useState('');
  const copy = async () => {
    try {
      await navigator.clipboard.writeText(codes.join('\n') + '\n');
      setCopied('Recovery codes copied.');
    } catch {
      setCopied('Copying was not allowed: select the codes and copy them.');
    }
  };
  return html`<section class="reveal" aria-labelledby="recovery-title">
    <h2 id="recovery-title">Recovery codes</h2>
    <p><strong>These codes are shown only once.</strong> Each signs you in once without the app,
      if you lose it. Store them now, somewhere other than the device; the console keeps only their hashes.</p>
    <pre class="output recovery-codes" data-recovery-codes>${codes.join('\n')}</pre>
    <div class="row"><button type="button" class="secondary" onClick=${copy}>Copy codes</button></div>
    <p role="status">${copied}</p>
    <button type="button" onClick=${onDone}>I stored the recovery codes</button>
  </section>`;
}

function Enrolment({ onEnabled }) {
  const [begun, setBegun] = useState(null);
  const [code, setCode] = useState('');
  const [error, setError] = useState(null);
  const [busy, setBusy] = useState(false);
  const [prompt, ask] = usePasswordPrompt();
  const start = async () => {
    setError(null);
    try {
      const reply = await withConfirmation(() => api('POST', '/api/v1/two-factor/enrollment'), ask);
      if (reply) setBegun(reply);
    } catch (e) {
      setError(e);
    }
  };
  const confirm = async (event) => {
    event.preventDefault();
    setError(null);
    setBusy(true);
    try {
      const reply = await api('POST', '/api/v1/two-factor/enrollment/confirm', { code: code.replace(/\s+/g, '') });
      onEnabled(reply.recovery_codes);
    } catch (e) {
      setError(e);
    } finally {
      setBusy(false);
    }
  };
  if (!begun) {
    return html`<div>
      ${prompt && html`<${PasswordPrompt} onAnswer=${prompt} reason="Setting up two-factor sign-in needs your password again." />`}
      <p>With two-factor sign-in, signing in takes your password and a 6-digit code from an
        authenticator app on your phone (any TOTP app), so a stolen password alone is not enough.</p>
      <button type="button" onClick=${start}>Set up two-factor sign-in</button>
      <${ErrorText} error=${error} />
    </div>`;
  }
  return html`<section class="enrolment" aria-labelledby="enrol-title">
    <h2 id="enrol-title">1. Add uplink to your authenticator app</h2>
    <div class="enrolment-steps">
      <figure class="qr-figure">
        <${QrCode} rows=${begun.qr_code} label="QR code for your authenticator app" />
        <figcaption>Scan with the app</figcaption>
      </figure>
      <div>
        <p>Or enter this key by hand:</p>
        <p><code class="secret" data-secret=${begun.secret}>${grouped(begun.secret)}</code></p>
        <dl class="facts">
          <dt>Account</dt><dd>${begun.account}</dd>
          <dt>Issuer</dt><dd>${begun.issuer}</dd>
          <dt>Type</dt><dd>time-based, ${begun.digits} digits, every ${begun.period} seconds</dd>
        </dl>
      </div>
    </div>
    <form onSubmit=${confirm} aria-labelledby="confirm-code-title">
      <h2 id="confirm-code-title">2. Prove it works</h2>
      <p>Two-factor sign-in is on only once the console has seen a code from the app.</p>
      <${CodeInput} value=${code} onInput=${setCode} />
      <${ErrorText} error=${error} />
      <button type="submit" disabled=${busy}>Turn on two-factor sign-in</button>
    </form>
  </section>`;
}

// Password (when the user has one) and a code: what turning it off and new recovery codes need.
function ProofForm({ title, action, danger, hasPassword, onProved, note }) {
  const [password, setPassword] = useState('');
  const [code, setCode] = useState('');
  const [error, setError] = useState(null);
  const submit = async (event) => {
    event.preventDefault();
    setError(null);
    try {
      const body = secondFactor(code);
      if (hasPassword) body.password = password;
      await onProved(body);
      setPassword('');
      setCode('');
    } catch (e) {
      setError(e);
    }
  };
  return html`<form class="create" onSubmit=${submit} aria-label=${title}>
    <h2>${title}</h2>
    ${note && html`<p>${note}</p>`}
    ${hasPassword && html`<label>Password<input type="password" name="proof-password" autocomplete="current-password"
      required value=${password} onInput=${(e) => setPassword(e.target.value)} /></label>`}
    <${CodeInput} value=${code} onInput=${setCode} label="Code from your authenticator app, or a recovery code" />
    <${ErrorText} error=${error} />
    <button type="submit" class=${danger ? 'danger' : ''}>${action}</button>
  </form>`;
}

export function TwoFactorPage({ user, onChanged }) {
  usePageTitle('Two-factor sign-in');
  const [version, setVersion] = useState(0);
  const [codes, setCodes] = useState(null);
  const { data: status, error } = usePoll(() => api('GET', '/api/v1/two-factor'), 0, [version], []);
  const changed = () => {
    setVersion((v) => v + 1);
    onChanged();
  };
  const turnOff = async (body) => {
    await api('POST', '/api/v1/two-factor/disable', body);
    changed();
  };
  const renew = async (body) => {
    const reply = await api('POST', '/api/v1/two-factor/recovery-codes', body);
    setCodes(reply.recovery_codes);
  };
  return html`<section>
    <h1>Two-factor sign-in</h1>
    <${ErrorText} error=${error} />
    ${status && status.enrollment_required && html`<p class="notice danger" role="alert" data-enrollment-required>
      This console requires two-factor sign-in. Until you set it up, you can do nothing else
      here, and the agents of your connections are refused.</p>`}
    ${status && html`<dl class="facts">
      <dt>Status</dt><dd class=${status.enabled ? 'ok' : status.required ? 'error' : ''}
        data-two-factor-status=${status.enabled ? 'on' : 'off'}>${status.enabled
        ? html`on since <${Time} iso=${status.enabled_at} />` : 'off'}</dd>
      ${status.enabled && html`<dt>Recovery codes</dt><dd>${status.recovery_codes_left} left</dd>`}
      <dt>Required by this console</dt><dd>${status.required ? 'yes' : 'no'}</dd>
    </dl>`}
    ${codes && html`<${RecoveryCodes} codes=${codes} onDone=${() => setCodes(null)} />`}
    ${status && !codes && (status.enabled
      ? html`<${ProofForm} title="New recovery codes" action="Replace my recovery codes" hasPassword=${user.has_password}
            onProved=${renew} note="The old codes stop working at once." />
          <${ProofForm} title="Turn off two-factor sign-in" action="Turn off" danger hasPassword=${user.has_password}
            onProved=${turnOff} note=${status.required
              ? 'This console requires it: once it is off you can do nothing but set it up again, and your agents are refused until you do.'
              : 'Signing in will take your password alone.'} />`
      : html`<${Enrolment} onEnabled=${(recovery) => { setCodes(recovery); changed(); }} />`)}
  </section>`;
}

// The admins' setting, on the Users page: whether the console requires two-factor sign-in,
// and whom that shuts out.
export function RequireTwoFactorSetting() {
  const [version, setVersion] = useState(0);
  const { data: settings, error } = usePoll(() => api('GET', '/api/v1/settings'), 0, [version], []);
  const [actionError, setActionError] = useState(null);
  const [prompt, ask] = usePasswordPrompt();
  if (!settings) return html`<${ErrorText} error=${error} />`;
  const required = settings.require_two_factor;
  const without = settings.without_two_factor || { users: 0, emails: [], connections: 0 };
  const toggle = async () => {
    const verb = required ? 'Stop requiring' : 'Require';
    const warning = required ? '' : ' ' + without.users + ' user(s) without it will be able to do nothing but set it up, and '
      + without.connections + ' connection(s) of theirs will have their agents refused until they do.';
    if (!confirm(verb + ' two-factor sign-in?' + warning)) return;
    setActionError(null);
    try {
      const reply = await withConfirmation(
        () => api('PUT', '/api/v1/settings', { require_two_factor: !required }), ask);
      if (reply) setVersion((v) => v + 1);
    } catch (e) {
      setActionError(e);
    }
  };
  return html`<section class="setting" aria-labelledby="require-title" data-require-two-factor=${required ? 'on' : 'off'}>
    ${prompt && html`<${PasswordPrompt} onAnswer=${prompt} reason="Changing the console's settings needs your password again." />`}
    <h2 id="require-title">Require two-factor sign-in: ${required ? 'on' : 'off'}</h2>
    <p>While it is on, a user without two-factor sign-in can sign in only to set it up, and the
      agents of their connections are refused (<code>owner_needs_two_factor</code>) until they do.</p>
    <p data-without-two-factor>${without.users === 0 ? 'Every active user has set it up.'
      : without.users + ' active user(s) without it: ' + without.emails.join(', ') + '; '
        + without.connections + ' connection(s) of theirs' + (required ? ' have their agents refused.' : ' would have their agents refused.')}</p>
    <${ErrorText} error=${actionError} />
    <button type="button" class=${required ? 'danger' : ''} onClick=${toggle}>${required ? 'Stop requiring it' : 'Require it'}</button>
  </section>`;
}

// The admins' way out for a user who lost their authenticator and their recovery codes.
export function ResetTwoFactor({ user, onReset }) {
  const [error, setError] = useState(null);
  const [prompt, ask] = usePasswordPrompt();
  if (!user.two_factor_enabled) return null;
  const reset = async () => {
    if (!confirm('Turn off the two-factor sign-in of ' + user.email + '? They sign in with their password alone until they set it up again.')) return;
    setError(null);
    try {
      const reply = await withConfirmation(
        () => api('POST', '/api/v1/users/' + encodeURIComponent(user.id) + '/two-factor/reset'), ask);
      if (reply) onReset();
    } catch (e) {
      setError(e);
    }
  };
  return html`<span>
    ${prompt && html`<${PasswordPrompt} onAnswer=${prompt} reason="Resetting another user's two-factor sign-in needs your password again." />`}
    <button type="button" class="secondary" onClick=${reset}>Reset</button>
    <${ErrorText} error=${error} />
  </span>`;
}

// On a connection whose agent is refused because its owner lacks required two-factor sign-in;
// `brief` for a table cell.
export function AgentRefusedNotice({ connection, brief }) {
  if (!connection.owner_needs_two_factor) return null;
  return html`<p class="notice danger" role="status" data-refused="owner_needs_two_factor">${brief
    ? html`Agent refused: owner has no two-factor sign-in`
    : html`Agent refused: the owner of this connection has not set up the two-factor sign-in this
      console requires (<code>owner_needs_two_factor</code>). The agent works again as soon as they do.`}</p>`;
}
