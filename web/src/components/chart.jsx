// One uPlot chart of one metric, with one or more series (a job's, or two runs' to compare).
// uPlot is built once per metric/axis/series count; new points go in with setData, so a report
// redraws one canvas, not the page. The figure says how many points it draws (data-points) and
// its latest values in text, for screen readers and tests.
import { useEffect, useMemo, useRef } from 'preact/hooks';
import uPlot from 'uplot';
import 'uplot/dist/uPlot.min.css';
import { number } from '../format.js';

// Series colours come from the theme (--series-N), so they keep their contrast in dark mode too.
const COLOURS = ['#1f5fbf', '#c2410c', '#15803d', '#7e22ce', '#0e7490', '#a16207', '#be185d', '#4d7c0f'];
const HEIGHT = 220;

const AXIS_LABEL = { step: 'step', epoch: 'epoch', time: 'time', elapsed: 'seconds since start', trial: 'trial', report: 'report' };

/** Aligned uPlot data from per-series [[x, y]] lists (joined on x when there are several). */
function aligned(lists) {
  const tables = lists.map((l) => [l.map((p) => p[0]), l.map((p) => p[1])]);
  if (tables.length === 1) return tables[0];
  return uPlot.join(tables);
}

// Axes that count (trials, reports) tick at whole numbers only.
const WHOLE = new Set(['trial', 'report']);
const WHOLE_INCRS = [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000];

function build(el, metric, mode, labels, data, dots) {
  const style = getComputedStyle(el);
  const ink = style.color || '#222';
  const grid = style.getPropertyValue('--grid').trim() || '#ddd';
  const colour = (i) => style.getPropertyValue(`--series-${(i % COLOURS.length) + 1}`).trim() || COLOURS[i % COLOURS.length];
  const axis = { stroke: ink, grid: { stroke: grid, width: 1 }, ticks: { stroke: grid, width: 1 } };
  return new uPlot(
    {
      width: Math.max(200, el.clientWidth),
      height: HEIGHT,
      scales: { x: { time: mode === 'time' } },
      legend: { show: true },
      cursor: { drag: { x: true, y: false } },
      axes: [
        { ...axis, label: AXIS_LABEL[mode], ...(WHOLE.has(mode) ? { incrs: WHOLE_INCRS } : {}) },
        { ...axis, label: metric, size: 60 },
      ],
      series: [
        { label: AXIS_LABEL[mode] },
        ...labels.map((label, i) =>
          dots.includes(i)
            ? { label, stroke: colour(i), width: 2, paths: () => null, points: { show: true, size: 8, fill: colour(i) } }
            : { label, stroke: colour(i), width: 2, spanGaps: true, points: { show: data[0].length < 60 } },
        ),
      ],
    },
    data,
    el,
  );
}

function summary(metric, mode, labels, lists) {
  const parts = lists.map((l, i) => {
    const who = labels.length > 1 ? `${labels[i]}: ` : '';
    if (!l.length) return `${who}no points`;
    const [x, y] = l[l.length - 1];
    const at = mode === 'time' ? new Date(x * 1000).toLocaleTimeString() : number(x);
    return `${who}latest ${number(y)} at ${AXIS_LABEL[mode]} ${at} (${l.length} points)`;
  });
  return `${metric} — ${parts.join('; ')}`;
}

/**
 * props: metric (name), mode ('step'|'epoch'|'time'|'elapsed'|'trial'|'report'), labels (one per series),
 * lists (one [[x, y]] list per series), dots (indexes of the series drawn as points, unjoined).
 */
export function Chart({ metric, mode, labels, lists, dots = [] }) {
  const holder = useRef(null);
  const plot = useRef(null);
  const shape = `${mode}|${labels.join('\u0000')}|${dots.join(',')}`;
  const data = useMemo(() => aligned(lists), [lists]);

  // Built when the axis or the series change; destroyed with the figure.
  useEffect(() => {
    const el = holder.current;
    plot.current = build(el, metric, mode, labels, data, dots);
    const resize = new ResizeObserver(() => {
      const width = Math.max(200, el.clientWidth);
      if (plot.current && plot.current.width !== width) plot.current.setSize({ width, height: HEIGHT });
    });
    resize.observe(el);
    return () => {
      resize.disconnect();
      plot.current.destroy();
      plot.current = null;
    };
  }, [metric, shape]);

  // Every render with new points: one setData, the scales follow the data.
  useEffect(() => {
    if (plot.current && plot.current.data !== data) plot.current.setData(data);
  });

  const count = lists.reduce((n, l) => n + l.length, 0);
  const text = summary(metric, mode, labels, lists);
  return (
    <figure class="chart" data-metric={metric} data-points={count} aria-label={`Chart of ${metric} against ${AXIS_LABEL[mode]}`}>
      <div ref={holder} class="chart-canvas" aria-hidden="true" />
      <figcaption>{text}</figcaption>
    </figure>
  );
}
