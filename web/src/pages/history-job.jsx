// A historic job's page: its final status, conditions, events and spec, the full metric history,
// and the stored tail of each replica's log, all from the history store.
import { useCallback } from 'preact/hooks';
import { historyLogPath } from '../api.js';
import { ErrorNote, Loading, useJSON } from '../components/bits.jsx';
import { LogPane } from '../components/logs.jsx';
import { Checkpoints, Conditions, Events, Metrics, Replicas, Section, Spec } from '../components/sections.jsx';
import { when } from '../format.js';
import { Summary } from './job.jsx';

function StoredLog({ uid, pod, containers }) {
  const path = useCallback((container) => historyLogPath(uid, pod, container), [uid, pod]);
  return <LogPane pod={pod} containers={containers} path={path} follow={false} restartKey="" />;
}

function StoredLogs({ uid, logs }) {
  // One pane per pod; its containers' stored logs are chosen in the pane.
  const byPod = new Map();
  for (const l of logs) byPod.set(l.pod, [...(byPod.get(l.pod) || []), l.container]);
  return (
    <Section label="Logs">
      {byPod.size === 0 ? (
        <p class="muted">No logs were stored.</p>
      ) : (
        <div class="log-panes">
          {[...byPod].map(([pod, containers]) => (
            <StoredLog key={pod} uid={uid} pod={pod} containers={containers} />
          ))}
        </div>
      )}
    </Section>
  );
}

export function HistoryJobPage({ uid }) {
  const { data, error } = useJSON(`/history/${encodeURIComponent(uid)}`);
  if (!data) {
    return (
      <main>
        <h1>History</h1>
        {error ? <ErrorNote error={error} /> : <Loading />}
      </main>
    );
  }
  const row = data.row;
  return (
    <main>
      <div class="page-head">
        <h1>{row.name}</h1>
        <p class="muted">
          {row.deleted ? `Deleted ${when(row.deleted)}` : row.finished ? `Finished ${when(row.finished)}` : ''} · uid {row.uid}
        </p>
      </div>
      <Summary row={row} />
      <div class="two">
        <Conditions conditions={data.conditions || []} />
        <Replicas replicas={data.replicas || []} />
      </div>
      <Metrics points={data.metrics || []} />
      <StoredLogs uid={uid} logs={data.logs || []} />
      <Events events={data.events || []} />
      <Checkpoints checkpoints={data.checkpoints || []} />
      <Spec yaml={data.yaml || ''} />
    </main>
  );
}
