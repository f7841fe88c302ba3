import type { EncryptionKeys } from '../../app';
import type { Em } from '../../db/orm';
import { isSealed, seal, unseal } from '../../lib/crypto';

export interface ReencryptCounts {
  webhooks: number;
  forms: number;
  submissions: number;
}

const BATCH = 500;

/** The value sealed with the current key, or null when it already is. */
function resealed(value: string, keys: EncryptionKeys): string | null {
  try {
    unseal(value, keys.current);
    return null;
  } catch {
    return seal(unseal(value, keys.all), keys.current);
  }
}

/** Re-seals every sealed string inside a JSON value; null when nothing changed. */
function resealDeep(value: unknown, keys: EncryptionKeys): unknown | null {
  if (isSealed(value)) return resealed(value, keys);
  if (value === null || typeof value !== 'object') return null;
  let changed = false;
  const copy: any = Array.isArray(value) ? [...value] : { ...value };
  for (const key of Object.keys(copy)) {
    const next = resealDeep(copy[key], keys);
    if (next !== null) {
      copy[key] = next;
      changed = true;
    }
  }
  return changed ? copy : null;
}

/** Walks a table by id in batches, re-sealing one column; each batch commits on its own. */
async function resealColumn(
  em: Em, table: 'webhooks' | 'forms' | 'submissions', column: 'secret_sealed' | 'previous_secret_sealed' | 'settings' | 'data',
  candidates: string, keys: EncryptionKeys,
): Promise<number> {
  let after = '';
  let changed = 0;
  for (;;) {
    const rows = await em.getConnection().execute(
      `select id, ${column} as value from ${table} where id > ? and ${candidates} order by id limit ${BATCH}`, [after],
    );
    if (!rows.length) return changed;
    await em.transactional(async (tx) => {
      for (const row of rows) {
        const next = typeof row.value === 'string' ? resealed(row.value, keys) : resealDeep(row.value, keys);
        if (next === null) continue;
        const stored = typeof next === 'string' ? next : JSON.stringify(next);
        await tx.getConnection().execute(
          `update ${table} set ${column} = ?${column.endsWith('secret_sealed') ? '' : '::jsonb'} where id = ?`,
          [stored, row.id], 'run', tx.getTransactionContext(),
        );
        changed++;
      }
    });
    after = rows[rows.length - 1].id;
  }
}

/**
 * The last step of a key rotation: every webhook secret, CRM token and sensitive submission value
 * sealed with a previous key is sealed again with the current one. Safe to run more than once and
 * while the service runs (a value is readable with either key throughout).
 */
export async function reencryptSecrets(em: Em, keys: EncryptionKeys): Promise<ReencryptCounts> {
  return {
    webhooks: await resealColumn(em, 'webhooks', 'secret_sealed', 'true', keys)
      + await resealColumn(em, 'webhooks', 'previous_secret_sealed', 'previous_secret_sealed is not null', keys),
    forms: await resealColumn(em, 'forms', 'settings', `jsonb_typeof(settings->'integrations') = 'array'`, keys),
    submissions: await resealColumn(em, 'submissions', 'data', `data::text like '%"enc:v1:%'`, keys),
  };
}
