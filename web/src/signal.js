// A tiny observable value and its hook: the few app-wide facts (session ended, stream state,
// the clock for ages) that pages far apart read, without a state library.
import { useEffect, useState } from 'preact/hooks';

export function signal(initial) {
  let value = initial;
  const subscribers = new Set();
  return {
    get: () => value,
    set(next) {
      if (Object.is(next, value)) return;
      value = next;
      for (const fn of subscribers) fn(value);
    },
    subscribe(fn) {
      subscribers.add(fn);
      return () => subscribers.delete(fn);
    },
  };
}

export function useSignal(sig) {
  const [value, setValue] = useState(sig.get());
  useEffect(() => {
    setValue(sig.get());
    return sig.subscribe(setValue);
  }, [sig]);
  return value;
}

// Ages and "x ago" cells re-render from this, every 5 s, instead of each row keeping a timer.
export const clock = signal(Date.now());
setInterval(() => clock.set(Date.now()), 5000);
