// Hash routing: `#/path/segments?query`, parsed into a route the app renders; pages change the
// query (filters) with replace so the back button walks pages, not every filter click.
import { signal } from './signal.js';

export function parse(hash) {
  const text = (hash || '').replace(/^#/, '') || '/';
  const q = text.indexOf('?');
  const path = q < 0 ? text : text.slice(0, q);
  const query = Object.fromEntries(new URLSearchParams(q < 0 ? '' : text.slice(q + 1)));
  const parts = path.split('/').filter(Boolean).map(decodeURIComponent);
  return { parts, query };
}

export function format(parts, query = {}) {
  const path = '/' + parts.map(encodeURIComponent).join('/');
  const kept = Object.entries(query).filter(([, v]) => v !== '' && v != null);
  const qs = kept.length ? '?' + new URLSearchParams(kept) : '';
  return '#' + path + qs;
}

export const route = signal(parse(location.hash));
window.addEventListener('hashchange', () => route.set(parse(location.hash)));

/** Go to `hash`; with replace, the current history entry is rewritten (filters). */
export function navigate(hash, { replace = false } = {}) {
  if (replace) {
    history.replaceState(null, '', hash);
    route.set(parse(hash));
  } else {
    location.hash = hash;
  }
}

export const jobHref = (row) => format(['jobs', row.namespace, row.plural, row.name]);
export const historyHref = (uid) => format(['history', uid]);
