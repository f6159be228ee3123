// Pieces shared by the pages: polling, the ticking clock, the page's title, errors written for
// people, times, the modal dialog, and the state and health badges.
import { h } from 'preact';
import { useEffect, useRef, useState } from 'preact/hooks';
import htm from 'htm';
import { absoluteTime, forPeople, relativeTime } from './format.js';
import { clusterHealth, connectionState, tokenNote } from './health.js';

const html = htm.bind(h);

// The current time, ticking every second, for "12 s ago".
export function useNow() {
  const [now, setNow] = useState(Date.now());
  useEffect(() => {
    const timer = setInterval(() => setNow(Date.now()), 1000);
    return () => clearInterval(timer);
  }, []);
  return now;
}

// Calls `load` now and every `ms` (and again when `deps` change), keeping the last answer or
// error. When `identity` changes (another connection, another filter: by default whenever
// `deps` do) what was shown is dropped at once, so a page never shows one thing's data under
// another's name; a refresh (a `deps` entry counting changes) keeps it until the answer.
export function usePoll(load, ms, deps, identity = deps) {
  const key = JSON.stringify(identity);
  const [state, setState] = useState({ key, data: null, error: null });
  useEffect(() => {
    let live = true;
    const run = () =>
      load().then(
        (data) => live && setState({ key, data, error: null }),
        (error) => live && setState((s) => ({ key, data: s.key === key ? s.data : null, error })),
      );
    run();
    const timer = ms ? setInterval(run, ms) : null;
    return () => {
      live = false;
      if (timer) clearInterval(timer);
    };
  }, deps);
  return state.key === key ? state : { data: null, error: null };
}

// The browser tab's title: "gpu-east · Nodes · uplink".
export function usePageTitle(...parts) {
  const title = [...parts.filter(Boolean), 'uplink'].join(' · ');
  useEffect(() => { document.title = title; }, [title]);
}

// What an error from the API means for someone using these pages. The console's messages are
// written for every client, so some name a CLI command or an API call; where the page has the
// control itself, it says so instead.
export function describeError(error) {
  if (!error) return '';
  switch (error.code) {
    case 'network':
      return 'The console did not answer; the page tries again on its own. (' + error.message + ')';
    case 'namespaces_not_chosen':
      return 'No namespaces are chosen for kubectl yet, so only cluster-scoped reads (nodes, ' +
        'namespaces, top nodes, …) run. Choose them in this connection\u2019s Settings, under Namespace scope.';
    case 'agent_timeout':
      return /picked the command up/.test(error.message)
        ? 'No cluster agent took the command within 60 s, so it was given up. The Overview lists ' +
          'the connection\u2019s agents and when each last called.'
        : 'The cluster agent took the command but sent no result within 60 s; a late result is ' +
          'discarded. The cluster agent\u2019s log says why.';
    case 'confirmation_required':
      return 'This needs your password again.';
    case 'not_found':
      return 'Not found: it does not exist, or it is not yours to see.';
    default:
      return forPeople(error.message);
  }
}

export function ErrorText({ error }) {
  if (!error) return null;
  return html`<p class="error" role="alert">${describeError(error)}</p>`;
}

// A time as every page writes it: relative ("3 min ago", "in 89 d"), the absolute time, with
// its zone, on hover.
export function Time({ iso, now, none = '–' }) {
  if (!iso) return html`<span class="muted">${none}</span>`;
  return html`<time datetime=${iso} title=${absoluteTime(iso)}>${relativeTime(iso, now ?? Date.now())}</time>`;
}

// A modal dialog: focus moves into it, the rest of the page is inert, Escape cancels
// (`onCancel`), and focus goes back where it was when it closes.
export function Modal({ title, onCancel, children, labelledBy = 'modal-title' }) {
  const ref = useRef(null);
  useEffect(() => {
    const dialog = ref.current;
    const before = document.activeElement;
    if (!dialog.open) dialog.showModal();
    const focusable = dialog.querySelector('[autofocus], input, select, textarea, button');
    if (focusable) focusable.focus();
    return () => {
      if (dialog.open) dialog.close();
      if (before && before.focus) before.focus();
    };
  }, []);
  const cancel = (event) => {
    event.preventDefault();
    onCancel();
  };
  return html`<dialog ref=${ref} class="modal" aria-labelledby=${labelledBy} onCancel=${cancel}>
    <h2 id=${labelledBy}>${title}</h2>
    ${children}
  </dialog>`;
}

// The state badge, and the token's badge beside it when it has something to say; colour
// plus text.
export function Badge({ connection, now }) {
  const state = connectionState(connection, now);
  const note = tokenNote(connection);
  return html`<span class="badges"><span class=${'badge badge-' + state.key}
    data-status=${state.key}>${state.text}</span>${note && html` <span
    class=${'badge badge-' + note.key} data-token=${note.key}>${note.text}</span>`}</span>`;
}

// The cluster's health badge; with `reasons`, what is wrong below it.
export function HealthBadge({ connection, now, reasons = false }) {
  const health = clusterHealth(connection, now);
  return html`<span class="health">
    <span class=${'badge health-' + health.key} data-health=${health.key}>${health.text}</span>
    ${reasons && health.reasons.length > 0 && html`<ul class="reasons" data-reasons>
      ${health.reasons.map((r) => html`<li key=${r}>${r}</li>`)}</ul>`}
  </span>`;
}
