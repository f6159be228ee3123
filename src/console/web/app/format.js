// Plain-text formatting of API values for the pages. No imports: the unit tests
// (tests/web) load this file in Node as it is.

// How long since `iso`: "45 s", "3 min", "5 h", "3 d".
export function since(iso, now) {
  return span(Math.max(0, Math.round((now - Date.parse(iso)) / 1000)));
}

// A length of time in seconds, rounded for people: "45 s", "3 min", "5 h", "3 d".
export function span(seconds) {
  if (seconds < 90) return seconds + ' s';
  if (seconds < 90 * 60) return Math.round(seconds / 60) + ' min';
  if (seconds < 48 * 3600) return Math.round(seconds / 3600) + ' h';
  return Math.round(seconds / 86400) + ' d';
}

// The one way the pages write a time: relative ("3 min ago", "in 89 d"), the absolute time
// being the hover text (`absoluteTime`).
export function relativeTime(iso, now) {
  if (!iso) return '–';
  const seconds = Math.round((Date.parse(iso) - now) / 1000);
  if (Number.isNaN(seconds)) return '–';
  // A few seconds ahead is the two machines' clocks, not the future.
  if (seconds <= 5) return span(Math.max(0, -seconds)) + ' ago';
  return 'in ' + span(seconds);
}

// "Mon, 1 Dec 2025, 15:04:05 CET": the absolute time in the browser's zone, named.
export function absoluteTime(iso) {
  if (!iso) return '';
  const date = new Date(iso);
  if (Number.isNaN(date.getTime())) return String(iso);
  return date.toLocaleString(undefined, {
    weekday: 'short', day: 'numeric', month: 'short', year: 'numeric',
    hour: '2-digit', minute: '2-digit', second: '2-digit', timeZoneName: 'short',
  });
}

// The browser's time zone as charts and times use it: "Europe/Berlin (UTC+01:00)".
export function timeZoneLabel(date = new Date()) {
  const zone = Intl.DateTimeFormat().resolvedOptions().timeZone || 'local time';
  const minutes = -date.getTimezoneOffset();
  const sign = minutes < 0 ? '−' : '+';
  const hours = String(Math.floor(Math.abs(minutes) / 60)).padStart(2, '0');
  const rest = String(Math.abs(minutes) % 60).padStart(2, '0');
  return zone + ' (UTC' + sign + hours + ':' + rest + ')';
}

export function bytes(value) {
  if (value === null || value === undefined) return '–';
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let v = value;
  let i = 0;
  while (v >= 1024 && i < units.length - 1) {
    v /= 1024;
    i += 1;
  }
  // Whole bytes: a rate (985.97 B/s) is no more precise than the byte counts it comes from.
  return (i === 0 ? Math.round(v) : v.toFixed(1)) + ' ' + units[i];
}

export function number(value, digits = 1) {
  return value === null || value === undefined ? '–' : Number(value).toFixed(digits);
}

// "1 node", "3 nodes".
export function plural(count, noun, nouns = noun + 's') {
  return count + ' ' + (count === 1 ? noun : nouns);
}

// A console message as someone in the web page should read it. The console writes its
// messages for every client, and many end with what to do from the CLI or the API ("…; list
// yours with GET /api/v1/connections", "…; sign in again with "uplink login""): the page has
// those controls itself, so such clauses are left out. What is left is never empty.
export function forPeople(message) {
  const text = String(message ?? '');
  const clauses = text.split(/;\s+/);
  const kept = clauses.filter((c) => !/\/api\/v1\/|['"]uplink [a-z]|\(uplink [a-z][^)]*\)/.test(c));
  if (kept.length === 0) return text.replace(/\s*\(uplink [a-z][^)]*\)/g, '');
  return kept.join('; ').replace(/\s*\(uplink [a-z][^)]*\)/g, '');
}

// "kubectl get pods -n 'my ns'" → ['kubectl', 'get', 'pods', '-n', 'my ns']: blanks separate
// words, single or double quotes group them. Returns null for an unclosed quote.
export function splitArgv(line) {
  const words = [];
  let word = null;
  let quote = null;
  for (const c of line) {
    if (quote) {
      if (c === quote) quote = null;
      else word += c;
    } else if (c === '"' || c === "'") {
      quote = c;
      word = word ?? '';
    } else if (/\s/.test(c)) {
      if (word !== null) words.push(word);
      word = null;
    } else {
      word = (word ?? '') + c;
    }
  }
  if (quote) return null;
  if (word !== null) words.push(word);
  return words;
}
