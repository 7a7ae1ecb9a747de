// Training runtimes (ClusterTrainingRuntimes and namespaced TrainingRuntimes) as one table.
import { ErrorNote, Loading, useJSON } from '../components/bits.jsx';
import { age } from '../format.js';
import { clock, useSignal } from '../signal.js';

export function RuntimesPage() {
  const { data, error } = useJSON('/runtimes');
  const now = useSignal(clock);
  return (
    <main>
      <h1>Runtimes</h1>
      <ErrorNote error={error} />
      {!data && !error && <Loading />}
      {data && data.items.length === 0 && <p>No runtimes</p>}
      {data && data.items.length > 0 && (
        <div class="table-wrap card-gap">
        <table class="grid" aria-label="Runtimes">
          <thead>
            <tr>
              <th scope="col">Name</th>
              <th scope="col">Kind</th>
              <th scope="col">Namespace</th>
              <th scope="col">Framework</th>
              <th scope="col">Age</th>
            </tr>
          </thead>
          <tbody>
            {data.items.map((r) => (
              <tr key={`${r.kind}/${r.namespace || ''}/${r.name}`}>
                <th scope="row">{r.name}</th>
                <td>{r.kind}</td>
                <td>{r.namespace || '(cluster)'}</td>
                <td>{r.framework || '—'}</td>
                <td class="num">{age(r.created, now)}</td>
              </tr>
            ))}
          </tbody>
        </table>
        </div>
      )}
    </main>
  );
}
