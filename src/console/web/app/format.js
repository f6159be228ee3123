// Plain-text formatting of API values for the pages.

export function ago(iso, now) {
  if (!iso) return 'never';
  const seconds = Math.max(0, Math.round((now - Date.parse(iso)) / 1000));
  if (seconds < 90) return seconds + ' s ago';
  if (seconds < 90 * 60) return Math.round(seconds / 60) + ' min ago';
  if (seconds < 48 * 3600) return Math.round(seconds / 3600) + ' h ago';
  return Math.round(seconds / 86400) + ' d ago';
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
  return (i === 0 ? v : v.toFixed(1)) + ' ' + units[i];
}

export function number(value, digits = 1) {
  return value === null || value === undefined ? '–' : Number(value).toFixed(digits);
}

export function dateTime(iso) {
  return iso ? new Date(iso).toLocaleString() : '–';
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
