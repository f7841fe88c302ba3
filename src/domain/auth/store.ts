import type { Plan } from '../../../config/plans';
import type { Em } from '../../db/orm';

// The raw statements of API keys and organizations: a key by its hash with its organization's plan
// (the key store's load), its last use, and the first start's lock. Organizations and keys are
// otherwise read and written through the ORM's entities (admin.ts).

export interface KeyRow {
  id: string;
  organization_id: string;
  scopes: string[];
  expires_at: Date | string | null;
  plan: Plan;
}

/** The unrevoked key with this hash, with its organization's plan. */
export async function findActiveKeyByHash(em: Em, hash: string): Promise<KeyRow | undefined> {
  const rows = await em.getConnection().execute<KeyRow[]>(
    `select k.id, k.organization_id, k.scopes, k.expires_at, o.plan
       from api_keys k join organizations o on o.id = k.organization_id
      where k.key_hash = ? and k.revoked_at is null`,
    [hash],
  );
  return rows[0];
}

export async function recordKeyUse(em: Em, keyId: string, now: Date): Promise<void> {
  await em.getConnection().execute('update api_keys set last_used_at = ? where id = ?', [now, keyId]);
}

/** Concurrent first starts take turns on this lock (held to the end of the transaction). */
export async function lockFirstStart(tx: Em): Promise<void> {
  await tx.getConnection().execute('select pg_advisory_xact_lock(726354001)', [], 'all', tx.getTransactionContext());
}
