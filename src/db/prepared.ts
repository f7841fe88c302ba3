import type { Em } from './orm';

/**
 * Runs a named prepared statement on a connection of the ORM's own pool: PostgreSQL parses and
 * plans it once per connection instead of once per call. Used only on hot paths.
 */
export async function preparedQuery<T = any>(em: Em, name: string, text: string, values: unknown[]): Promise<T[]> {
  const client = (em.getConnection().getKnex() as any).client;
  const connection = await client.acquireConnection();
  try {
    const result = await connection.query({ name, text, values });
    return result.rows as T[];
  } finally {
    await client.releaseConnection(connection);
  }
}
