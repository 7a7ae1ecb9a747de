// Log panes side by side, one per pod: text read with fetch's stream reader and appended to a
// <pre> as it arrives (not through Preact state: a busy log is many chunks a second), kept to
// the last ~1 MB, scrolled to the end while following.
import { useCallback, useEffect, useRef, useState } from 'preact/hooks';
import { getText } from '../api.js';

const KEEP = 1 << 20; // characters kept in the DOM per pane
const SLACK = KEEP / 4; // trimmed only once this much over, so trimming is rare
const POLL_MS = 3000;

/** Append `text` to `pre`, trimming the front to the last KEEP characters at a line start. */
function append(pre, text, state) {
  pre.append(text);
  state.size += text.length;
  if (state.size > KEEP + SLACK) {
    const all = pre.textContent;
    let cut = all.length - KEEP;
    const nl = all.indexOf('\n', cut);
    if (nl >= 0 && nl - cut < 4096) cut = nl + 1;
    pre.textContent = all.slice(cut);
    state.size = all.length - cut;
  }
}

/** Read all of `resp`'s body into `pre`, replacing its text, chunk by chunk; false when empty. */
async function pour(resp, pre, followRef) {
  const reader = resp.body.pipeThrough(new TextDecoderStream()).getReader();
  const state = { size: 0 };
  let first = true;
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    if (first) pre.textContent = ''; // cleared only now: a re-read (poll) does not blink
    first = false;
    append(pre, value, state);
    if (followRef.current) pre.scrollTop = pre.scrollHeight;
  }
  return state.size > 0;
}

/**
 * Read the log into the pane's <pre>. While `follow` is on the read goes on as the pod writes
 * (follow=true) and keeps the pane scrolled down; turning it off stops the read and keeps the
 * text; turning it on again reads anew. `restartKey` changes when the pod's process did (a
 * restart), to read it anew too. With `poll`, following reads the tail again every few seconds
 * instead of holding a connection open (the browser allows six per host over HTTP/1.1, and
 * every stream holds one).
 */
function useLogStream(preRef, path, follow, restartKey, poll) {
  const [note, setNote] = useState('');
  const followRef = useRef(follow);
  followRef.current = follow;
  const abortRef = useRef(null);
  const [generation, setGeneration] = useState(0);
  const wasFollowing = useRef(follow);

  useEffect(() => {
    if (follow && !wasFollowing.current) setGeneration((n) => n + 1);
    if (!follow && abortRef.current) abortRef.current.abort();
    wasFollowing.current = follow;
  }, [follow]);

  useEffect(() => {
    const pre = preRef.current;
    pre.textContent = '';
    const abort = new AbortController();
    abortRef.current = abort;
    let timer = null;
    setNote('loading…');
    const read = async () => {
      try {
        const following = followRef.current;
        const resp = await getText(path(following && !poll), abort.signal);
        setNote('');
        const any = await pour(resp, pre, followRef);
        if (!any) setNote('(no output yet)');
        // A log read to its end (a finished pod, a stored tail) opens at its last lines.
        else if (!following) pre.scrollTop = pre.scrollHeight;
        if (poll && followRef.current && !abort.signal.aborted) timer = setTimeout(read, POLL_MS);
      } catch (err) {
        if (err.name !== 'AbortError') setNote(err.message || String(err));
        else if (!pre.textContent) setNote('');
      }
    };
    read();
    return () => {
      abort.abort();
      clearTimeout(timer);
    };
  }, [path, restartKey, generation, poll]);

  return note;
}

/**
 * One pane. props: pod (name, shown as its title), containers, path(container, follow) → the
 * log's URL path, follow (bool), restartKey, poll (follow by reading again, not by a stream).
 */
export function LogPane({ pod, containers, path, follow, restartKey, poll = false }) {
  const pre = useRef(null);
  const [container, setContainer] = useState(containers[0] || '');
  const readPath = useCallback((following) => path(container, following), [path, container]);
  const note = useLogStream(pre, readPath, follow, restartKey, poll);
  const selectId = `log-container-${pod}`;

  useEffect(() => {
    if (follow && pre.current) pre.current.scrollTop = pre.current.scrollHeight;
  }, [follow]);

  return (
    <div class="log-pane" data-pod={pod}>
      <div class="log-head">
        <h3>{pod}</h3>
        {containers.length > 1 && (
          <span>
            <label for={selectId}>Container</label>{' '}
            <select id={selectId} value={container} onChange={(ev) => setContainer(ev.currentTarget.value)}>
              {containers.map((c) => (
                <option key={c} value={c}>
                  {c}
                </option>
              ))}
            </select>
          </span>
        )}
      </div>
      {note && <p class="log-note">{note}</p>}
      <pre ref={pre} class="log" tabIndex={0} aria-label={`Log of ${pod}`} />
    </div>
  );
}
