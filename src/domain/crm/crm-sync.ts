import type { AppContext } from '../../app';
import type { Em } from '../../db/orm';
import { sha256Hex, unseal } from '../../lib/crypto';
import { OutboundError, outboundFetch } from '../../lib/outbound';
import { decideCrmSync, isSuccess, maxAttempts, parseRetryAfter, statusError, type CrmDecision } from '../webhooks/policy';
import { activeIntegrations, buildContactUpsert, HUBSPOT_UPSERT_PATH, upsertRequestBody } from './hubspot';

/** Where a rate-limited CRM connection's pause is kept, shared by every worker process. */
export interface ConnectionPauses {
  remainingMs(connectionId: string): Promise<number>;
  pause(connectionId: string, ms: number): Promise<void>;
}

export interface CrmAttemptResult {
  statusCode: number | null;
  retryAfterMs: number | null;
  error: string | null;
}

export type CrmRun =
  | { kind: 'skipped'; reason: 'missing' | 'already_succeeded' | 'already_failed' }
  | { kind: 'unsyncable'; reason: string }
  | { kind: 'paused'; remainingMs: number }
  | { kind: 'attempted'; decision: CrmDecision; result: CrmAttemptResult };

interface SyncRow {
  id: string;
  status: string;
  attempts: number;
  integration_id: string | null;
  data: Record<string, unknown> | null;
  submitter_email: string | null;
  settings: Record<string, any> | null;
}

/** A connection is one access token; its id is a digest, so the token never reaches Redis. */
export function connectionIdOf(accessToken: string): string {
  return sha256Hex(accessToken).slice(0, 24);
}

async function markUnsyncable(em: Em, syncId: string, reason: string): Promise<CrmRun> {
  await em.execute(
    `update crm_syncs set status = 'failed', last_error = ?, next_attempt_at = null, updated_at = now() where id = ?`, [reason, syncId],
  );
  return { kind: 'unsyncable', reason };
}

async function upsertContact(app: AppContext, token: string, body: string): Promise<CrmAttemptResult> {
  try {
    const res = await outboundFetch(`${app.config.hubspotApiBase}${HUBSPOT_UPSERT_PATH}`, {
      method: 'POST', body, timeoutMs: app.config.webhookTimeoutMs, allowPrivate: app.config.webhookAllowPrivateTargets,
      headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${token}` },
    });
    return {
      statusCode: res.status,
      retryAfterMs: parseRetryAfter(res.headers['retry-after'], Date.now()),
      error: isSuccess(res.status) ? null : statusError(res.status),
    };
  } catch (err) {
    if (!(err instanceof OutboundError)) throw err;
    return { statusCode: null, retryAfterMs: null, error: err.message };
  }
}

function rowStatus(decision: CrmDecision): string {
  if (decision.kind === 'succeeded') return 'succeeded';
  return decision.kind === 'retry' ? 'pending' : 'failed';
}

/**
 * One HubSpot contact upsert for one crm_syncs row. The integration is read from the form's current
 * settings by its stable id (never by position: a removed integration must not hand its syncs to
 * the one that moved into its place); a paused connection is reported without calling HubSpot. The
 * attempt's number comes from the row, so a job queued again by the sweep continues the schedule.
 */
export async function attemptCrmSync(app: AppContext, syncId: string, pauses: ConnectionPauses): Promise<CrmRun> {
  const em = app.orm.em.fork();
  const [row] = await em.execute<SyncRow[]>(
    `select c.id, c.status, c.attempts, c.integration_id, s.data, s.submitter_email, f.settings
       from crm_syncs c left join submissions s on s.id = c.submission_id left join forms f on f.id = c.form_id
      where c.id = ?`,
    [syncId],
  );
  if (!row) return { kind: 'skipped', reason: 'missing' };
  if (row.status === 'succeeded') return { kind: 'skipped', reason: 'already_succeeded' };
  if (row.status === 'failed') return { kind: 'skipped', reason: 'already_failed' };
  if (!row.data) return markUnsyncable(em, syncId, 'Submission was deleted');
  const integration = activeIntegrations(row.settings).find((i) => i.integration.id === row.integration_id)?.integration;
  if (!integration) return markUnsyncable(em, syncId, 'Integration was removed or disabled');
  const contact = buildContactUpsert(integration.fieldMap, row.data, row.submitter_email);
  if (!contact) return markUnsyncable(em, syncId, 'No email address to match a contact');

  const token = unseal(integration.accessToken, app.decryptionKeys);
  const connectionId = connectionIdOf(token);
  const remainingMs = await pauses.remainingMs(connectionId);
  if (remainingMs > 0) return { kind: 'paused', remainingMs };

  const result = await upsertContact(app, token, upsertRequestBody(contact));
  const schedule = app.config.webhookRetryDelaysMs;
  const decision = decideCrmSync({
    statusCode: result.statusCode, retryAfterMs: result.retryAfterMs, attempt: row.attempts + 1,
    maxAttempts: maxAttempts(schedule), schedule, random: Math.random,
  });
  if (decision.kind === 'retry' && decision.pauseMs) await pauses.pause(connectionId, decision.pauseMs);
  const nextAttemptAt = decision.kind === 'retry' ? new Date(Date.now() + decision.delayMs) : null;
  await em.execute(
    `update crm_syncs set attempts = attempts + 1, status = ?, last_status_code = ?, last_error = ?, next_attempt_at = ?, updated_at = now()
      where id = ?`,
    [rowStatus(decision), result.statusCode, result.error, nextAttemptAt, syncId],
  );
  return { kind: 'attempted', decision, result };
}
