import type { Em } from './orm';

/**
 * Whether each ORM's connections may keep named prepared statements, by the ORM's pool client.
 * PgBouncer in transaction mode (and other poolers) hands every transaction another server
 * connection, where a statement prepared earlier does not exist.
 */
const namedStatementsAllowed = new WeakMap<object, boolean>();

function poolClient(em: Em): any {
  return (em.getConnection().getKnex() as any).client;
}

export function allowNamedStatements(em: Em, allowed: boolean): void {
  namedStatementsAllowed.set(poolClient(em), allowed);
}

/**
 * Runs a hot-path statement on a connection of the ORM's own pool. Where named prepared statements
 * are allowed (the default), PostgreSQL parses and plans it once per connection instead of once per
 * call; otherwise it runs as an unnamed statement, which every pooler supports.
 */
export async function preparedQuery<T = any>(em: Em, name: string, text: string, values: unknown[]): Promise<T[]> {
  const client = poolClient(em);
  const named = namedStatementsAllowed.get(client) ?? true;
  const connection = await client.acquireConnection();
  try {
    const result = await connection.query(named ? { name, text, values } : { text, values });
    return result.rows as T[];
  } finally {
    await client.releaseConnection(connection);
  }
}
