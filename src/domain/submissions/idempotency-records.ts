import { randomBytes } from 'node:crypto';
import type { Em, Orm } from '../../db/orm';

/** Idempotency records: claiming a key, completing or releasing the claim, finding answered records. */

export interface StoredIdempotency {
  requestHash: string;
  status: number;
  body: unknown;
}

export const IDEMPOTENCY_TTL_HOURS = 24;
/** How long a claim holds its key without an answer: a request that died frees it after this. */
export const IDEMPOTENCY_LEASE_SECONDS = 30;

export type IdempotencyClaimResult =
  /** This request holds the key: it does the work, then completes or releases the claim. */
  | { kind: 'claimed'; token: string }
  /** An earlier request answered: replay its answer (or refuse a different body). */
  | { kind: 'completed'; stored: StoredIdempotency }
  /** An earlier request with this key is still running: answer 409 `idempotency_key_in_use`, Retry-After 1. */
  | { kind: 'in_progress' };

/**
 * Idempotency keys for any endpoint that replays its first answer (single and batch submissions):
 *
 *   const claim = await claimIdempotencyKey(em, org, key, requestHash);
 *   - 'completed'   → replay claim.stored, or 422 idempotency_key_reused when its hash differs;
 *   - 'in_progress' → 409 idempotency_key_in_use with Retry-After: 1 (never run the work beside it);
 *   - 'claimed'     → do the work; then completeIdempotencyKey(em, org, key, claim.token, status, body)
 *                     (a single submission does it inside its storing statement: claimToken on its
 *                     row), or releaseIdempotencyKey(em, org, key, claim.token) when the work was
 *                     refused or failed, so that a retry decides afresh.
 *
 * A record older than 24 hours, or a claim whose lease lapsed (its request died), is taken over.
 */
export async function claimIdempotencyKey(em: Em, organizationId: string, key: string, requestHash: string): Promise<IdempotencyClaimResult> {
  const token = randomBytes(16).toString('hex');
  const [row] = await em.execute(
    `with claimed as (
       insert into idempotency_keys as k (organization_id, key, request_hash, claim_token, lease_expires_at, created_at)
       values (?, ?, ?, ?, now() + interval '${IDEMPOTENCY_LEASE_SECONDS} seconds', now())
       on conflict (organization_id, key) do update
          set request_hash = excluded.request_hash, claim_token = excluded.claim_token,
              lease_expires_at = excluded.lease_expires_at, created_at = excluded.created_at,
              response_status = null, response_body = null
        where k.created_at < now() - interval '${IDEMPOTENCY_TTL_HOURS} hours'
           or (k.response_status is null and k.lease_expires_at < now())
       returning 1
     )
     select (select count(*) from claimed)::int as claimed, k.request_hash, k.response_status, k.response_body
       from (select 1) one left join idempotency_keys k on k.organization_id = ? and k.key = ?`,
    [organizationId, key, requestHash, token, organizationId, key],
  );
  if (row.claimed) return { kind: 'claimed', token };
  // Not claimed and no answer visible: a request holds it, or claimed it since this statement began.
  if (row.response_status === null || row.response_status === undefined) return { kind: 'in_progress' };
  return { kind: 'completed', stored: { requestHash: row.request_hash, status: row.response_status, body: row.response_body } };
}

/** Stores the answer of the request holding the claim; false when the claim was lost (lease lapsed, taken over). */
export async function completeIdempotencyKey(
  em: Em, organizationId: string, key: string, token: string, status: number, body: unknown,
): Promise<boolean> {
  const result = await em.execute(
    `update idempotency_keys set response_status = ?, response_body = ?::jsonb, claim_token = null, lease_expires_at = null
      where organization_id = ? and key = ? and claim_token = ? and response_status is null`,
    [status, JSON.stringify(body), organizationId, key, token], 'run',
  );
  return (result as any).affectedRows > 0;
}

/** Frees a key whose request ended without an answer worth replaying. */
export async function releaseIdempotencyKey(em: Em, organizationId: string, key: string, token: string): Promise<void> {
  await em.execute(
    'delete from idempotency_keys where organization_id = ? and key = ? and claim_token = ? and response_status is null',
    [organizationId, key, token],
  );
}

/** An answered record (not a claim in progress); one older than 24 hours is forgotten (and removed). */
export async function findIdempotencyRecord(orm: Orm, organizationId: string, key: string): Promise<StoredIdempotency | null> {
  const conn = orm.em.getConnection();
  const [row] = await conn.execute(
    `select request_hash, response_status, response_body, created_at < now() - interval '${IDEMPOTENCY_TTL_HOURS} hours' as expired
       from idempotency_keys where organization_id = ? and key = ? and response_status is not null`,
    [organizationId, key],
  );
  if (!row) return null;
  if (row.expired) {
    await conn.execute(
      `delete from idempotency_keys where organization_id = ? and key = ? and created_at < now() - interval '${IDEMPOTENCY_TTL_HOURS} hours'`,
      [organizationId, key],
    );
    return null;
  }
  return { requestHash: row.request_hash, status: row.response_status, body: row.response_body };
}

/** The stored records among `keys` (expired ones count as absent). */
export async function findIdempotencyRecords(orm: Orm, organizationId: string, keys: string[]): Promise<Map<string, StoredIdempotency>> {
  if (keys.length === 0) return new Map();
  const rows = await orm.em.getConnection().execute(
    `select key, request_hash, response_status, response_body from idempotency_keys
      where organization_id = ? and key in (select jsonb_array_elements_text(?::jsonb)) and response_status is not null
        and created_at >= now() - interval '${IDEMPOTENCY_TTL_HOURS} hours'`,
    [organizationId, JSON.stringify(keys)],
  );
  return new Map(rows.map((row: any) => [row.key, { requestHash: row.request_hash, status: row.response_status, body: row.response_body }]));
}
