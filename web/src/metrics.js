// Metric points (as the job's status recorded them) turned into chart series: which metrics are
// numeric, which x axes the points allow, and the (x, y) pairs of one metric, ascending in x.

export const X_MODES = ['step', 'epoch', 'time'];

/** Numeric metric names, in first-reported order. */
export function metricNames(points) {
  const seen = new Set();
  for (const p of points) {
    for (const [k, v] of Object.entries(p.metrics || {})) if (typeof v === 'number') seen.add(k);
  }
  return [...seen];
}

/** The x axes the points carry (time always); the first is the default. */
export function xModes(points) {
  const modes = [];
  if (points.some((p) => p.step != null)) modes.push('step');
  if (points.some((p) => p.epoch != null)) modes.push('epoch');
  modes.push('time');
  return modes;
}

function xOf(p, mode, origin) {
  if (mode === 'time') return Date.parse(p.time) / 1000;
  if (mode === 'elapsed') return Date.parse(p.time) / 1000 - origin;
  return p[mode];
}

/** [[x, y], ...] of `metric`, ascending in x; points without that x or value are left out. */
export function series(points, metric, mode) {
  const origin = points.length ? Date.parse(points[0].time) / 1000 : 0;
  const out = [];
  for (const p of points) {
    const y = p.metrics ? p.metrics[metric] : undefined;
    const x = xOf(p, mode, origin);
    if (typeof y === 'number' && x != null && isFinite(x)) out.push([x, y]);
  }
  // Reports arrive in order almost always; sort only when they did not (a restarted rank).
  for (let i = 1; i < out.length; i++) {
    if (out[i][0] < out[i - 1][0]) {
      out.sort((a, b) => a[0] - b[0]);
      break;
    }
  }
  return out;
}

/** A point's identity, so a streamed point already in a detail's history is not drawn twice. */
export const pointKey = (p) => `${p.time}|${p.step}|${p.epoch}`;

/** `points` with `more` appended, dropping any already there (by pointKey). */
export function mergePoints(points, more) {
  if (!more.length) return points;
  const keys = new Set(points.map(pointKey));
  const fresh = more.filter((p) => !keys.has(pointKey(p)));
  return fresh.length ? points.concat(fresh) : points;
}
