// The dashboard's HTTP client: JSON reads, writes with the CSRF header, Kubernetes Status errors,
// and the one place that notices an expired session (any 401) and tells the app.
import { signal } from './signal.js';

export const BASE = '/dashboard/api';

// True once the plane answered 401: the login cookie is gone or expired; every page then shows
// how to get a new link instead of failing piecemeal.
export const sessionEnded = signal(false);

/** An answer that was not 2xx; `message` is the Status message the plane wrote (or a fallback). */
export class ApiError extends Error {
  constructor(code, message, reason) {
    super(message);
    this.code = code;
    this.reason = reason;
  }
}

async function failure(resp) {
  if (resp.status === 401) sessionEnded.set(true);
  let message = `${resp.status} ${resp.statusText}`.trim();
  let reason = '';
  try {
    const body = await resp.json();
    if (body && body.message) message = body.message;
    if (body && body.reason) reason = body.reason;
  } catch {
    // Not JSON (a proxy's page, a dropped connection): the status line is all there is.
  }
  return new ApiError(resp.status, message, reason);
}

async function request(method, path, { body, signal: abort, raw } = {}) {
  const headers = { Accept: raw ? 'text/plain' : 'application/json' };
  if (method !== 'GET') headers['X-Yard-Dashboard'] = '1';
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  let resp;
  try {
    resp = await fetch(BASE + path, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      credentials: 'same-origin',
      signal: abort,
    });
  } catch (err) {
    if (err.name === 'AbortError') throw err;
    throw new ApiError(0, 'The plane did not answer: is `yard up` still running?', 'Unreachable');
  }
  if (!resp.ok) throw await failure(resp);
  return raw ? resp : resp.json();
}

export const getJSON = (path, opts) => request('GET', path, opts);
export const postJSON = (path, body) => request('POST', path, { body: body ?? {} });
export const deleteJSON = (path) => request('DELETE', path);
/** The raw Response of a text read (logs), for its body's stream reader. */
export const getText = (path, abort) => request('GET', path, { raw: true, signal: abort });

const enc = encodeURIComponent;
export const jobPath = (ns, plural, name) => `/jobs/${enc(ns)}/${enc(plural)}/${enc(name)}`;
export const logPath = (ns, pod, params) => `/logs/${enc(ns)}/${enc(pod)}?${new URLSearchParams(params)}`;
export const historyLogPath = (uid, pod, container) =>
  `/history/${enc(uid)}/logs/${enc(pod)}/${enc(container)}`;

/** Whether the session is still good, asked after a stream failed (EventSource hides the status). */
export async function probeSession() {
  try {
    await getJSON('/overview');
    return true;
  } catch (err) {
    return !(err instanceof ApiError && err.code === 401);
  }
}
