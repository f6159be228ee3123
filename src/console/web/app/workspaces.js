// Workspace execution: offers (the supplier's capacity form, "save capacity and connect
// cluster"), an offer with the admin's review (checks, per-GPU figures, the approved nodes
// picked from the reported inventory) and its execution (the credential once, execution.json
// to download, the helm upgrade command with the release the controller reported),
// reservations, and a reservation with its transitions, its SSH readiness and transfer meter,
// and a command box whose output streams.
// Everything is rendered as text.
import { h } from 'preact';
import { useEffect, useRef, useState } from 'preact/hooks';
import htm from 'htm';
import { api } from './api.js';
import { PasswordPrompt, usePasswordPrompt, withConfirmation } from './tokens.js';
import { ErrorText, Time, useNow, usePageTitle, usePoll } from './ui.js';

const html = htm.bind(h);

const reviewChecks = [
  ['authority_confirmed', 'Supplier authority confirmed'],
  ['hardware_compatible', 'Hardware compatible'],
  ['isolation_verified', 'Isolation verified'],
  ['expiry_and_cleanup_checked', 'Access expiry and cleanup checked'],
  ['disk_eviction_tested', 'Disk-eviction test done'],
  ['network_policy_enforced', 'Network-policy enforcement verified on the supplier\u2019s CNI'],
  ['price_includes_traffic', 'Price includes traffic costs'],
];

const offerStateText = {
  draft: 'draft: waiting for the cluster', connected: 'connected: waiting for review',
  in_review: 'in review', qualified: 'qualified', suspended: 'suspended',
};

const gib = 1024 ** 3;

function offerHref(id) {
  return '#/offers/' + encodeURIComponent(id);
}

function reservationHref(id) {
  return '#/reservations/' + encodeURIComponent(id);
}

export function OfferState({ state }) {
  return html`<span class=${'badge offer-' + state} data-offer-state=${state}>${offerStateText[state] || state}</span>`;
}

export function ReservationState({ state }) {
  return html`<span class=${'badge reservation-' + state} data-reservation-state=${state}>${state}</span>`;
}

function price(offer) {
  return offer.price_per_gpu_hour + ' ' + offer.currency + ' / GPU-hour';
}

function bytes(n) {
  if (n >= 1024 ** 4 && n % 1024 ** 4 === 0) return n / 1024 ** 4 + ' TiB';
  if (n >= gib) return Number((n / gib).toFixed(1)) + ' GiB';
  return n + ' B';
}

// The runner of a page's calls: the password prompt when a call needs it, and the error.
function useCalls() {
  const [prompt, ask] = usePasswordPrompt();
  const [error, setError] = useState(null);
  const [busy, setBusy] = useState(false);
  const run = async (call) => {
    setError(null);
    setBusy(true);
    try {
      return await withConfirmation(call, ask);
    } catch (e) {
      setError(e);
      return null;
    } finally {
      setBusy(false);
    }
  };
  const promptView = prompt && html`<${PasswordPrompt} onAnswer=${prompt}
    reason="Creating an offer or an execution credential needs your password again." />`;
  return { run, error, busy, promptView };
}

function OfferForm({ onCreated }) {
  const [form, setForm] = useState({ cluster_name: '', gpus: 8, country: '', price: '', currency: 'EUR',
                                     always: true, from: '', until: '' });
  const { run, error, busy, promptView } = useCalls();
  const set = (key) => (e) => setForm({ ...form, [key]: e.target.type === 'checkbox' ? e.target.checked : e.target.value });
  const submit = async (event) => {
    event.preventDefault();
    const body = { cluster_name: form.cluster_name, gpus: Number(form.gpus), country: form.country,
                   price_per_gpu_hour: form.price, currency: form.currency };
    if (!form.always) {
      body.availability = {};
      if (form.from) body.availability.from = new Date(form.from).toISOString();
      if (form.until) body.availability.until = new Date(form.until).toISOString();
    }
    const reply = await run(() => api('POST', '/api/v1/offers', body));
    if (reply) onCreated(reply);
  };
  return html`<form class="create" onSubmit=${submit} aria-labelledby="offer-form-title">
    <h2 id="offer-form-title">Offer GPU capacity</h2>
    <p class="hint">The offer and its cluster connection are made together; you install the inventory
      agent with the token shown next, and an admin reviews the nodes it reports.</p>
    <div class="row">
      <label>Cluster name<input name="cluster_name" required value=${form.cluster_name} onInput=${set('cluster_name')} /></label>
      <label>GPUs<input name="gpus" type="number" min="1" required value=${form.gpus} onInput=${set('gpus')} /></label>
      <label>Country<input name="country" required maxlength="2" placeholder="DE" value=${form.country} onInput=${set('country')} /></label>
    </div>
    <div class="row">
      <label>Price per GPU-hour<input name="price" required inputmode="decimal" placeholder="2.10" value=${form.price} onInput=${set('price')} /></label>
      <label>Currency<input name="currency" required maxlength="3" value=${form.currency} onInput=${set('currency')} /></label>
    </div>
    <label class="choice"><input type="checkbox" name="always" checked=${form.always} onChange=${set('always')} /> Always available</label>
    ${!form.always && html`<div class="row">
      <label>Available from<input name="from" type="datetime-local" value=${form.from} onInput=${set('from')} /></label>
      <label>Available until<input name="until" type="datetime-local" value=${form.until} onInput=${set('until')} /></label>
    </div>`}
    <${ErrorText} error=${error} />
    <button type="submit" disabled=${busy}>Save capacity and connect cluster</button>
    ${promptView}
  </form>`;
}

export function OffersPage() {
  usePageTitle('Offers');
  const [changes, setChanges] = useState(0);
  const [made, setMade] = useState(null);
  const { data, error } = usePoll(() => api('GET', '/api/v1/offers'), 15000, [changes], []);
  const offers = data ? data.offers : [];
  return html`<section aria-labelledby="offers-title">
    <h1 id="offers-title">Offers</h1>
    ${made && html`<div class="reveal" data-offer-token>
      <h2>Offer ${made.id} saved; its cluster connection is waiting</h2>
      <p>Install the inventory agent with this token (shown only this once; the console keeps no copy):</p>
      <pre class="token">${made.token}</pre>
      <p>The connection's <a href=${'#/connections/' + encodeURIComponent(made.connection_id) + '/settings'}>
        Settings</a> give the install commands. Once the agent reports, an admin reviews the offer.</p>
      <button type="button" class="secondary" onClick=${() => setMade(null)}>I have stored the token</button>
    </div>`}
    <${OfferForm} onCreated=${(reply) => { setMade(reply); setChanges(changes + 1); }} />
    <${ErrorText} error=${error} />
    ${offers.length === 0 ? html`<p class="muted">No offers yet.</p>` : html`<div class="table-wrap"><table data-offers>
      <thead><tr><th>Offer</th><th>State</th><th>Cluster</th><th class="number">GPUs</th><th>Country</th><th>Price</th></tr></thead>
      <tbody>${offers.map((o) => html`<tr key=${o.id} data-offer=${o.id}>
        <td>${o.mine !== false || o.review !== undefined ? html`<a href=${offerHref(o.id)}><code>${o.id}</code></a>` : html`<code>${o.id}</code>`}</td>
        <td><${OfferState} state=${o.state} /></td>
        <td>${o.cluster_name}</td><td class="number">${o.gpus}</td><td>${o.country}</td><td>${price(o)}</td>
      </tr>`)}</tbody></table></div>`}
  </section>`;
}

function ReviewForm({ offer, onSaved }) {
  const review = offer.review || {};
  const [checks, setChecks] = useState(Object.fromEntries(reviewChecks.map(([k]) => [k, Boolean(review[k])])));
  const [figures, setFigures] = useState({
    cpu: review.cpu_millis_per_gpu ? String(review.cpu_millis_per_gpu / 1000) : '',
    memory: review.memory_bytes_per_gpu ? review.memory_bytes_per_gpu / gib + 'Gi' : '',
    disk: review.disk_bytes_per_gpu ? review.disk_bytes_per_gpu / gib + 'Gi' : '',
    transfer: review.transfer_budget_bytes ? review.transfer_budget_bytes / gib + 'Gi' : '',
  });
  const [nodes, setNodes] = useState(new Set(review.approved_nodes || []));
  const { run, error, busy } = useCalls();
  const submit = async (event) => {
    event.preventDefault();
    const body = { ...checks, cpu_per_gpu: figures.cpu, memory_per_gpu: figures.memory,
                   disk_per_gpu: figures.disk, transfer_budget_bytes: figures.transfer,
                   approved_nodes: [...nodes] };
    const reply = await run(() => api('POST', '/api/v1/offers/' + encodeURIComponent(offer.id) + '/review', body));
    if (reply) onSaved();
  };
  const toggle = (name) => (e) => {
    const next = new Set(nodes);
    if (e.target.checked) next.add(name); else next.delete(name);
    setNodes(next);
  };
  const figure = (key) => (e) => setFigures({ ...figures, [key]: e.target.value });
  const all = reviewChecks.every(([k]) => checks[k]) && nodes.size > 0;
  return html`<form class="create review" onSubmit=${submit} aria-labelledby="review-title">
    <h2 id="review-title">Resource review</h2>
    <fieldset class="workloads"><legend>Checks</legend>
      ${reviewChecks.map(([key, label]) => html`<label class="choice" key=${key}><input type="checkbox"
        name=${key} checked=${checks[key]} onChange=${(e) => setChecks({ ...checks, [key]: e.target.checked })} /> ${label}</label>`)}
    </fieldset>
    <div class="row">
      <label>CPU per GPU<input name="cpu_per_gpu" required placeholder="8 or 7500m" value=${figures.cpu} onInput=${figure('cpu')} /></label>
      <label>Memory per GPU<input name="memory_per_gpu" required placeholder="64Gi" value=${figures.memory} onInput=${figure('memory')} /></label>
    </div>
    <div class="row">
      <label>Disk per GPU<input name="disk_per_gpu" required placeholder="100Gi" value=${figures.disk} onInput=${figure('disk')} /></label>
      <label>Transfer budget<input name="transfer_budget" required placeholder="1Ti" value=${figures.transfer} onInput=${figure('transfer')} /></label>
    </div>
    <fieldset class="workloads"><legend>Approved nodes (from the reported inventory)</legend>
      ${offer.nodes.length === 0 ? html`<p class="muted">The cluster has reported no nodes yet.</p>`
        : offer.nodes.map((n) => html`<label class="choice" key=${n.name}><input type="checkbox" name=${'node-' + n.name}
            checked=${nodes.has(n.name)} onChange=${toggle(n.name)} />
            ${n.name} <span class="muted">${n.gpu_allocatable} × ${n.gpu_product || 'GPU'}${n.ready ? '' : ', not ready'}${n.unschedulable ? ', cordoned' : ''}</span></label>`)}
    </fieldset>
    <p class=${all ? 'ok' : 'warn'} data-review-outcome>${all ? 'Saving qualifies the offer: it becomes bookable.'
      : 'Not every check is done or no node is approved: the offer stays in review.'}</p>
    <${ErrorText} error=${error} />
    <button type="submit" disabled=${busy}>Save review</button>
  </form>`;
}

function downloadJson(name, value) {
  const url = URL.createObjectURL(new Blob([JSON.stringify(value, null, 2) + '\n'], { type: 'application/json' }));
  const link = document.createElement('a');
  link.href = url;
  link.download = name;
  link.click();
  setTimeout(() => URL.revokeObjectURL(url), 1000);
}

// The execution section: the credential (once), execution.json, the helm upgrade command with
// the release the controller reported. Shown on the offer and on its connection's page.
export function ExecutionSection({ offer, onChanged, owner }) {
  const [issued, setIssued] = useState(null);
  const [cidrs, setCidrs] = useState((offer.execution.kubernetes_api_cidrs || []).join(', '));
  const { run, error, busy, promptView } = useCalls();
  const path = '/api/v1/offers/' + encodeURIComponent(offer.id) + '/execution';
  const execution = offer.execution;
  const live = execution.credential_prefix && !execution.credential_revoked_at;
  const issue = async (rotate) => {
    const body = rotate ? undefined : { kubernetes_api_cidrs: cidrs.split(/[\s,]+/).filter(Boolean) };
    const reply = await run(() => api('POST', path + (rotate ? '/rotate' : ''), body));
    if (reply) {
      setIssued(reply);
      onChanged();
    }
  };
  const disable = async () => {
    if (!confirm('Turn execution off for ' + offer.id + '? The controller stops accepting reservations.')) return;
    if (await run(() => api('POST', path + '/disable'))) onChanged();
  };
  const values = async () => {
    const reply = await run(() => api('GET', path));
    if (reply) downloadJson('execution.json', reply.values);
  };
  return html`<section class="setting" aria-labelledby="execution-title" data-execution>
    <h2 id="execution-title">Execution</h2>
    <dl class="facts">
      <dt>Enabled</dt><dd>${execution.enabled ? 'yes' : 'no'}</dd>
      <dt>Credential</dt><dd>${execution.credential_prefix ? html`<code>${execution.credential_prefix}…</code>${
        execution.credential_revoked_at ? ' (revoked)' : ''}` : 'none yet'}</dd>
      <dt>Helm release</dt><dd data-helm-release>${execution.helm_release || html`<span class="muted">not reported yet (the controller reports it)</span>`}</dd>
      <dt>Controller</dt><dd>${execution.controller_seen_at ? html`${execution.controller_version + ' in ' +
        execution.controller_namespace + ', last call '}<${Time} iso=${execution.controller_seen_at} />` : 'has not called yet'}</dd>
    </dl>
    <p>Upgrade the agent's release with the values:</p>
    <pre class="commands" data-helm-upgrade>${execution.helm_upgrade_command}</pre>
    ${issued && html`<div class="reveal" data-execution-credential>
      <h3>Execution credential (shown only this once)</h3>
      <pre class="token">${issued.credential}</pre>
      <p>Put it in the Secret the workspace controller reads, download execution.json, then run the command above.</p>
      <div class="row">
        <button type="button" onClick=${() => downloadJson('execution.json', issued.values)}>Download execution.json</button>
        <button type="button" class="secondary" onClick=${() => setIssued(null)}>I have stored the credential</button>
      </div>
    </div>`}
    ${owner && offer.state === 'qualified' && !live && html`<form onSubmit=${(e) => { e.preventDefault(); issue(false); }}>
      <label>Kubernetes API endpoint CIDRs<input name="kubernetes_api_cidrs" placeholder="10.96.0.1/32"
        value=${cidrs} onInput=${(e) => setCidrs(e.target.value)} /></label>
      <button type="submit" disabled=${busy}>Create execution credential</button>
    </form>`}
    ${owner && offer.state !== 'qualified' && !live && html`<p class="muted">Execution is configured once an admin qualifies the offer.</p>`}
    <div class="row">
      ${!issued && (live || execution.enabled) && html`<button type="button" class="secondary" onClick=${values}>Download execution.json</button>`}
      ${owner && live && html`<button type="button" class="secondary" disabled=${busy} onClick=${() => issue(true)}>Rotate credential</button>`}
      ${owner && execution.enabled && html`<button type="button" class="danger" disabled=${busy} onClick=${disable}>Disable execution</button>`}
    </div>
    <${ErrorText} error=${error} />
    ${promptView}
  </section>`;
}

export function OfferPage({ id, admin, me }) {
  usePageTitle(id, 'Offer');
  const [changes, setChanges] = useState(0);
  const { data: offer, error } = usePoll(() => api('GET', '/api/v1/offers/' + encodeURIComponent(id)), 15000, [id, changes], [id]);
  const { data: usage } = usePoll(() => api('GET', '/api/v1/reservations?offer_id=' + encodeURIComponent(id)), 15000, [id, changes], [id]);
  const { run, error: actionError } = useCalls();
  if (!offer) return html`<section><h1>Offer</h1><${ErrorText} error=${error} />${!error && html`<p class="loading">Loading…</p>`}</section>`;
  const changed = () => setChanges(changes + 1);
  const act = async (what) => {
    if (await run(() => api('POST', '/api/v1/offers/' + encodeURIComponent(id) + '/' + what))) changed();
  };
  const owner = offer.owner_id === me;
  return html`<section aria-labelledby="offer-title">
    <p class="crumbs"><a href="#/offers">Offers</a> /</p>
    <h1 id="offer-title">${offer.cluster_name} <${OfferState} state=${offer.state} /></h1>
    <dl class="facts">
      <dt>Offer</dt><dd><code>${offer.id}</code></dd>
      <dt>Capacity</dt><dd>${offer.gpus} GPUs, ${offer.usage.gpus_reserved} reserved in ${offer.usage.active_reservations} active reservations</dd>
      <dt>Where</dt><dd>${offer.country}</dd>
      <dt>Price</dt><dd>${price(offer)}</dd>
      <dt>Available</dt><dd>${offer.availability === 'always' ? 'always'
        : html`from <${Time} iso=${offer.availability.from} none="now" /> until <${Time} iso=${offer.availability.until} none="further notice" />`}</dd>
      <dt>Longest reservation</dt><dd>${offer.max_lifetime_seconds / 3600} h</dd>
      <dt>Connection</dt><dd><a href=${'#/connections/' + encodeURIComponent(offer.connection_id)}>${offer.cluster_name}</a></dd>
      ${offer.review && html`<dt>Per GPU</dt><dd data-per-gpu>${[
        offer.review.cpu_millis_per_gpu / 1000 + ' CPU', bytes(offer.review.memory_bytes_per_gpu) + ' memory',
        bytes(offer.review.disk_bytes_per_gpu) + ' disk'].join(', ')}; transfer budget ${bytes(offer.review.transfer_budget_bytes)}</dd>
        <dt>Reviewed</dt><dd>by ${offer.review.reviewed_by}, <${Time} iso=${offer.review.reviewed_at} />;
          nodes ${offer.review.approved_nodes.join(', ') || 'none'}</dd>`}
    </dl>
    ${offer.state === 'draft' && html`<p class="notice">Waiting for the cluster's inventory agent to report;
      install it from the <a href=${'#/connections/' + encodeURIComponent(offer.connection_id) + '/settings'}>connection's Settings</a>.</p>`}
    <div class="row">
      ${offer.state !== 'suspended' && offer.state !== 'draft' && html`<button type="button" class="secondary" onClick=${() => act('suspend')}>Suspend</button>`}
      ${offer.state === 'suspended' && admin && html`<button type="button" onClick=${() => act('resume')}>Resume</button>`}
    </div>
    <${ErrorText} error=${actionError} />
    ${admin && offer.state !== 'draft' && html`<${ReviewForm} key=${offer.updated_at} offer=${offer} onSaved=${changed} />`}
    <${ExecutionSection} offer=${offer} onChanged=${changed} owner=${owner} />
    <h2>Usage</h2>
    ${!usage || usage.reservations.length === 0 ? html`<p class="muted">No reservations yet.</p>`
      : html`<div class="table-wrap"><table data-usage><thead><tr><th>Reservation</th><th>State</th><th class="number">GPUs</th><th>Node</th><th>From</th><th>Until</th></tr></thead>
        <tbody>${usage.reservations.map((r) => html`<tr key=${r.id}><td><code>${r.id}</code></td><td><${ReservationState} state=${r.state} /></td>
          <td class="number">${r.gpus}</td><td>${r.node}</td><td><${Time} iso=${r.created_at} /></td><td><${Time} iso=${r.ended_at || r.expires_at} /></td></tr>`)}</tbody></table></div>`}
  </section>`;
}

// On a connection's Overview: the offer of the connection, if any, with its execution.
export function ConnectionExecution({ connectionId }) {
  const [changes, setChanges] = useState(0);
  const { data } = usePoll(() => api('GET', '/api/v1/offers?connection_id=' + encodeURIComponent(connectionId)), 30000,
                           [connectionId, changes], [connectionId]);
  const offer = data && data.offers[0];
  if (!offer) return null;
  return html`<div data-connection-execution>
    <h2>Workspace execution <span class="muted">(<a href=${offerHref(offer.id)}>offer ${offer.id}</a>)</span></h2>
    <${ExecutionSection} offer=${offer} onChanged=${() => setChanges(changes + 1)} owner=${offer.mine} />
  </div>`;
}

function ReservationForm({ onCreated }) {
  const { data } = usePoll(() => api('GET', '/api/v1/offers?state=qualified'), 30000, []);
  const offers = data ? data.offers : [];
  const [offerId, setOfferId] = useState('');
  const [gpus, setGpus] = useState(1);
  const [hours, setHours] = useState(1);
  const { run, error, busy } = useCalls();
  const chosen = offerId || (offers[0] && offers[0].id) || '';
  const submit = async (event) => {
    event.preventDefault();
    const reply = await run(() => api('POST', '/api/v1/reservations', {
      offer_id: chosen, gpus: Number(gpus), duration_seconds: Math.round(Number(hours) * 3600) }));
    if (reply) onCreated(reply);
  };
  return html`<form class="create" onSubmit=${submit} aria-labelledby="reserve-title">
    <h2 id="reserve-title">Reserve GPUs</h2>
    ${offers.length === 0 ? html`<p class="muted">No qualified offer to reserve from yet.</p>` : html`
    <div class="row">
      <label>Offer<select name="offer" value=${chosen} onChange=${(e) => setOfferId(e.target.value)}>
        ${offers.map((o) => html`<option key=${o.id} value=${o.id}>${o.cluster_name} · ${o.country} · ${o.gpus} GPUs · ${price(o)}</option>`)}
      </select></label>
    </div>
    <div class="row">
      <label>GPUs<input name="gpus" type="number" min="1" required value=${gpus} onInput=${(e) => setGpus(e.target.value)} /></label>
      <label>Hours<input name="hours" type="number" min="0.02" step="any" required value=${hours} onInput=${(e) => setHours(e.target.value)} /></label>
    </div>
    <${ErrorText} error=${error} />
    <button type="submit" disabled=${busy}>Reserve</button>`}
  </form>`;
}

export function ReservationsPage() {
  usePageTitle('Reservations');
  const [changes, setChanges] = useState(0);
  const { data, error } = usePoll(() => api('GET', '/api/v1/reservations'), 10000, [changes], []);
  const list = data ? data.reservations : [];
  const now = useNow();
  return html`<section aria-labelledby="reservations-title">
    <h1 id="reservations-title">Reservations</h1>
    <${ReservationForm} onCreated=${(r) => { location.hash = reservationHref(r.id); setChanges(changes + 1); }} />
    <${ErrorText} error=${error} />
    ${list.length === 0 ? html`<p class="muted">No reservations yet.</p>` : html`<div class="table-wrap"><table data-reservations>
      <thead><tr><th>Reservation</th><th>State</th><th class="number">GPUs</th><th>Node</th><th>Expires</th></tr></thead>
      <tbody>${list.map((r) => html`<tr key=${r.id} data-reservation=${r.id}>
        <td><a href=${reservationHref(r.id)}><code>${r.id}</code></a></td><td><${ReservationState} state=${r.state} /></td>
        <td class="number">${r.gpus}</td><td>${r.node}</td><td><${Time} iso=${r.ended_at || r.expires_at} now=${now} /></td>
      </tr>`)}</tbody></table></div>`}
  </section>`;
}

// Follows a command's output: reads from where the last read ended, waiting for more, until
// the command ends or the component goes.
function useCommandOutput(reservationId, commandId) {
  const [state, setState] = useState({ output: '', command: null, error: null });
  useEffect(() => {
    if (!commandId) return undefined;
    const controller = new AbortController();
    let offset = 0;
    let output = '';
    (async () => {
      for (;;) {
        try {
          const command = await api('GET', '/api/v1/reservations/' + encodeURIComponent(reservationId) +
            '/commands/' + encodeURIComponent(commandId) + '?offset=' + offset + '&wait=25', undefined,
                                    { signal: controller.signal });
          output += command.output;
          offset = Math.max(offset, command.next_offset);
          setState({ output, command, error: null });
          const ended = !['queued', 'running'].includes(command.state);
          if (ended && (offset >= command.output_bytes || !command.output)) return;
        } catch (e) {
          if (e.code === 'aborted') return;
          setState((s) => ({ ...s, error: e }));
          await new Promise((r) => setTimeout(r, 2000));
        }
      }
    })();
    return () => controller.abort();
  }, [reservationId, commandId]);
  return state;
}

function CommandBox({ reservation }) {
  const [kind, setKind] = useState('shell');
  const [code, setCode] = useState('');
  const [commandId, setCommandId] = useState(null);
  const { run, error, busy } = useCalls();
  const { output, command, error: streamError } = useCommandOutput(reservation.id, commandId);
  const outputRef = useRef(null);
  useEffect(() => {
    if (outputRef.current) outputRef.current.scrollTop = outputRef.current.scrollHeight;
  }, [output]);
  const submit = async (event) => {
    event.preventDefault();
    const reply = await run(() => api('POST', '/api/v1/reservations/' + encodeURIComponent(reservation.id) + '/commands',
                                      { kind, code }));
    if (reply) setCommandId(reply.id);
  };
  const usable = ['reserved', 'provisioning', 'running'].includes(reservation.state);
  return html`<section class="setting command-box" aria-labelledby="command-title">
    <h2 id="command-title">Run a command</h2>
    ${!usable ? html`<p class="muted">The reservation is ${reservation.state}; commands run only in one that has not been stopped.</p>` : html`
    <form onSubmit=${submit}>
      <div class="row">
        <label>Kind<select name="kind" value=${kind} onChange=${(e) => setKind(e.target.value)}>
          <option value="shell">shell</option><option value="python">python</option></select></label>
      </div>
      <label>Code<textarea name="code" rows="4" required spellcheck="false" value=${code}
        onInput=${(e) => setCode(e.target.value)} placeholder=${kind === 'shell' ? 'nvidia-smi -L' : 'import torch; print(torch.cuda.device_count())'}></textarea></label>
      <${ErrorText} error=${error} />
      <button type="submit" disabled=${busy}>Run</button>
      ${reservation.state !== 'running' && html` <span class="muted">It runs once the workspace is running.</span>`}
    </form>`}
    ${commandId && html`<div data-command=${commandId}>
      <p>Command <code>${commandId}</code>: <strong data-command-state>${command ? command.state : 'queued'}</strong>${
        command && command.exit_code !== null ? html`, exit code <strong data-exit-code>${command.exit_code}</strong>` : ''}${
        command && command.truncated ? html` <span class="warn">(output cut at ${command.output_cap_bytes} bytes)</span>` : ''}${
        command && command.message ? ' – ' + command.message : ''}</p>
      <pre class="output wrap" ref=${outputRef} data-command-output>${output}</pre>
      <${ErrorText} error=${streamError} />
    </div>`}
  </section>`;
}

// Bytes with a binary unit, for transfer figures ("812.5 MiB").
function size(n) {
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) { n /= 1024; i += 1; }
  return (i === 0 ? n : Number(n.toFixed(1))) + ' ' + units[i];
}

// The transfer budget as a meter: amber from 80 %, red once used up.
function TransferMeter({ transfer }) {
  const { budget_bytes: budget, used_bytes: used } = transfer;
  const share = budget > 0 ? Math.min(1, used / budget) : 1;
  const level = used >= budget ? 'bad' : share >= 0.8 ? 'warn' : 'ok';
  const words = used >= budget ? 'used up: SSH channels are refused'
    : share >= 0.8 ? 'nearly used up' : 'left: ' + size(budget - used);
  return html`<div class=${'transfer-meter transfer-' + level} data-transfer-level=${level}>
    <div class="transfer-bar" role="meter" aria-label="SSH transfer" aria-valuemin="0"
      aria-valuemax=${budget} aria-valuenow=${Math.min(used, budget)}><span style=${'width:' + (share * 100).toFixed(1) + '%'}></span></div>
    <span data-transfer-used>${size(used)} of ${size(budget)} (${(share * 100).toFixed(share < 0.1 ? 1 : 0)} %), ${words}</span>
  </div>`;
}

// SSH for the reservation's owner: ready or why not, the pinned host key, the setup command
// only when ready.
function SshSection({ reservation }) {
  const id = reservation.id;
  const { data: ssh, error } = usePoll(() => api('GET', '/api/v1/reservations/' + encodeURIComponent(id) + '/ssh'), 5000, [id]);
  const now = useNow();
  if (!ssh) return html`<section data-ssh><h2>SSH</h2><${ErrorText} error=${error} /></section>`;
  const ready = ssh.state === 'ready';
  return html`<section data-ssh aria-labelledby="ssh-title">
    <h2 id="ssh-title">SSH <span class=${'badge ' + (ready ? 'state-ok' : 'state-warn')} data-ssh-state=${ssh.state}>${ready ? 'ready' : 'not ready'}</span></h2>
    ${!ready && html`<p data-ssh-reason>Not ready: ${ssh.reason}.</p>`}
    <dl class="facts">
      <dt>Host key</dt><dd>${ssh.host_key_fingerprint
        ? html`<code data-ssh-fingerprint>${ssh.host_key_fingerprint}</code> <span class="muted">(pinned at the first report)</span>`
        : html`<span class="muted">none reported yet</span>`}</dd>
      <dt>Last report</dt><dd>${ssh.reported_at ? html`<${Time} iso=${ssh.reported_at} now=${now} />` : html`<span class="muted">never</span>`}</dd>
      <dt>Open channels</dt><dd>${ssh.open_channels}</dd>
      <dt>Transfer</dt><dd><${TransferMeter} transfer=${ssh.transfer} /></dd>
    </dl>
    ${ready && html`<p>Set up plain <code>ssh</code>, <code>scp</code>, <code>sftp</code> and VS Code Remote-SSH, with the host key pinned:</p>
      <pre class="command" data-ssh-setup>uplink ssh setup ${id}</pre>`}
  </section>`;
}

export function ReservationPage({ id }) {
  usePageTitle(id, 'Reservation');
  const [changes, setChanges] = useState(0);
  const { data: r, error } = usePoll(() => api('GET', '/api/v1/reservations/' + encodeURIComponent(id)), 5000, [id, changes], [id]);
  const { run, error: actionError } = useCalls();
  const now = useNow();
  if (!r) return html`<section><h1>Reservation</h1><${ErrorText} error=${error} />${!error && html`<p class="loading">Loading…</p>`}</section>`;
  const act = async (what, body) => {
    if (await run(() => api('POST', '/api/v1/reservations/' + encodeURIComponent(id) + '/' + what, body))) {
      setChanges(changes + 1);
    }
  };
  const active = ['reserved', 'provisioning', 'running', 'stopping'].includes(r.state);
  return html`<section aria-labelledby="reservation-title">
    <p class="crumbs"><a href="#/reservations">Reservations</a> /</p>
    <h1 id="reservation-title"><code>${r.id}</code> <${ReservationState} state=${r.state} /></h1>
    ${r.usage_only ? html`<p class="notice">You supply this capacity: you see its usage, never its commands.</p>` : ''}
    <dl class="facts">
      <dt>GPUs</dt><dd>${r.gpus} on ${r.node}${r.pod ? html`, pod <code>${r.pod}</code>` : ''}</dd>
      <dt>Offer</dt><dd><code>${r.offer_id}</code></dd>
      <dt>Reserved</dt><dd><${Time} iso=${r.created_at} now=${now} /></dd>
      <dt>${active ? 'Expires' : 'Ended'}</dt><dd><${Time} iso=${active ? r.expires_at : r.ended_at} now=${now} /></dd>
      ${!r.usage_only && html`<dt>Resources</dt><dd>${r.cpu_millis / 1000} CPU, ${bytes(r.memory_bytes)} memory, ${bytes(r.ephemeral_storage_bytes)} disk</dd>`}
    </dl>
    ${!r.usage_only && active && r.state !== 'stopping' && html`<div class="row">
      <button type="button" class="danger" onClick=${() => confirm('Stop ' + r.id + '? Its workspace is deleted.') && act('stop')}>Stop</button>
      <button type="button" class="secondary" onClick=${() => act('extend', { duration_seconds: 3600 })}>Extend by 1 h</button>
    </div>`}
    <${ErrorText} error=${actionError} />
    ${r.transitions && html`<h2>Transitions</h2><div class="table-wrap"><table data-transitions>
      <thead><tr><th>When</th><th>State</th><th>By</th><th>Reason</th></tr></thead>
      <tbody>${r.transitions.map((t, i) => html`<tr key=${i}><td><${Time} iso=${t.at} now=${now} /></td>
        <td><${ReservationState} state=${t.state} /></td><td>${t.source}</td><td>${t.reason}</td></tr>`)}</tbody></table></div>`}
    ${!r.usage_only && html`<${SshSection} reservation=${r} />`}
    ${!r.usage_only && html`<${CommandBox} reservation=${r} />`}
  </section>`;
}
