import { isSuccess, retryOrGiveUp, type AttemptFacts, type RetryDecision } from '../outbound/attempt';

const DAY_MS = 86_400_000;
/** A webhook whose deliveries have failed for longer than this (five days) is disabled. */
export const AUTO_DISABLE_AFTER_MS = 5 * DAY_MS;

export function failingTooLong(failingSince: Date | null, now: Date): boolean {
  return failingSince !== null && now.getTime() - failingSince.getTime() > AUTO_DISABLE_AFTER_MS;
}

export type DeliveryDecision =
  | { kind: 'succeeded' }
  | RetryDecision
  | { kind: 'failed' }
  | { kind: 'disable'; reason: 'gone' | 'failing_too_long' };

/**
 * What to do after one webhook attempt. `failingSince` is when the webhook's current run of
 * failures began, before this attempt (null: this attempt starts it).
 */
export function decideDelivery(facts: AttemptFacts & { failingSince: Date | null; now: Date }): DeliveryDecision {
  if (isSuccess(facts.statusCode)) return { kind: 'succeeded' };
  if (facts.statusCode === 410) return { kind: 'disable', reason: 'gone' };
  if (failingTooLong(facts.failingSince, facts.now)) return { kind: 'disable', reason: 'failing_too_long' };
  return retryOrGiveUp(facts);
}

/** Why a delivery's job ends without a retry. */
export function deliveryGiveUpMessage(decision: Exclude<DeliveryDecision, { kind: 'succeeded' | 'retry' }>, reason: string): string {
  return decision.kind === 'disable' ? `webhook disabled (${decision.reason}): ${reason}` : `retries exhausted: ${reason}`;
}
