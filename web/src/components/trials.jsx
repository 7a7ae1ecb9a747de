// A search job's trials (its page's `search`, whatever the search's kind): the table (a column per
// parameter, the state, the objective; the best trial marked, each name linking to its trial's
// job page where that job exists), the objective per trial with the best so far, and every
// trial's curve of the objective metric on one chart.
import { useMemo } from 'preact/hooks';
import { number } from '../format.js';
import { jobHref } from '../router.js';
import { Chart } from './chart.jsx';
import { Section } from './sections.jsx';

/** A parameter's value as a cell shows it: a number to 4 significant digits (the full text in its title). */
function Value({ text }) {
  const n = Number(text);
  const shown = text !== '' && text != null && isFinite(n) ? number(n) : text ?? '';
  return <span title={shown !== text ? text : undefined}>{shown}</span>;
}

export function TrialsTable({ search }) {
  const { trials, parameters, metric, goal } = search;
  return (
    <Section label="Trials" extra={<span class="muted">{`${goal} ${metric}`}</span>}>
      {trials.length === 0 ? (
        <p class="muted">No trials yet.</p>
      ) : (
        <div class="table-wrap">
          <table class="grid trials" aria-label="Trials">
            <thead>
              <tr>
                <th scope="col">#</th>
                <th scope="col">Trial</th>
                {parameters.map((p) => (
                  <th key={p} scope="col" class="num">
                    {p}
                  </th>
                ))}
                <th scope="col">State</th>
                <th scope="col" class="num">
                  {metric}
                </th>
              </tr>
            </thead>
            <tbody>
              {trials.map((t) => (
                <tr key={t.name} data-trial={t.name} class={t.best ? 'best' : ''}>
                  <td class="num">{t.number}</td>
                  <th scope="row">
                    {t.job ? <a href={jobHref(t.job)}>{t.name}</a> : t.name}
                    {t.best && <span class="best-mark"> ★ best</span>}
                  </th>
                  {parameters.map((p) => (
                    <td key={p} class="num mono">
                      <Value text={t.parameters[p]} />
                    </td>
                  ))}
                  <td title={t.message || undefined}>
                    <span class={`state state-${String(t.state).toLowerCase()}`}>{t.state}</span>
                  </td>
                  <td class="num">{t.value != null ? number(t.value) : '—'}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
    </Section>
  );
}

// The objective per trial as points (the trials are separate runs), the best so far as a line.
const DOTS = [0];

export function SearchCharts({ search }) {
  const { trials, curves, metric, curveAxis } = search;
  const perTrial = useMemo(
    () => [
      trials.filter((t) => t.value != null).map((t) => [t.number, t.value]),
      trials.filter((t) => t.bestSoFar != null).map((t) => [t.number, t.bestSoFar]),
    ],
    [trials],
  );
  const lists = useMemo(() => curves.map((c) => c.points), [curves]);
  const labels = useMemo(() => curves.map((c) => c.trial), [curves]);
  return (
    <Section label="Search">
      {perTrial[0].length === 0 && curves.length === 0 ? (
        <p class="muted">No trial has reported {metric} yet.</p>
      ) : (
        <div class="charts">
          {perTrial[0].length > 0 && <Chart metric={metric} mode="trial" labels={[metric, 'best so far']} lists={perTrial} dots={DOTS} />}
          {curves.length > 0 && <Chart metric={metric} mode={curveAxis} labels={labels} lists={lists} />}
        </div>
      )}
    </Section>
  );
}
