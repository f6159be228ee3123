// Pieces shared by the pages: polling, the ticking clock, errors and the status badge.
import { h } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import htm from 'htm';
import { ago } from './format.js';

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

const statusText = {
  never: 'Waiting for agent',
  active: 'active',
  stale: 'stale',
  offline: 'offline',
  expired: 'expired',
  revoked: 'revoked',
};

// The badge of a connection: the token's status, or offline when a reporting agent went
// silent; colour plus text.
export function badgeStatus(connection) {
  const { status, liveness } = connection;
  if (status === 'active' && liveness === 'offline') return 'offline';
  return status;
}

// `plain`: the status names of the token table ("never" rather than "Waiting for agent").
export function Badge({ connection, plain }) {
  const status = badgeStatus(connection);
  const text = plain ? status : statusText[status] || status;
  return html`<span class=${'badge badge-' + status} data-status=${status}>${text}</span>`;
}

// A connection's last report: "12 s ago", or why there is none.
export function lastReport(connection, now) {
  if (connection.last_report_at) return ago(connection.last_report_at, now);
  return connection.status === 'never' ? 'Waiting for agent' : 'never';
}

