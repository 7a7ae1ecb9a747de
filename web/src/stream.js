// Server-sent event streams: one EventSource per open page, its state for the header's live
// region, events handed on in batches once per animation frame (a burst of 1,000 changes is one
// render, not 1,000), and the session check when the plane refuses the stream.
import { useEffect, useRef } from 'preact/hooks';
import { BASE, probeSession, sessionEnded } from './api.js';
import { signal } from './signal.js';

// '' where the page has no stream; 'live' while connected; 'reconnecting…' between tries.
export const streamState = signal('');

// A refused stream (the plane restarting, a job that went away) is asked again after 2 s, then
// less and less often, up to every 30 s.
const RETRY_MS = 2000;
const RETRY_MAX_MS = 30000;

/**
 * Open `path` as an EventSource while the calling component is mounted (or until `path`
 * changes). `handlers` maps an event name to fn(list of parsed data, in arrival order).
 */
export function useEventStream(path, handlers) {
  const latest = useRef(handlers);
  latest.current = handlers;

  useEffect(() => {
    if (!path) return undefined;
    let source = null;
    let retry = null;
    let frame = null;
    let closed = false;
    let wait = RETRY_MS;
    // Event name → data received since the last frame; delivered in one go per frame.
    let pending = [];

    const flush = () => {
      frame = null;
      const batch = pending;
      pending = [];
      // Group consecutive events of one name, so order across names is kept.
      let i = 0;
      while (i < batch.length) {
        const name = batch[i][0];
        const items = [];
        while (i < batch.length && batch[i][0] === name) items.push(batch[i++][1]);
        const fn = latest.current[name];
        if (fn) fn(items);
      }
    };
    const queue = (name, data) => {
      pending.push([name, data]);
      if (frame == null) frame = requestAnimationFrame(flush);
    };

    const open = () => {
      source = new EventSource(BASE + path, { withCredentials: true });
      source.onopen = () => {
        wait = RETRY_MS;
        streamState.set('live');
      };
      for (const name of Object.keys(latest.current)) {
        source.addEventListener(name, (ev) => {
          let data;
          try {
            data = JSON.parse(ev.data);
          } catch {
            return; // a torn event; the next snapshot/detail repairs the page
          }
          queue(name, data);
        });
      }
      source.onerror = async () => {
        if (closed) return;
        streamState.set('reconnecting…');
        if (source.readyState !== EventSource.CLOSED) return; // the browser retries by itself
        // Closed for good: a non-200 answer. Ask once whether the session is gone.
        source = null;
        if (!(await probeSession())) {
          sessionEnded.set(true);
          return;
        }
        if (!closed) retry = setTimeout(open, wait);
        wait = Math.min(wait * 2, RETRY_MAX_MS);
      };
    };

    open();
    return () => {
      closed = true;
      if (source) source.close();
      clearTimeout(retry);
      if (frame != null) cancelAnimationFrame(frame);
      streamState.set('');
    };
  }, [path]);
}
