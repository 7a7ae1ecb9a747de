// How values read in cells: durations as 1h2m, ages, compact metrics, numbers.

/** Seconds as at most two units: 2d3h, 1h2m, 5m12s, 42s. */
export function duration(seconds) {
  if (seconds == null || !isFinite(seconds)) return '';
  let s = Math.max(0, Math.round(seconds));
  const units = [
    ['d', 86400],
    ['h', 3600],
    ['m', 60],
    ['s', 1],
  ];
  const out = [];
  for (const [name, size] of units) {
    if (out.length === 2) break;
    const n = Math.floor(s / size);
    if (n > 0 || (out.length === 0 && size === 1)) out.push(n + name);
    else if (out.length === 1) break; // 1h0m reads as 1h
    s -= n * size;
  }
  return out.join('');
}

export function age(iso, now) {
  if (!iso) return '';
  return duration((now - Date.parse(iso)) / 1000);
}

export function number(v) {
  if (typeof v !== 'number') return String(v);
  if (Number.isInteger(v)) return String(v);
  const a = Math.abs(v);
  if (a !== 0 && (a < 1e-3 || a >= 1e6)) return v.toExponential(2);
  return String(Number(v.toPrecision(4)));
}

/** `loss=0.123 acc=0.91`, in the job's reporting order, for a table cell. */
export function metrics(m) {
  if (!m) return '';
  return Object.entries(m)
    .map(([k, v]) => `${k}=${number(v)}`)
    .join(' ');
}

export function when(iso) {
  if (!iso) return '';
  const d = new Date(iso);
  return isNaN(d) ? iso : d.toLocaleString();
}

export function epoch(row) {
  if (row.epoch == null) return '';
  return row.totalEpochs != null ? `${row.epoch}/${row.totalEpochs}` : String(row.epoch);
}

const SUFFIX = { Ki: 2 ** 10, Mi: 2 ** 20, Gi: 2 ** 30, Ti: 2 ** 40, Pi: 2 ** 50, Ei: 2 ** 60, n: 1e-9, u: 1e-6, m: 1e-3, k: 1e3, M: 1e6, G: 1e9, T: 1e12, P: 1e15, E: 1e18 };

/** A Kubernetes quantity ("500m", "6Gi", "2", or a number) as a number; NaN when it is none. */
export function quantity(q) {
  if (typeof q === 'number') return q;
  const m = /^([+-]?[0-9.]+(?:[eE][+-]?[0-9]+)?)([a-zA-Z]{0,2})$/.exec(String(q ?? '').trim());
  if (!m) return NaN;
  const scale = m[2] ? SUFFIX[m[2]] : 1;
  return scale === undefined ? NaN : Number(m[1]) * scale;
}
