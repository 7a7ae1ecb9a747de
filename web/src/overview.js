// The plane's overview (kinds, namespaces, whether queues/runtimes/history exist), read once per
// page load and shared by every page that needs it.
import { getJSON } from './api.js';
import { signal, useSignal } from './signal.js';

const overview = signal(null);
let asked = false;

export function useOverview() {
  if (!asked) {
    asked = true;
    getJSON('/overview').then(overview.set, () => {
      asked = false; // try again on the next page that asks
    });
  }
  return useSignal(overview);
}

const STATES = ['Created', 'Running', 'Restarting', 'Suspended', 'Succeeded', 'Failed'];

/** Filter options: what the overview names, plus whatever the rows carry. */
export function filterOptions(ov, rows) {
  const namespaces = new Set(ov ? ov.namespaces : []);
  const kinds = new Set(ov ? ov.kinds.map((k) => k.kind) : []);
  const states = new Set(STATES);
  for (const r of rows) {
    namespaces.add(r.namespace);
    kinds.add(r.kind);
    if (r.state) states.add(r.state);
  }
  const opts = (set, all) => [['', all], ...[...set].sort().map((v) => [v, v])];
  return {
    namespace: opts(namespaces, 'All namespaces'),
    kind: opts(kinds, 'All kinds'),
    state: [['', 'All states'], ...[...states].map((v) => [v, v])],
  };
}

export function matches(row, q) {
  return (
    (!q.namespace || row.namespace === q.namespace) && (!q.kind || row.kind === q.kind) && (!q.state || row.state === q.state)
  );
}
