// A live job's actions (Suspend, Resume, Scale, Delete), each shown when the detail allows it and
// each behind a confirmation dialog; after Delete the page goes back to the jobs list.
import { useState } from 'preact/hooks';
import { deleteJSON, jobPath, postJSON } from '../api.js';
import { ConfirmDialog } from '../components/dialog.jsx';
import { navigate } from '../router.js';

function ScaleDialog({ scale, name, onConfirm, onClose }) {
  const [value, setValue] = useState(String(scale.replicas));
  const min = scale.min ?? 1;
  const max = scale.max ?? undefined;
  const n = Number(value);
  const bad = !Number.isInteger(n) || n < min || (max != null && n > max);
  return (
    <ConfirmDialog
      title={`Scale ${name}`}
      onClose={onClose}
      onConfirm={() => {
        if (bad) return Promise.reject(new Error(`Replicas must be a whole number from ${min}${max != null ? ` to ${max}` : ''}.`));
        return onConfirm(n);
      }}
    >
      <p>
        Set the number of elastic workers (now {scale.replicas}
        {max != null ? `; from ${min} to ${max}` : `; at least ${min}`}).
      </p>
      <label for="scale-replicas">Replicas</label>{' '}
      <input id="scale-replicas" type="number" min={min} max={max} step={1} value={value} required onInput={(ev) => setValue(ev.currentTarget.value)} />
    </ConfirmDialog>
  );
}

/** props: detail (JobDetail), onRow(JobRow) after a write that answered the new row. */
export function Actions({ detail, onRow }) {
  const [open, setOpen] = useState(null);
  const { row, actions } = detail;
  const base = jobPath(row.namespace, row.plural, row.name);
  const close = () => setOpen(null);
  const post = (verb, body) => postJSON(`${base}/${verb}`, body).then(onRow);

  return (
    <div class="actions" role="group" aria-label="Actions">
      {actions.suspend && (
        <button type="button" onClick={() => setOpen('suspend')}>
          Suspend
        </button>
      )}
      {actions.resume && (
        <button type="button" onClick={() => setOpen('resume')}>
          Resume
        </button>
      )}
      {actions.scale && (
        <button type="button" onClick={() => setOpen('scale')}>
          Scale
        </button>
      )}
      {actions.delete && (
        <button type="button" class="danger" onClick={() => setOpen('delete')}>
          Delete
        </button>
      )}
      {open === 'suspend' && (
        <ConfirmDialog title={`Suspend ${row.name}?`} onClose={close} onConfirm={() => post('suspend')}>
          <p>Its pods are deleted; Resume starts them again (from the last checkpoint, if the job writes them).</p>
        </ConfirmDialog>
      )}
      {open === 'resume' && (
        <ConfirmDialog title={`Resume ${row.name}?`} onClose={close} onConfirm={() => post('resume')}>
          <p>Its pods are created again.</p>
        </ConfirmDialog>
      )}
      {open === 'scale' && (
        <ScaleDialog scale={actions.scale} name={row.name} onClose={close} onConfirm={(n) => post('scale', { replicas: n })} />
      )}
      {open === 'delete' && (
        <ConfirmDialog
          title={`Delete ${row.name}?`}
          danger
          onClose={close}
          onConfirm={() => deleteJSON(base).then(() => navigate('#/'))}
        >
          <p>
            The {row.kind} and its pods are deleted. Its final status, metrics, events and logs stay in History.
          </p>
        </ConfirmDialog>
      )}
    </div>
  );
}
