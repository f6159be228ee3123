// Calls to the console's API with the session cookie. The CSRF token is kept in memory only
// (never in localStorage): a reload fetches it again from /api/v1/web/session.
let csrfToken = '';

export function setCsrfToken(token) {
  csrfToken = token || '';
}

export class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

// `options.signal` stops waiting for the reply (an ApiError with code "aborted").
export async function api(method, path, body, options = {}) {
  const headers = { Accept: 'application/json' };
  if (method !== 'GET' && method !== 'HEAD') headers['X-CSRF-Token'] = csrfToken;
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  let response;
  try {
    response = await fetch(path, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      credentials: 'same-origin',
      cache: 'no-store',
      signal: options.signal,
    });
  } catch (error) {
    if (error.name === 'AbortError') throw new ApiError(0, 'aborted', 'stopped waiting');
    throw new ApiError(0, 'network', 'the console did not answer: ' + error.message);
  }
  const text = await response.text();
  let data = null;
  try {
    data = text ? JSON.parse(text) : null;
  } catch {
    data = null;
  }
  if (!response.ok) {
    const error = data && data.error ? data.error : {};
    // The session ended (expired, signed out elsewhere, revoked): back to the sign-in form.
    // A wrong password or two-factor code (sign-in, confirmation) is the form's own error.
    const formErrors = ['invalid_credentials', 'two_factor_required', 'invalid_two_factor_code'];
    if (response.status === 401 && !formErrors.includes(error.code)) {
      dispatchEvent(new CustomEvent('uplink:signed-out', { detail: { code: error.code } }));
    }
    throw new ApiError(response.status, error.code || 'http_' + response.status,
                       error.message || text || response.statusText);
  }
  return data;
}
