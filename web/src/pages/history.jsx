// History: finished and deleted jobs from the plane's history store, newest first, filtered by
// namespace/kind (kept in the URL); tick two to compare their curves.
import { useMemo, useState } from 'preact/hooks';
import { ErrorNote, LabelledSelect, Loading, useJSON } from '../components/bits.jsx';
import { age, duration, metrics, when } from '../format.js';
import { filterOptions, useOverview } from '../overview.js';
import { format, historyHref, navigate } from '../router.js';
import { clock, useSignal } from '../signal.js';

const PAGE = 200; // rows a History page asks for; "Show more" asks for as many again

function ended(row) {
  return row.deleted || row.finished;
}

export function HistoryPage({ query }) {
  const params = new URLSearchParams();
  if (query.namespace) params.set('namespace', query.namespace);
  if (query.kind) params.set('kind', query.kind);
  const limit = Number(query.limit) > 0 ? Number(query.limit) : PAGE;
  params.set('limit', String(limit));
  const { data, error } = useJSON(`/history?${params}`);
  const ov = useOverview();
  const now = useSignal(clock);
  const [ticked, setTicked] = useState([]);
  const items = data ? data.items : [];
  const options = useMemo(() => filterOptions(ov, items), [ov, items]);
  const setFilter = (name) => (value) => navigate(format(['history'], { ...query, [name]: value }), { replace: true });
  const toggle = (uid, on) => setTicked((t) => (on ? [...t.filter((u) => u !== uid), uid] : t.filter((u) => u !== uid)));
  const compare = () => navigate(format(['compare'], { a: ticked[0], b: ticked[1] }));
  const limits = ov && ov.history ? `Kept: the last ${ov.history.maxJobs} jobs, for ${ov.history.maxAgeDays} days.` : '';

  return (
    <main>
      <h1>History</h1>
      <form class="filters" aria-label="Filters" onSubmit={(ev) => ev.preventDefault()}>
        <LabelledSelect id="h-namespace" label="Namespace" value={query.namespace || ''} options={options.namespace} onChange={setFilter('namespace')} />
        <LabelledSelect id="h-kind" label="Kind" value={query.kind || ''} options={options.kind} onChange={setFilter('kind')} />
        <button type="button" class="primary" disabled={ticked.length !== 2} onClick={compare}>
          Compare
        </button>
        <span class="muted">{ticked.length === 2 ? 'two runs chosen' : 'tick two runs to compare'}</span>
      </form>
      <ErrorNote error={error} />
      {!data && !error && <Loading />}
      {data && items.length === 0 && <p>No finished or deleted jobs yet.</p>}
      {items.length > 0 && (
        <div class="table-wrap">
          <table class="grid" aria-label="History">
            <thead>
              <tr>
                <th scope="col">Compare</th>
                <th scope="col">Name</th>
                <th scope="col">Kind</th>
                <th scope="col">Namespace</th>
                <th scope="col">State</th>
                <th scope="col">Metrics</th>
                <th scope="col">Ran for</th>
                <th scope="col">Ended</th>
              </tr>
            </thead>
            <tbody>
              {items.map((r) => {
                const end = ended(r);
                const checked = ticked.includes(r.uid);
                return (
                  <tr key={r.uid} data-uid={r.uid}>
                    <td>
                      <input
                        type="checkbox"
                        id={`cmp-${r.uid}`}
                        aria-label={`Compare ${r.name}`}
                        checked={checked}
                        disabled={!checked && ticked.length >= 2}
                        onChange={(ev) => toggle(r.uid, ev.currentTarget.checked)}
                      />
                    </td>
                    <th scope="row" data-col="name">
                      <a href={historyHref(r.uid)}>{r.name}</a>
                    </th>
                    <td data-col="kind">{r.kind}</td>
                    <td data-col="namespace">{r.namespace}</td>
                    <td data-col="state">
                      <span class={`state state-${String(r.state).toLowerCase()}`}>{r.state}</span>
                      {r.deleted && <span class="muted"> (deleted)</span>}
                    </td>
                    <td data-col="metrics" class="mono">
                      {metrics(r.metrics)}
                    </td>
                    <td class="num">{end ? duration((Date.parse(end) - Date.parse(r.created)) / 1000) : ''}</td>
                    <td title={when(end)}>{end ? `${age(end, now)} ago` : ''}</td>
                  </tr>
                );
              })}
            </tbody>
          </table>
        </div>
      )}
      {items.length >= limit && (
        <p>
          <button type="button" onClick={() => navigate(format(['history'], { ...query, limit: limit + PAGE }), { replace: true })}>
            Show more
          </button>
        </p>
      )}
      {limits && <p class="muted">{limits}</p>}
    </main>
  );
}
