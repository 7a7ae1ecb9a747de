// A live job's page: its detail read once, then kept current by the job's stream (`detail`
// replaces it, `point` appends one metric report to the charts), logs per pod, and the actions;
// a search job's (its detail has `search`) shows its trials and their curves first.
import { useCallback, useEffect, useState } from 'preact/hooks';
import { getJSON, jobPath, logPath } from '../api.js';
import { ErrorNote, Loading, ProgressBar } from '../components/bits.jsx';
import { LogPane } from '../components/logs.jsx';
import { Checkpoints, Conditions, Events, Metrics, Replicas, Section, Spec } from '../components/sections.jsx';
import { SearchCharts, TrialsTable } from '../components/trials.jsx';
import { duration, epoch, metrics } from '../format.js';
import { mergePoints } from '../metrics.js';
import { historyHref } from '../router.js';
import { useEventStream } from '../stream.js';
import { Actions } from './actions.jsx';

const TAIL_LINES = 5000;
// Log panes that follow through a held stream; the rest re-read their tail every few seconds.
// The job's own event stream plus these leave two of the browser's six connections per host
// (HTTP/1.1) for everything else.
const STREAMED_PANES = 3;

/** The job's detail and its metric history, from one read and the job's stream. */
function useJobDetail(ns, plural, name) {
  const path = jobPath(ns, plural, name);
  const [detail, setDetail] = useState(null);
  const [points, setPoints] = useState([]);
  const [error, setError] = useState(null);
  const [gone, setGone] = useState(false); // deleted while the page was open

  useEffect(() => {
    let live = true;
    setGone(false);
    setDetail(null);
    setPoints([]);
    setError(null);
    getJSON(path).then(
      (d) => {
        if (!live) return;
        setDetail(d);
        setPoints((p) => mergePoints(d.metrics || [], p));
      },
      (err) => live && setError(err),
    );
    return () => {
      live = false;
    };
  }, [path]);

  useEventStream(gone ? null : path + '/stream', {
    detail(batch) {
      const d = batch[batch.length - 1];
      setDetail(d);
      setError(null);
      setPoints((p) => mergePoints(p, d.metrics || []));
    },
    point(batch) {
      setPoints((p) => mergePoints(p, batch));
    },
    deleted() {
      setGone(true);
    },
  });
  return { detail, points, error, gone, setDetail };
}

function Summary({ row }) {
  return (
    <dl class="summary">
      <div>
        <dt>Kind</dt>
        <dd>{row.kind}</dd>
      </div>
      <div>
        <dt>Namespace</dt>
        <dd>{row.namespace}</dd>
      </div>
      <div>
        <dt>State</dt>
        <dd>
          <span class={`state state-${String(row.state).toLowerCase()}`}>{row.state}</span>
        </dd>
      </div>
      <div>
        <dt>Progress</dt>
        <dd>
          <ProgressBar value={row.progress} label="Progress" />
        </dd>
      </div>
      <div>
        <dt>Epoch</dt>
        <dd>{epoch(row) || '—'}</dd>
      </div>
      <div>
        <dt>Step</dt>
        <dd>{row.step != null ? (row.totalSteps != null ? `${row.step}/${row.totalSteps}` : row.step) : '—'}</dd>
      </div>
      <div>
        <dt>ETA</dt>
        <dd>{duration(row.eta) || '—'}</dd>
      </div>
      <div>
        <dt>Replicas</dt>
        <dd>{row.replicas || '—'}</dd>
      </div>
      <div class="wide">
        <dt>Latest metrics</dt>
        <dd class="mono">{metrics(row.metrics) || '—'}</dd>
      </div>
    </dl>
  );
}

/** One pane per pod, side by side, with one Follow switch for all of them. */
export function LiveLogs({ ns, replicas, finished }) {
  const [follow, setFollow] = useState(!finished);
  const pods = replicas.flatMap((r) => r.pods);
  const followBox = (
    <label class="inline">
      <input type="checkbox" checked={follow} onChange={(ev) => setFollow(ev.currentTarget.checked)} /> Follow
    </label>
  );
  return (
    <Section label="Logs" extra={followBox}>
      {pods.length === 0 ? (
        <p class="muted">No pods yet.</p>
      ) : (
        <div class="log-panes">
          {pods.map((p, i) => (
            <PodLog key={p.name} ns={ns} pod={p} follow={follow} poll={i >= STREAMED_PANES} />
          ))}
        </div>
      )}
    </Section>
  );
}

function PodLog({ ns, pod, follow, poll }) {
  const path = useCallback(
    (container, following) => {
      const params = { tailLines: TAIL_LINES };
      if (container) params.container = container;
      if (following) params.follow = 'true';
      return logPath(ns, pod.name, params);
    },
    [ns, pod.name],
  );
  // A pod that starts (Pending → Running) or restarts has a new log to read.
  const restartKey = `${pod.started}|${pod.restarts}|${pod.phase === 'Pending'}`;
  return <LogPane pod={pod.name} containers={pod.containers || []} path={path} follow={follow} restartKey={restartKey} poll={poll} />;
}

export function JobPage({ ns, plural, name }) {
  const { detail, points, error, gone, setDetail } = useJobDetail(ns, plural, name);
  if (!detail) {
    return (
      <main>
        <h1>{name}</h1>
        {error ? <ErrorNote error={error} /> : <Loading />}
      </main>
    );
  }
  const row = detail.row;
  const finished = Boolean(row.finished || row.deleted || gone);
  return (
    <main>
      <div class="page-head">
        <h1>{row.name}</h1>
        {!gone && <Actions detail={detail} onRow={(r) => setDetail((d) => ({ ...d, row: r }))} />}
      </div>
      {gone && (
        <p class="notice" role="status">
          This job was deleted. Its final status, metrics and logs are in <a href={historyHref(row.uid)}>History</a>.
        </p>
      )}
      <ErrorNote error={error} />
      <Summary row={row} />
      {detail.search && <TrialsTable search={detail.search} />}
      {detail.search && <SearchCharts search={detail.search} />}
      <div class="two">
        <Conditions conditions={detail.conditions} />
        <Replicas replicas={detail.replicas} />
      </div>
      {(!detail.search || points.length > 0) && <Metrics points={points} />}
      <LiveLogs ns={row.namespace} replicas={detail.replicas} finished={finished} />
      <Events events={detail.events} />
      <Checkpoints checkpoints={detail.checkpoints} />
      <Spec yaml={detail.yaml} />
    </main>
  );
}

export { Summary };
