// The token card's install section: what to install (the workloads, the GPU runtime class,
// the GPU node selector), where (the console as the cluster reaches it, the namespace, the
// Secret), and the commands that do it: the Secret from stdin (never in argv or a file), then
// the helm commands the console generates (POST /api/v1/connections/{id}/install, docs/api.md),
// the same the `uplink connections install` command prints.
import { h } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import htm from 'htm';
import { api } from './api.js';
import { ErrorText } from './ui.js';

const html = htm.bind(h);

const secretKey = 'UPLINK_AGENT_TOKEN';

// What may be installed. Experiments and workspaces join this list (and the console's
// install_plan.h) once the agent has those roles; until then they are not offered.
export const workloadChoices = [
  {
    id: 'all',
    workloads: ['inventory', 'cluster', 'node'],
    label: 'Inventory, cluster and node telemetry',
    hint: 'Also read-only kubectl for the console and each node\u2019s CPU, memory, disk, network and ' +
      'GPU figures. The namespace must allow privileged pods: the node DaemonSet mounts host paths.',
  },
  {
    id: 'inventory',
    workloads: ['inventory'],
    label: 'Inventory only',
    hint: 'The GPU nodes that match the selector. Runs under the restricted Pod Security level.',
  },
];

export const defaultInstall = {
  workloads: 'all',
  runtimeClass: 'nvidia',
  selector: 'nvidia.com/gpu.present=true',
  namespace: 'uplink',
  secretName: 'uplink-agent-token',
};

// Why a namespace (a DNS-1123 label) or Secret name (a DNS-1123 subdomain) would be refused by
// Kubernetes, or null when it is fine. Valid names need no shell quoting, so the commands stay
// exactly what the user types.
export function installNameProblem({ namespace, secretName }) {
  if (!/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/.test(namespace) || namespace.length > 63) {
    return 'The namespace must be 1–63 lowercase letters, digits or "-", starting and ending with a letter or digit.';
  }
  if (!/^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/.test(secretName) ||
      secretName.length > 253) {
    return 'The Secret name must be 1–253 lowercase letters, digits, "-" or ".", starting and ending with a letter or digit.';
  }
  return null;
}

// The namespace, its Pod Security level, and the Secret with the token read from stdin.
export function secretCommands({ namespace, secretName }, podSecurity) {
  return [
    'kubectl create namespace ' + namespace + ' --dry-run=client -o yaml | kubectl apply -f -',
    'kubectl label namespace ' + namespace + ' pod-security.kubernetes.io/enforce=' + podSecurity +
      ' --overwrite',
    'read -rs ' + secretKey + '   # paste the token, then Enter',
    "printf '%s' \"$" + secretKey + '" | kubectl -n ' + namespace + ' create secret generic ' +
      secretName + ' --from-file=' + secretKey + '=/dev/stdin',
    'unset ' + secretKey,
  ];
}

function requestBody(choice, preview) {
  const workloads = workloadChoices.find((c) => c.id === choice.workloads).workloads;
  return {
    console_url: choice.consoleUrl,
    workloads,
    gpu_runtime_class: workloads.includes('node') ? choice.runtimeClass.trim() : '',
    selector: choice.selector,
    namespace: choice.namespace,
    secret_name: choice.secretName,
    preview,
  };
}

// `keepRef.current` is set to a function that keeps the choice with the connection, for the
// card's "I stored the token".
export function InstallSection({ connectionId, keepRef }) {
  const path = '/api/v1/connections/' + encodeURIComponent(connectionId) + '/install';
  const [choice, setChoice] = useState({ ...defaultInstall, consoleUrl: location.origin });
  // The console's commands and the choice they are for.
  const [rendered, setRendered] = useState(null);
  const [error, setError] = useState(null);
  const [copied, setCopied] = useState('');
  const problem = installNameProblem(choice);
  const key = JSON.stringify(choice);

  // Previewed as you type (nothing is kept until the commands are copied or the card closed).
  useEffect(() => {
    if (problem) return undefined;
    let live = true;
    const timer = setTimeout(() => {
      api('POST', path, requestBody(choice, true)).then(
        (reply) => { if (live) { setRendered({ key, reply }); setError(null); } },
        (e) => { if (live) { setRendered(null); setError(e); } });
    }, 250);
    return () => { live = false; clearTimeout(timer); };
  }, [key]);

  const current = !problem && rendered && rendered.key === key ? rendered.reply : null;
  const keep = () => (current ? api('POST', path, requestBody(choice, false)) : Promise.resolve());
  if (keepRef) keepRef.current = keep;
  const commands = current
    ? [...secretCommands(choice, current.install.pod_security), ...current.helm_commands].join('\n')
    : '';
  const copy = async () => {
    try {
      await keep();
      await navigator.clipboard.writeText(commands);
      setCopied('Commands copied.');
    } catch (e) {
      setCopied(e.code ? e.message : 'Copying was not allowed: select the text and copy it.');
    }
  };
  const edit = (field) => (e) => {
    setCopied('');
    setChoice({ ...choice, [field]: e.target.value });
  };
  const kubernetes = choice.workloads === 'all';
  return html`<section class="install" aria-labelledby="install-title">
    <h3 id="install-title">Install the agent</h3>
    <fieldset class="workloads">
      <legend>Workloads</legend>
      ${workloadChoices.map((c) => html`<label key=${c.id} class="choice">
        <input type="radio" name="install-workloads" value=${c.id} checked=${choice.workloads === c.id}
          onChange=${edit('workloads')} />
        <span>${c.label}<span class="muted hint">${c.hint}</span></span>
      </label>`)}
    </fieldset>
    <div class="row">
      ${kubernetes && html`<label>GPU runtime class
        <input name="install-runtime-class" value=${choice.runtimeClass} onInput=${edit('runtimeClass')}
          spellcheck="false" autocomplete="off" placeholder="none: a cluster without GPUs" />
        <span class="muted hint">Usually nvidia (kubectl get runtimeclass); empty on a cluster without GPUs.</span></label>`}
      <label>GPU node selector
        <input name="install-selector" value=${choice.selector} onInput=${edit('selector')}
          spellcheck="false" autocomplete="off" />
        <span class="muted hint">The nodes the inventory reports, as a Kubernetes label selector.</span></label>
    </div>
    <div class="row">
      <label>Console address, as the cluster reaches it
        <input name="install-console" value=${choice.consoleUrl} onInput=${edit('consoleUrl')}
          spellcheck="false" autocomplete="off" /></label>
    </div>
    <div class="row">
      <label>Namespace<input name="install-namespace" value=${choice.namespace} onInput=${edit('namespace')}
        spellcheck="false" autocomplete="off" /></label>
      <label>Secret name<input name="install-secret" value=${choice.secretName} onInput=${edit('secretName')}
        spellcheck="false" autocomplete="off" /></label>
    </div>
    ${problem ? html`<p class="error" role="alert">${problem}</p>` : html`<${ErrorText} error=${error} />`}
    ${current && current.warnings.map((w) => html`<p key=${w.code} class="warning" role="alert"
      data-warning=${w.code}><strong>Warning: </strong>${w.message}</p>`)}
    ${current ? html`<p>The token comes from stdin, never from a file or the command line; the chart
        comes from this console (chart ${current.chart.version}).</p>
      <pre class="output commands">${commands}</pre>
      <button type="button" class="secondary" onClick=${copy}>Copy commands</button>`
      : !problem && !error && html`<p class="muted" role="status">Generating the commands…</p>`}
    <p role="status">${copied}</p>
  </section>`;
}
