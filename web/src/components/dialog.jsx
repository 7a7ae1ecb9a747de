// The confirmation dialog every action goes through: modal, focus moved in and kept in (Tab
// wraps), Escape cancels, focus goes back to the button that opened it; a failed action's
// Status message shows inside, so the user can read it and cancel or try again.
import { useEffect, useRef, useState } from 'preact/hooks';

const FOCUSABLE = 'button:not([disabled]), input:not([disabled]), select, textarea, a[href], [tabindex]:not([tabindex="-1"])';

let nextId = 0;

/**
 * props: title, children (the question, any inputs), confirmLabel ('Confirm'), danger,
 * onConfirm() → Promise (rejects with an error whose message is shown), onClose().
 */
export function ConfirmDialog({ title, children, onConfirm, onClose, danger = false }) {
  const ref = useRef(null);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState('');
  const [id] = useState(() => `dialog-${++nextId}`);

  useEffect(() => {
    const opener = document.activeElement;
    const box = ref.current;
    const first = box.querySelector('input, ' + FOCUSABLE);
    (first || box).focus();
    return () => {
      if (opener && opener.isConnected) opener.focus();
    };
  }, []);

  const onKeyDown = (ev) => {
    if (ev.key === 'Escape') {
      ev.preventDefault();
      onClose();
      return;
    }
    if (ev.key !== 'Tab') return;
    const items = [...ref.current.querySelectorAll(FOCUSABLE)];
    if (!items.length) return;
    const first = items[0];
    const last = items[items.length - 1];
    if (ev.shiftKey && document.activeElement === first) {
      ev.preventDefault();
      last.focus();
    } else if (!ev.shiftKey && document.activeElement === last) {
      ev.preventDefault();
      first.focus();
    }
  };

  const confirm = async (ev) => {
    ev.preventDefault();
    setBusy(true);
    setError('');
    try {
      await onConfirm();
      onClose();
    } catch (err) {
      setError(err.message || String(err));
      setBusy(false);
    }
  };

  return (
    <div class="backdrop" onMouseDown={(ev) => ev.target === ev.currentTarget && onClose()}>
      <form
        ref={ref}
        class="dialog"
        role="dialog"
        aria-modal="true"
        aria-labelledby={`${id}-title`}
        aria-describedby={`${id}-body`}
        tabIndex={-1}
        onKeyDown={onKeyDown}
        onSubmit={confirm}
      >
        <h2 id={`${id}-title`}>{title}</h2>
        <div id={`${id}-body`}>{children}</div>
        {error && (
          <p class="error" role="alert">
            {error}
          </p>
        )}
        <div class="dialog-buttons">
          <button type="button" onClick={onClose}>
            Cancel
          </button>
          <button type="submit" class={danger ? 'danger' : 'primary'} disabled={busy}>
            Confirm
          </button>
        </div>
      </form>
    </div>
  );
}
