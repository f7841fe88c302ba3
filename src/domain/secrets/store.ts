import type { Em, Orm } from '../../db/orm';
import { SEALED_VALUE_KEY } from '../submissions/sealed-values';

// The statements of encryption keys and their rotation: the key generated into the database at
// first start, and the batched walk that re-seals a column.

/** Stores a generated key unless one is stored already. */
export async function storeGeneratedKey(orm: Orm, key: string): Promise<void> {
  await orm.em.getConnection().execute(
    `insert into system_settings (key, value) values ('encryption_key', ?) on conflict (key) do nothing`,
    [key],
  );
}

/** The key generated into the database (base64), if any. */
export async function findGeneratedKey(orm: Orm): Promise<string | undefined> {
  const [stored] = await orm.em.getConnection().execute(`select value from system_settings where key = 'encryption_key'`);
  return stored?.value;
}

export type SealedTable = 'webhooks' | 'forms' | 'submissions';

/** A column holding sealed values, with the condition that finds the rows that may hold one. */
export interface SealedColumn {
  table: SealedTable;
  column: 'secret_sealed' | 'previous_secret_sealed' | 'settings' | 'data';
  candidates: string;
}

/** Every column that holds sealed values, in the order a key rotation re-seals them. */
export const SEALED_COLUMNS = {
  webhookSecrets: { table: 'webhooks', column: 'secret_sealed', candidates: 'true' },
  previousWebhookSecrets: { table: 'webhooks', column: 'previous_secret_sealed', candidates: 'previous_secret_sealed is not null' },
  crmTokens: { table: 'forms', column: 'settings', candidates: `jsonb_typeof(settings->'integrations') = 'array'` },
  sensitiveValues: { table: 'submissions', column: 'data', candidates: `data::text like '%"${SEALED_VALUE_KEY}"%'` },
} as const satisfies Record<string, SealedColumn>;

/** The next batch of the column's candidate rows after id `after`, with the column's value. */
export async function findSealedBatch(em: Em, { table, column, candidates }: SealedColumn, after: string, limit: number)
  : Promise<Array<{ id: string; value: unknown }>> {
  return em.getConnection().execute(
    `select id, ${column} as value from ${table} where id > ? and ${candidates} order by id limit ${limit}`, [after],
  );
}

/** Writes a re-sealed value (text for a secret column, jsonb otherwise), inside the batch's transaction. */
export async function writeResealed(tx: Em, { table, column }: SealedColumn, id: string, stored: string): Promise<void> {
  await tx.getConnection().execute(
    `update ${table} set ${column} = ?${column.endsWith('secret_sealed') ? '' : '::jsonb'} where id = ?`,
    [stored, id], 'run', tx.getTransactionContext(),
  );
}
