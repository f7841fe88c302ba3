import { isOperationalEvent } from './event-types';
import { isSuccess, retryOrGiveUp, type AttemptFacts, type RetryDecision } from '../outbound/attempt';

const DAY_MS = 86_400_000;
/** A webhook whose deliveries have failed for longer than this (five days) is disabled. */
export const AUTO_DISABLE_AFTER_MS = 5 * DAY_MS;

/**
 * The webhook row's failure streak, written only when it changes state, not on every attempt:
 * - a success records `last_success_at` when it is older than SUCCESS_MARK_MS (or unset), and ends
 *   a streak (clears `failing_since`) at once;
 * - a failure starts a streak (`failing_since` = now) only when none is running and no success was
 *   recorded in the last STREAK_QUIET_MS (a quiet minute); any other failure writes nothing.
 * A receiver that fails now and then between successes thus never starts a streak, and its webhook
 * row is written about twice a minute, not twice per failure. A streak still means "no success
 * since": `failing_since` is the first failure recorded a quiet minute after the last recorded
 * success, never before the run's first failure; after it by up to a minute for a busy webhook, and
 * for one whose attempts are sparse by up to the gap to its next failed attempt (a retry delay: a
 * run whose first failure falls in the quiet minute starts at the next). The auto-disable after
 * AUTO_DISABLE_AFTER_MS and `endpoint.disabled`'s `failingSince` thus err late, never early.
 */
export const STREAK_QUIET_MS = 60_000;
export const SUCCESS_MARK_MS = 30_000;

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
 * failures began, before this attempt (null: none is running, see STREAK_QUIET_MS).
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

/**
 * Operational events describe webhooks to the organization as a whole: a webhook tied to one form
 * may not subscribe to them. Answers the message of the refusal, or null when the pair is fine.
 */
export function operationalEventsRefusal(events: readonly string[], formId: string | null): string | null {
  if (formId === null || !events.some(isOperationalEvent)) return null;
  return `events ${events.filter(isOperationalEvent).join(', ')} are for organization-wide webhooks only (formId must be null)`;
}

/** The most a receiver's Retry-After holds a webhook's deliveries back (a day, the longest retry delay). */
export const MAX_PAUSE_MS = 86_400_000;

/**
 * How long a receiver's answer holds back the webhook's other deliveries: a 429 with a Retry-After
 * pauses them that long (at most MAX_PAUSE_MS); anything else, not at all (null).
 */
export function pauseAfter(statusCode: number | null, retryAfterMs: number | null): number | null {
  if (statusCode !== 429 || retryAfterMs === null || retryAfterMs <= 0) return null;
  return Math.min(retryAfterMs, MAX_PAUSE_MS);
}

/** The consecutive failed attempt of one delivery that raises `message.attempt.failing` (README "Webhooks"). */
export const FAILING_AT_ATTEMPT = 4;
