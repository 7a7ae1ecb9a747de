// Two runs' curves on one chart per metric (the union of both runs' metrics), against step,
// epoch or seconds since each run's first report; the legend names both runs.
import { useMemo, useState } from 'preact/hooks';
import { Chart } from '../components/chart.jsx';
import { ErrorNote, Loading, useJSON } from '../components/bits.jsx';
import { AxisToggle } from '../components/sections.jsx';
import { metricNames, series, xModes } from '../metrics.js';
import { historyHref } from '../router.js';

/** Run labels that tell the two apart even when both runs have one name. */
function labels(a, b) {
  if (a.name !== b.name || a.namespace !== b.namespace) {
    return a.name !== b.name ? [a.name, b.name] : [`${a.namespace}/${a.name}`, `${b.namespace}/${b.name}`];
  }
  return [`${a.name} (${a.uid.slice(0, 8)})`, `${b.name} (${b.uid.slice(0, 8)})`];
}

function CompareChart({ metric, runs, mode, names }) {
  const lists = useMemo(() => runs.map((r) => series(r.points, metric, mode)), [runs, metric, mode]);
  return <Chart metric={metric} mode={mode} labels={names} lists={lists} />;
}

export function ComparePage({ query }) {
  const a = useJSON(query.a ? `/metrics/${encodeURIComponent(query.a)}` : null);
  const b = useJSON(query.b ? `/metrics/${encodeURIComponent(query.b)}` : null);
  const [chosen, setChosen] = useState(null);
  const runs = useMemo(() => (a.data && b.data ? [a.data, b.data] : null), [a.data, b.data]);

  if (!query.a || !query.b) {
    return (
      <main>
        <h1>Compare</h1>
        <p>
          Choose two runs in <a href="#/history">History</a> to compare.
        </p>
      </main>
    );
  }
  if (!runs) {
    return (
      <main>
        <h1>Compare</h1>
        <ErrorNote error={a.error || b.error} />
        {!a.error && !b.error && <Loading />}
      </main>
    );
  }
  const all = [...runs[0].points, ...runs[1].points];
  // Time compares as seconds since each run's first report: the runs ran at different times.
  const modes = xModes(all).map((m) => (m === 'time' ? 'elapsed' : m));
  const mode = chosen && modes.includes(chosen) ? chosen : modes[0];
  const names = labels(runs[0].row, runs[1].row);
  const metrics = metricNames(all);
  return (
    <main>
      <h1>Compare</h1>
      <p>
        <a href={historyHref(runs[0].row.uid)}>{names[0]}</a> and <a href={historyHref(runs[1].row.uid)}>{names[1]}</a>
      </p>
      <section aria-label="Metrics" class="card">
        <div class="section-head">
          <h2>Metrics</h2>
          {metrics.length > 0 && <AxisToggle name="cmp-x" modes={modes} value={mode} onChange={setChosen} />}
        </div>
        {metrics.length === 0 ? (
          <p class="muted">Neither run reported numeric metrics.</p>
        ) : (
          <div class="charts">
            {metrics.map((m) => (
              <CompareChart key={m} metric={m} runs={runs} mode={mode} names={names} />
            ))}
          </div>
        )}
      </section>
    </main>
  );
}
