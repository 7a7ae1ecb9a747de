// The jobs list: every live job of every kind, from the jobs stream (a snapshot, then changes
// applied in one batch per animation frame), filtered by namespace/kind/state kept in the URL.
import { Component } from 'preact';
import { useMemo, useState } from 'preact/hooks';
import { LabelledSelect, ProgressBar } from '../components/bits.jsx';
import { age, duration, epoch, metrics } from '../format.js';
import { filterOptions, matches, useOverview } from '../overview.js';
import { format, jobHref, navigate } from '../router.js';
import { clock, useSignal } from '../signal.js';
import { useEventStream } from '../stream.js';

export const jobKey = (r) => `${r.namespace}/${r.plural}/${r.name}`;

/** Newest first, then by name: new jobs show at the top, where the user looks for them. */
function newestFirst(a, b) {
  if (a.created !== b.created) return a.created < b.created ? 1 : -1;
  return a.name < b.name ? -1 : a.name > b.name ? 1 : 0;
}

/** A row re-renders only when its job or its age text changed (keyed, 1,000 of them). */
class JobRow extends Component {
  shouldComponentUpdate(next) {
    return next.row !== this.props.row || next.ageText !== this.props.ageText;
  }

  render({ row, ageText }) {
    return (
      <tr data-job={jobKey(row)} class={row.deleted ? 'deleted' : ''}>
        <th scope="row" data-col="name">
          <a href={jobHref(row)}>{row.name}</a>
        </th>
        <td data-col="kind">{row.kind}</td>
        <td data-col="namespace">{row.namespace}</td>
        <td data-col="state">
          <span class={`state state-${String(row.state).toLowerCase()}`}>{row.state}</span>
        </td>
        <td data-col="progress">
          <ProgressBar value={row.progress} label={`Progress of ${row.name}`} />
        </td>
        <td data-col="epoch" class="num">
          {epoch(row)}
        </td>
        <td data-col="eta" class="num">
          {duration(row.eta)}
        </td>
        <td data-col="metrics" class="mono">
          {metrics(row.metrics)}
        </td>
        <td data-col="replicas">{row.replicas}</td>
        <td data-col="age" class="num">
          {ageText}
        </td>
      </tr>
    );
  }
}

/** The live set of jobs, keyed, from the stream. */
function useLiveJobs() {
  const [jobs, setJobs] = useState(null); // Map key → JobRow; null until the snapshot
  useEventStream('/jobs/stream', {
    snapshot(batch) {
      const last = batch[batch.length - 1];
      setJobs(new Map(last.items.map((r) => [jobKey(r), r])));
    },
    change(batch) {
      setJobs((prev) => {
        const next = new Map(prev || []);
        for (const { type, job } of batch) {
          if (type === 'DELETED') next.delete(jobKey(job));
          else next.set(jobKey(job), job);
        }
        return next;
      });
    },
  });
  return jobs;
}

export function JobsPage({ query }) {
  const jobs = useLiveJobs();
  const ov = useOverview();
  const now = useSignal(clock);
  const all = useMemo(() => (jobs ? [...jobs.values()].sort(newestFirst) : []), [jobs]);
  const shown = useMemo(() => all.filter((r) => matches(r, query)), [all, query]);
  const options = useMemo(() => filterOptions(ov, all), [ov, all]);
  const setFilter = (name) => (value) => navigate(format([], { ...query, [name]: value }), { replace: true });

  return (
    <main>
      <h1>Jobs</h1>
      <form class="filters" aria-label="Filters" onSubmit={(ev) => ev.preventDefault()}>
        <LabelledSelect id="f-namespace" label="Namespace" value={query.namespace || ''} options={options.namespace} onChange={setFilter('namespace')} />
        <LabelledSelect id="f-kind" label="Kind" value={query.kind || ''} options={options.kind} onChange={setFilter('kind')} />
        <LabelledSelect id="f-state" label="State" value={query.state || ''} options={options.state} onChange={setFilter('state')} />
        <span class="muted count" aria-live="off">
          {jobs ? `${shown.length} of ${all.length} jobs` : ''}
        </span>
      </form>
      <div class="table-wrap">
        <table class="grid jobs" aria-label="Jobs">
          <thead>
            <tr>
              <th scope="col">Name</th>
              <th scope="col">Kind</th>
              <th scope="col">Namespace</th>
              <th scope="col">State</th>
              <th scope="col">Progress</th>
              <th scope="col">Epoch</th>
              <th scope="col">ETA</th>
              <th scope="col">Metrics</th>
              <th scope="col">Replicas</th>
              <th scope="col">Age</th>
            </tr>
          </thead>
          <tbody>
            {shown.map((r) => (
              <JobRow key={jobKey(r)} row={r} ageText={age(r.created, now)} />
            ))}
          </tbody>
        </table>
      </div>
      {jobs && shown.length === 0 && (
        <p class="muted">{all.length ? 'No job matches these filters.' : 'No jobs yet: `yard apply -f examples/pytorch-ddp/pytorchjob.yaml` starts one.'}</p>
      )}
      {!jobs && <p class="muted">Connecting…</p>}
    </main>
  );
}
