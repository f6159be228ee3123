// Pieces shared by the pages: polling, the ticking clock, errors and the state badges.
import { h } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import htm from 'htm';
import { since } from './format.js';

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

// Calls `load` now and every `ms`, keeping the last answer or error.
export function usePoll(load, ms, deps) {
  const [state, setState] = useState({ data: null, error: null });
  useEffect(() => {
    let live = true;
    const run = () =>
      load().then(
        (data) => live && setState({ data, error: null }),
        (error) => live && setState((s) => ({ data: s.data, error })),
      );
    run();
    const timer = ms ? setInterval(run, ms) : null;
    return () => {
      live = false;
      if (timer) clearInterval(timer);
    };
  }, deps);
  return state;
}

export function ErrorText({ error }) {
  if (!error) return null;
  return html`<p class="error" role="alert">${error.message}</p>`;
}

// A connection's state at a glance (docs/web.md, "Connection states"): offline whenever its
// agents have been silent past the offline threshold, whatever the token's status, and for
// how long; else a revoked or expired token; else what its agents do. Severity only grows
// with silence: waiting, connected, stale, offline. `uplink connections list` says the same.
export function connectionState(connection, now) {
  const { status, liveness, last_seen_at: seen } = connection;
  if (liveness === 'offline') return { key: 'offline', text: 'offline ' + since(seen, now) };
  if (status === 'revoked' || status === 'expired') return { key: status, text: status };
  if (liveness === 'waiting') return { key: 'waiting', text: 'Waiting for agent' };
  if (liveness === 'stale') return { key: 'stale', text: 'stale ' + since(seen, now) };
  return { key: 'connected', text: 'connected' };
}

// What the token adds to the state: why an offline agent cannot come back, or that the token
// expires soon (from 14 days before).
export function tokenNote(connection) {
  const { status, liveness, expires_in_days: days } = connection;
  if (liveness === 'offline' && (status === 'revoked' || status === 'expired')) {
    return { key: 'token-' + status, text: 'token ' + status };
  }
  if (days !== null && days !== undefined) {
    return { key: 'expiring', text: 'expires in ' + days + (days === 1 ? ' day' : ' days') };
  }
  return null;
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
