import type { Em } from '../../db/orm';
import { sha256Hex, unseal } from '../../lib/crypto';
import { annotate } from '../../lib/tracing';
import { callOnce, maxAttempts, type AttemptDeps, type AttemptResult } from '../outbound/attempt';
import { decideCrmSync, type CrmDecision } from './policy';
import { failSync, findSyncForAttempt, holdSync, recordSyncAttempt } from './store';
import { activeIntegrations, buildContactUpsert, HUBSPOT_UPSERT_PATH, upsertRequestBody } from './hubspot';

/** Where a rate-limited CRM connection's pause is kept, shared by every worker process. */
export interface ConnectionPauses {
  remainingMs(connectionId: string): Promise<number>;
  pause(connectionId: string, ms: number): Promise<void>;
}

export type CrmAttemptResult = AttemptResult;

export type CrmRun =
  | { kind: 'skipped'; reason: 'missing' | 'already_succeeded' | 'already_failed' }
  | { kind: 'unsyncable'; reason: string }
  | { kind: 'paused'; remainingMs: number }
  | { kind: 'attempted'; decision: CrmDecision; result: CrmAttemptResult };

/** A connection is one access token; its id is a digest, so the token never reaches Redis. */
export function connectionIdOf(accessToken: string): string {
  return sha256Hex(accessToken).slice(0, 24);
}

async function markUnsyncable(em: Em, syncId: string, reason: string): Promise<CrmRun> {
  await failSync(em, syncId, reason);
  return { kind: 'unsyncable', reason };
}

async function upsertContact(deps: AttemptDeps, token: string, body: string): Promise<CrmAttemptResult> {
  return callOnce(`${deps.config.hubspotApiBase}${HUBSPOT_UPSERT_PATH}`, {
    method: 'POST', body, timeoutMs: deps.config.webhookTimeoutMs, allowPrivate: deps.config.webhookAllowPrivateTargets,
    headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${token}` },
  });
}

/**
 * One HubSpot contact upsert for one crm_syncs row. The integration is read from the form's current
 * settings by its stable id (never by position: a removed integration must not hand its syncs to
 * the one that moved into its place); a paused connection is reported without calling HubSpot. The
 * attempt's number comes from the row, so a job queued again by the sweep continues the schedule.
 */
export async function attemptCrmSync(deps: AttemptDeps, syncId: string, pauses: ConnectionPauses): Promise<CrmRun> {
  const em = deps.orm.em.fork();
  const row = await findSyncForAttempt(em, syncId);
  if (!row) return { kind: 'skipped', reason: 'missing' };
  annotate({
    'form_service.organization.id': row.organization_id, 'form_service.form.id': row.form_id,
    'form_service.submission.id': row.submission_id, 'form_service.crm_sync.attempt': row.attempts + 1,
  });
  if (row.status === 'succeeded') return { kind: 'skipped', reason: 'already_succeeded' };
  if (row.status === 'failed') return { kind: 'skipped', reason: 'already_failed' };
  if (!row.data) return markUnsyncable(em, syncId, 'Submission was deleted');
  const integration = activeIntegrations(row.settings).find((i) => i.integration.id === row.integration_id)?.integration;
  if (!integration) return markUnsyncable(em, syncId, 'Integration was removed or disabled');
  const contact = buildContactUpsert(integration.fieldMap, row.data, row.submitter_email);
  if (!contact) return markUnsyncable(em, syncId, 'No email address to match a contact');

  const token = unseal(integration.accessToken, deps.decryptionKeys);
  const connectionId = connectionIdOf(token);
  const remainingMs = await pauses.remainingMs(connectionId);
  if (remainingMs > 0) {
    await holdSync(em, syncId, remainingMs);
    return { kind: 'paused', remainingMs };
  }

  const result = await upsertContact(deps, token, upsertRequestBody(contact));
  const schedule = deps.config.webhookRetryDelaysMs;
  const decision = decideCrmSync({
    statusCode: result.statusCode, retryAfterMs: result.retryAfterMs, attempt: row.attempts + 1,
    maxAttempts: maxAttempts(schedule), schedule, random: Math.random,
  });
  annotate({ 'http.response.status_code': result.statusCode ?? undefined, 'form_service.crm_sync.outcome': decision.kind });
  if (decision.kind === 'retry' && decision.pauseMs) await pauses.pause(connectionId, decision.pauseMs);
  await recordSyncAttempt(em, syncId, result, decision, new Date());
  return { kind: 'attempted', decision, result };
}
