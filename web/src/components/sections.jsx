// The sections a job's page and a historic job's page share: conditions as a timeline,
// replicas and their pods, events, the spec, checkpoints, and the metric charts.
import { useMemo, useState } from 'preact/hooks';
import { age, when } from '../format.js';
import { metricNames, series, xModes } from '../metrics.js';
import { useSignal, clock } from '../signal.js';
import { Chart } from './chart.jsx';

function Section({ label, children, extra }) {
  const id = `section-${label.toLowerCase()}`;
  return (
    <section aria-label={label} class="card" id={id}>
      <div class="section-head">
        <h2>{label}</h2>
        {extra}
      </div>
      {children}
    </section>
  );
}

export function Conditions({ conditions }) {
  return (
    <Section label="Conditions">
      {conditions.length === 0 ? (
        <p class="muted">No conditions yet.</p>
      ) : (
        <ol class="timeline">
          {conditions.map((c, i) => (
            <li key={`${c.type}-${i}`} class={c.status === 'True' ? 'on' : 'off'}>
              <time dateTime={c.lastTransitionTime}>{when(c.lastTransitionTime)}</time>
              <strong>{c.type}</strong> <span class="cond-status">{c.status}</span>
              {c.reason && <span class="reason"> · {c.reason}</span>}
              {c.message && <div class="message">{c.message}</div>}
            </li>
          ))}
        </ol>
      )}
    </Section>
  );
}

export function Replicas({ replicas }) {
  const now = useSignal(clock);
  return (
    <Section label="Replicas">
      {replicas.length === 0 && <p class="muted">No replicas.</p>}
      {replicas.map((r) => (
        <table key={r.type} class="grid">
          <caption>
            {r.type} ({r.pods.length} {r.pods.length === 1 ? 'pod' : 'pods'})
          </caption>
          <thead>
            <tr>
              <th scope="col">Pod</th>
              <th scope="col">Phase</th>
              <th scope="col">Ready</th>
              <th scope="col">Node</th>
              <th scope="col">Restarts</th>
              <th scope="col">Started</th>
              <th scope="col">Reason</th>
            </tr>
          </thead>
          <tbody>
            {r.pods.map((p) => (
              <tr key={p.name} data-replica-pod={p.name}>
                <th scope="row">{p.name}</th>
                <td>{p.phase}</td>
                <td>{p.ready ? 'yes' : 'no'}</td>
                <td>{p.node || '—'}</td>
                <td class="num">{p.restarts}</td>
                <td title={when(p.started)}>{p.started ? `${age(p.started, now)} ago` : '—'}</td>
                <td>{p.reason || ''}</td>
              </tr>
            ))}
          </tbody>
        </table>
      ))}
    </Section>
  );
}

export function Events({ events }) {
  const now = useSignal(clock);
  return (
    <Section label="Events">
      {events.length === 0 ? (
        <p class="muted">No events.</p>
      ) : (
        <table class="grid">
          <thead>
            <tr>
              <th scope="col">Type</th>
              <th scope="col">Reason</th>
              <th scope="col">Object</th>
              <th scope="col">Message</th>
              <th scope="col">Count</th>
              <th scope="col">Last seen</th>
            </tr>
          </thead>
          <tbody>
            {events.map((e, i) => (
              <tr key={i} class={e.type === 'Warning' ? 'warning' : ''}>
                <td>{e.type}</td>
                <td>{e.reason}</td>
                <td>{e.object}</td>
                <td class="message">{e.message}</td>
                <td class="num">{e.count}</td>
                <td title={when(e.lastTimestamp)}>{e.lastTimestamp ? `${age(e.lastTimestamp, now)} ago` : ''}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </Section>
  );
}

export function Spec({ yaml }) {
  return (
    <Section label="Spec">
      <pre class="yaml" tabIndex={0} aria-label="The job as YAML">
        {yaml}
      </pre>
    </Section>
  );
}

export function Checkpoints({ checkpoints }) {
  return (
    <Section label="Checkpoints">
      {checkpoints.length === 0 ? (
        <p class="muted">No checkpoints.</p>
      ) : (
        <table class="grid">
          <thead>
            <tr>
              <th scope="col">Path</th>
              <th scope="col">Epoch</th>
              <th scope="col">Time</th>
            </tr>
          </thead>
          <tbody>
            {checkpoints.map((c) => (
              <tr key={c.path}>
                <td class="mono">{c.path}</td>
                <td class="num">{c.epoch ?? ''}</td>
                <td>{when(c.time)}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </Section>
  );
}

/** A radio group choosing the charts' x axis among `modes`. */
export function AxisToggle({ modes, value, onChange, name }) {
  return (
    <fieldset class="toggle">
      <legend>X axis</legend>
      {modes.map((m) => (
        <label key={m}>
          <input type="radio" name={name} value={m} checked={value === m} onChange={() => onChange(m)} /> {m}
        </label>
      ))}
    </fieldset>
  );
}

/** One chart per numeric metric of `points`, against the chosen axis. */
export function Metrics({ points }) {
  const modes = xModes(points);
  const [chosen, setChosen] = useState(null);
  const mode = chosen && modes.includes(chosen) ? chosen : modes[0];
  const names = useMemo(() => metricNames(points), [points]);
  return (
    <Section label="Metrics" extra={names.length > 0 && <AxisToggle name="job-x" modes={modes} value={mode} onChange={setChosen} />}>
      {names.length === 0 ? (
        <p class="muted">No metrics reported yet.</p>
      ) : (
        <div class="charts">
          {names.map((m) => (
            <MetricChart key={m} metric={m} points={points} mode={mode} />
          ))}
        </div>
      )}
    </Section>
  );
}

function MetricChart({ metric, points, mode }) {
  const lists = useMemo(() => [series(points, metric, mode)], [points, metric, mode]);
  return <Chart metric={metric} mode={mode} labels={[metric]} lists={lists} />;
}

export { Section };
