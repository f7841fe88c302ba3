import { isSuccess, retryOrGiveUp, type AttemptFacts, type RetryDecision } from '../outbound/attempt';

/** Answers a CRM will give again however often it is asked. */
const PERMANENT_CRM_STATUSES = new Set([400, 401, 403, 404]);

export type CrmDecision =
  | { kind: 'succeeded' }
  /** `pauseMs`: how long the whole connection should wait (set on 429 only). */
  | (RetryDecision & { pauseMs: number | null })
  | { kind: 'failed'; permanent: boolean };

export function decideCrmSync(facts: AttemptFacts): CrmDecision {
  if (isSuccess(facts.statusCode)) return { kind: 'succeeded' };
  if (facts.statusCode !== null && PERMANENT_CRM_STATUSES.has(facts.statusCode)) return { kind: 'failed', permanent: true };
  const next = retryOrGiveUp(facts);
  if (next.kind !== 'retry') return { kind: 'failed', permanent: false };
  return { ...next, pauseMs: facts.statusCode === 429 ? next.delayMs : null };
}

/** Why a sync's job ends without a retry. */
export function crmGiveUpMessage(decision: Extract<CrmDecision, { kind: 'failed' }>, reason: string): string {
  return decision.permanent ? `not retryable: ${reason}` : `retries exhausted: ${reason}`;
}
