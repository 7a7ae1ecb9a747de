// Small pieces every page uses: progress bar, usage meter, error and loading notes, a select
// with a real label, and the hook that loads one JSON read.
import { useEffect, useState } from 'preact/hooks';
import { getJSON } from '../api.js';
import { quantity } from '../format.js';

export function ProgressBar({ value, label }) {
  if (value == null) return <span class="muted">—</span>;
  const pct = Math.max(0, Math.min(100, value));
  return (
    <span
      class="progress"
      role="progressbar"
      aria-valuenow={Math.round(pct * 10) / 10}
      aria-valuemin={0}
      aria-valuemax={100}
      aria-label={label}
    >
      <span class="bar" aria-hidden="true">
        <span class="bar-fill" style={{ width: `${pct}%` }} />
      </span>
      <span class="bar-text">{Math.round(pct)}%</span>
    </span>
  );
}

/** used of nominal, drawn as a bar; text beside it says both. */
export function Meter({ used, nominal, label }) {
  const u = quantity(used) || 0;
  const n = quantity(nominal) || 0;
  const pct = n > 0 ? Math.min(100, (u / n) * 100) : 0;
  return (
    <span class="meter-wrap">
      <span class="bar meter" role="meter" aria-valuenow={u} aria-valuemin={0} aria-valuemax={n} aria-valuetext={`${used} of ${nominal}`} aria-label={label}>
        <span class={`bar-fill${u > n ? ' over' : ''}`} style={{ width: `${pct}%` }} />
      </span>
      <span>
        {String(used)} / {String(nominal)}
      </span>
    </span>
  );
}

export function ErrorNote({ error }) {
  if (!error) return null;
  return (
    <p class="error" role="alert">
      {error.message || String(error)}
    </p>
  );
}

export const Loading = () => <p class="muted">Loading…</p>;

/** A <select> with its <label>; options are [value, text] pairs, '' meaning "all". */
export function LabelledSelect({ id, label, value, options, onChange }) {
  return (
    <span class="field">
      <label for={id}>{label}</label>
      <select id={id} value={value} onChange={(ev) => onChange(ev.currentTarget.value)}>
        {options.map(([v, text]) => (
          <option key={v} value={v}>
            {text}
          </option>
        ))}
      </select>
    </span>
  );
}

/** { data, error, reload } of a JSON read of `path`, refetched when `path` changes. */
export function useJSON(path) {
  const [state, setState] = useState({ data: null, error: null });
  const [n, setN] = useState(0);
  useEffect(() => {
    if (!path) return undefined;
    let live = true;
    getJSON(path).then(
      (data) => live && setState({ data, error: null }),
      (error) => live && setState((s) => ({ data: s.data, error })),
    );
    return () => {
      live = false;
    };
  }, [path, n]);
  return { ...state, reload: () => setN((x) => x + 1) };
}
