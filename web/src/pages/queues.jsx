// Queues (Kueue's ClusterQueues with their usage per flavor and resource, and LocalQueues), read
// every few seconds while the page is open; "No queues" where the plane has none.
import { useEffect } from 'preact/hooks';
import { ErrorNote, Loading, Meter, useJSON } from '../components/bits.jsx';

const POLL_MS = 5000;

function usePolled(path) {
  const res = useJSON(path);
  useEffect(() => {
    const t = setInterval(res.reload, POLL_MS);
    return () => clearInterval(t);
  }, [path]);
  return res;
}

export function QueuesPage() {
  const { data, error } = usePolled('/queues');
  const empty = data && !data.clusterQueues.length && !data.localQueues.length;
  return (
    <main>
      <h1>Queues</h1>
      <ErrorNote error={error} />
      {!data && !error && <Loading />}
      {empty && <p>No queues</p>}
      {data && data.clusterQueues.length > 0 && (
        <div class="table-wrap card-gap">
        <table class="grid" aria-label="Cluster queues">
          <caption>Cluster queues</caption>
          <thead>
            <tr>
              <th scope="col">Name</th>
              <th scope="col">Cohort</th>
              <th scope="col">Pending</th>
              <th scope="col">Admitted</th>
              <th scope="col">Usage</th>
            </tr>
          </thead>
          <tbody>
            {data.clusterQueues.map((q) => (
              <tr key={q.name} data-queue={q.name}>
                <th scope="row">{q.name}</th>
                <td>{q.cohort || '—'}</td>
                <td class="num">{q.pending}</td>
                <td class="num">{q.admitted}</td>
                <td>
                  <ul class="usage">
                    {q.usage.map((u) => (
                      <li key={`${u.flavor}/${u.resource}`}>
                        <span class="usage-name">
                          {u.flavor} · {u.resource}
                        </span>
                        <Meter used={u.used} nominal={u.nominal} label={`${q.name} ${u.flavor} ${u.resource} usage`} />
                      </li>
                    ))}
                  </ul>
                </td>
              </tr>
            ))}
          </tbody>
        </table>
        </div>
      )}
      {data && data.localQueues.length > 0 && (
        <div class="table-wrap card-gap">
        <table class="grid" aria-label="Local queues">
          <caption>Local queues</caption>
          <thead>
            <tr>
              <th scope="col">Namespace</th>
              <th scope="col">Name</th>
              <th scope="col">Cluster queue</th>
              <th scope="col">Pending</th>
              <th scope="col">Admitted</th>
            </tr>
          </thead>
          <tbody>
            {data.localQueues.map((q) => (
              <tr key={`${q.namespace}/${q.name}`}>
                <td>{q.namespace}</td>
                <th scope="row">{q.name}</th>
                <td>{q.clusterQueue}</td>
                <td class="num">{q.pending}</td>
                <td class="num">{q.admitted}</td>
              </tr>
            ))}
          </tbody>
        </table>
        </div>
      )}
    </main>
  );
}
