// The app's shell: header with the main navigation and the stream's live state, the page the
// hash route names, and the "session ended" notice that replaces pages once the login expired.
import { render } from 'preact';
import { sessionEnded } from './api.js';
import { ComparePage } from './pages/compare.jsx';
import { HistoryJobPage } from './pages/history-job.jsx';
import { HistoryPage } from './pages/history.jsx';
import { JobPage } from './pages/job.jsx';
import { JobsPage } from './pages/jobs.jsx';
import { QueuesPage } from './pages/queues.jsx';
import { RuntimesPage } from './pages/runtimes.jsx';
import { route } from './router.js';
import { useSignal } from './signal.js';
import { streamState } from './stream.js';
import './style.css';

const NAV = [
  ['Jobs', '#/', (p) => p[0] === undefined || p[0] === 'jobs'],
  ['History', '#/history', (p) => p[0] === 'history' || p[0] === 'compare'],
  ['Queues', '#/queues', (p) => p[0] === 'queues'],
  ['Runtimes', '#/runtimes', (p) => p[0] === 'runtimes'],
];

function Page({ parts, query }) {
  const [top, ...rest] = parts;
  if (top === undefined) return <JobsPage query={query} />;
  if (top === 'jobs' && rest.length === 3) return <JobPage key={rest.join('/')} ns={rest[0]} plural={rest[1]} name={rest[2]} />;
  if (top === 'history' && rest.length === 0) return <HistoryPage query={query} />;
  if (top === 'history' && rest.length === 1) return <HistoryJobPage key={rest[0]} uid={rest[0]} />;
  if (top === 'compare') return <ComparePage query={query} />;
  if (top === 'queues') return <QueuesPage />;
  if (top === 'runtimes') return <RuntimesPage />;
  return (
    <main>
      <h1>Not found</h1>
      <p>
        No page at <code>{location.hash}</code>. <a href="#/">Back to the jobs</a>.
      </p>
    </main>
  );
}

function SessionEnded() {
  return (
    <main>
      <h1>Session ended</h1>
      <p role="alert">
        Session ended — run <code>yard dashboard</code> for a new login link.
      </p>
    </main>
  );
}

function App() {
  const { parts, query } = useSignal(route);
  const ended = useSignal(sessionEnded);
  const live = useSignal(streamState);
  return (
    <>
      <a class="skip" href="#content" onClick={(ev) => (ev.preventDefault(), document.getElementById('content').focus())}>
        Skip to content
      </a>
      <header class="top">
        <span class="brand">trainyard</span>
        <nav aria-label="Main">
          <ul>
            {NAV.map(([label, href, on]) => (
              <li key={label}>
                <a href={href} aria-current={on(parts) ? 'page' : undefined}>
                  {label}
                </a>
              </li>
            ))}
          </ul>
        </nav>
        <span class={`live live-${live ? (live === 'live' ? 'on' : 'off') : 'none'}`} aria-live="polite">
          {live}
        </span>
      </header>
      <div id="content" tabIndex={-1}>
        {ended ? <SessionEnded /> : <Page parts={parts} query={query} />}
      </div>
    </>
  );
}

render(<App />, document.getElementById('app'));
