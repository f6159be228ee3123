// Pod right-sizing: each pod's CPU and memory requests and limits beside what it used over the
// last hour, the pods that reserve far more than they use, or less, flagged with the reason.
import { h } from 'preact';
import { useState } from 'preact/hooks';
import htm from 'htm';
import { api } from './api.js';
import { bytes } from './format.js';
import { ErrorText, usePoll } from './ui.js';

const html = htm.bind(h);

const verdictText = {
  under_provisioned: 'under-provisioned',
  over_provisioned: 'over-provisioned',
  ok: 'OK',
  unknown: 'not enough data',
};

function cpu(millicores) {
  if (millicores === null || millicores === undefined) return '–';
  return millicores < 1000 ? millicores + 'm' : (millicores / 1000).toFixed(2) + ' cores';
}

// One resource of a pod: what it reserves, then what it used.
function Figures({ reserved, used, format }) {
  const set = (value) => (value === null || value === undefined ? 'none' : format(value));
  return html`<div>request ${set(reserved[0])} · limit ${set(reserved[1])}</div>
    <div class="muted">avg ${format(used[0])} · peak ${format(used[1])}</div>`;
}

// "cpu: peak 1400m is above ... (suggested request 1.82 cores)".
function findingText(pod, finding) {
  const field = finding.resource === 'cpu' ? 'suggested_request_millicores' : 'suggested_request_bytes';
  const suggested = finding.resource ? pod[finding.resource][field] : undefined;
  const suggestion = suggested === undefined ? ''
    : ' (suggested request ' + (finding.resource === 'cpu' ? cpu(suggested) : bytes(suggested)) + ')';
  return (finding.resource ? finding.resource + ': ' : '') + finding.message + suggestion;
}

export function RightSizing({ connectionId }) {
  const [flaggedOnly, setFlaggedOnly] = useState(false);
  const { data, error } = usePoll(
    () => api('GET', '/api/v1/connections/' + encodeURIComponent(connectionId) + '/right-sizing'),
    60000, [connectionId]);
  const pods = data ? data.pods.filter((p) => !flaggedOnly ||
    p.verdict === 'under_provisioned' || p.verdict === 'over_provisioned') : [];
  const share = (value) => Math.round(value * 100) + ' %';
  return html`<section aria-labelledby="rightsizing-title">
    <h2 id="rightsizing-title">Pod right-sizing</h2>
    ${error && error.code === 'no_snapshot'
      ? html`<p>No cluster snapshot yet: right-sizing needs the cluster role's snapshots.</p>`
      : html`<${ErrorText} error=${error} />`}
    ${data && html`
      <p class="muted">${'Requests and limits from the latest snapshot; usage from kubectl top pods over ' +
        'the last hour. Over-provisioned: the peak stays under ' + share(data.thresholds.over_peak_share) +
        ' of the request. Under-provisioned: no request, a peak above the request, or a peak at ' +
        share(data.thresholds.near_limit_share) + ' of the limit. Pods with fewer than ' +
        data.thresholds.min_samples + ' samples are not judged.'}</p>
      ${data.note && html`<p class="notice" data-note>The latest snapshot has no pod requests and limits: either no
        namespaces are chosen for this connection yet (Settings, Namespace scope), or its cluster agent is older than
        pod right-sizing.</p>`}
      ${data.pods.length === 0 && !data.note && html`<p>No running pods in the chosen namespaces.</p>`}
      ${data.pods.length > 0 && html`<p class="totals" data-totals>
        <span class="badge verdict-under_provisioned">${data.totals.under_provisioned} under-provisioned</span>
        <span class="badge verdict-over_provisioned">${data.totals.over_provisioned} over-provisioned</span>
        <span class="badge verdict-ok">${data.totals.ok} OK</span>
        <span class="badge verdict-unknown">${data.totals.unknown} not enough data</span>
      </p>
      <label class="inline"><input type="checkbox" checked=${flaggedOnly}
        onChange=${(e) => setFlaggedOnly(e.target.checked)} /> Only flagged pods</label>
      <div class="table-wrap"><table class="rightsizing">
        <thead><tr><th scope="col">Pod</th><th scope="col">Verdict</th><th scope="col">CPU</th>
          <th scope="col">Memory</th><th scope="col">Samples</th></tr></thead>
        ${pods.map((p) => html`<tbody key=${p.namespace + '/' + p.pod} data-pod=${p.namespace + '/' + p.pod}
            data-verdict=${p.verdict}>
          <tr>
            <td><span class="muted">${p.namespace}/</span>${p.pod}</td>
            <td><span class=${'badge verdict-' + p.verdict}>${verdictText[p.verdict] || p.verdict}</span></td>
            <td><${Figures} reserved=${[p.cpu.request_millicores, p.cpu.limit_millicores]}
              used=${[p.cpu.average_millicores, p.cpu.peak_millicores]} format=${cpu} /></td>
            <td><${Figures} reserved=${[p.memory.request_bytes, p.memory.limit_bytes]}
              used=${[p.memory.average_bytes, p.memory.peak_bytes]} format=${bytes} /></td>
            <td>${p.samples}</td>
          </tr>
          ${p.findings.length > 0 && html`<tr class="findings"><td colspan="5"><ul class="findings">
            ${p.findings.map((f, i) => html`<li key=${i}>${findingText(p, f)}</li>`)}</ul></td></tr>`}
        </tbody>`)}
      </table></div>`}`}
  </section>`;
}
