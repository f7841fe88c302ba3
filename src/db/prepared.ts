import type { Em } from './types';

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
  } catch (err) {
    if (!answeredByServer(err)) discard(connection, err);
    throw err;
  } finally {
    await client.releaseConnection(connection);
  }
}

/** An error PostgreSQL sent (it carries a SQLSTATE): the connection itself is still sound. */
function answeredByServer(err: unknown): boolean {
  return /^[0-9A-Z]{5}$/.test(String((err as { code?: unknown })?.code ?? ''));
}

/**
 * A connection whose statement failed without an answer from the server (the client-side read
 * timeout on a black-holed network, a broken socket) may still have that statement in flight: the
 * pool would hand it out again, and the next statement would queue behind the lost one and fail
 * with it. Marked as the pool's own error handler marks a connection that errored, so the pool
 * drops it on release, and closed.
 */
function discard(connection: any, err: unknown): void {
  connection.__knex__disposed ??= err;
  connection.end?.().catch?.(() => undefined);
}
