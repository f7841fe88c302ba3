import type { Em } from '../../db/orm';
import { findSubmissionValues } from '../submissions/read-store';
import { nextAttemptAt, rowStatus, type AttemptResult } from '../outbound/attempt';
import type { CrmDecision } from './policy';

// The statements of CRM syncs: reading one for its attempt, ending it, recording an attempt.

export interface SyncRow {
  id: string;
  organization_id: string;
  form_id: string;
  submission_id: string;
  status: string;
  attempts: number;
  integration_id: string | null;
  data: Record<string, unknown> | null;
  submitter_email: string | null;
  settings: Record<string, any> | null;
}

/**
 * A sync with its submission's values and its form's current settings (either may be gone). The
 * submission is read by its own statement, which names the month of its id (findSubmissionValues in
 * read-store.ts): joined here by id, it would be probed in every monthly partition on each attempt.
 * Only a pending sync needs the values.
 */
export async function findSyncForAttempt(em: Em, syncId: string): Promise<SyncRow | undefined> {
  const [row] = await em.execute<Array<Omit<SyncRow, 'data' | 'submitter_email'>>>(
    `select c.id, c.organization_id, c.form_id, c.submission_id, c.status, c.attempts, c.integration_id, f.settings
       from crm_syncs c left join forms f on f.id = c.form_id
      where c.id = ?`,
    [syncId],
  );
  if (!row) return undefined;
  const values = row.status === 'pending' ? await findSubmissionValues(em, row.organization_id, row.submission_id) : undefined;
  return { ...row, data: values?.data ?? null, submitter_email: values?.submitter_email ?? null };
}

/**
 * A sync held back without an attempt (its connection paused by HubSpot's 429) carries the time it
 * will be tried as its next attempt time, so the sweeps of owed work pass it by until then.
 */
export async function holdSync(em: Em, syncId: string, waitMs: number): Promise<void> {
  await em.execute(
    `update crm_syncs set next_attempt_at = now() + ? * interval '1 millisecond' where id = ? and status = 'pending'`, [Math.ceil(waitMs), syncId],
  );
}

/** Ends a pending sync without an attempt. */
export async function failSync(em: Em, syncId: string, reason: string): Promise<void> {
  await em.execute(
    `update crm_syncs set status = 'failed', last_error = ?, next_attempt_at = null, updated_at = now() where id = ?`, [reason, syncId],
  );
}

export async function recordSyncAttempt(em: Em, syncId: string, result: AttemptResult, decision: CrmDecision, now: Date): Promise<void> {
  await em.execute(
    `update crm_syncs set attempts = attempts + 1, status = ?, last_status_code = ?, last_error = ?, next_attempt_at = ?, updated_at = now()
      where id = ?`,
    [rowStatus(decision), result.statusCode, result.error, nextAttemptAt(decision, now), syncId],
  );
}
