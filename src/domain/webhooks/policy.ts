import { retryDelay } from '../../../workers/backoff';

const DAY_MS = 86_400_000;
/** A webhook whose deliveries have failed for longer than this is disabled (CONTRACT §7). */
export const AUTO_DISABLE_AFTER_MS = 5 * DAY_MS;
export const RESPONSE_EXCERPT_BYTES = 1024;

/** The first attempt plus one per configured delay. */
export function maxAttempts(schedule: readonly number[]): number {
  return schedule.length + 1;
}

/** `Retry-After` as delta-seconds or an HTTP date, in milliseconds from now; null when absent or unreadable. */
export function parseRetryAfter(value: string | undefined, nowMs: number): number | null {
  if (value === undefined) return null;
  const trimmed = value.trim();
  if (/^\d+$/.test(trimmed)) return Number(trimmed) * 1000;
  // An HTTP date names its weekday and month; anything else (e.g. "-5") is unreadable.
  const at = /[A-Za-z]/.test(trimmed) ? Date.parse(trimmed) : Number.NaN;
  return Number.isNaN(at) ? null : Math.max(0, at - nowMs);
}

/** Retry-After only means something on 429 and 503. */
export function honouredRetryAfter(statusCode: number | null, retryAfterMs: number | null): number | null {
  return statusCode === 429 || statusCode === 503 ? retryAfterMs : null;
}

export function isSuccess(statusCode: number | null): boolean {
  return statusCode !== null && statusCode >= 200 && statusCode < 300;
}

export function statusError(statusCode: number): string {
  return `Unexpected status ${statusCode}`;
}

/** At most maxBytes of UTF-8, cut on a character boundary; null for an empty body. */
export function excerpt(text: string, maxBytes = RESPONSE_EXCERPT_BYTES): string | null {
  if (!text) return null;
  const bytes = Buffer.from(text, 'utf8');
  if (bytes.length <= maxBytes) return text;
  let end = maxBytes;
  while (end > 0 && (bytes[end] & 0xc0) === 0x80) end--;
  return bytes.subarray(0, end).toString('utf8');
}

export function failingTooLong(failingSince: Date | null, now: Date): boolean {
  return failingSince !== null && now.getTime() - failingSince.getTime() > AUTO_DISABLE_AFTER_MS;
}

export interface AttemptFacts {
  /** null when there was no HTTP answer (timeout, connection error, refused target). */
  statusCode: number | null;
  retryAfterMs: number | null;
  /** 1-based number of this attempt within the current retry schedule, counted on the row. */
  attempt: number;
  maxAttempts: number;
  schedule: readonly number[];
  /** Jitter source for the retry delay (none when absent, so decisions are reproducible). */
  random?: () => number;
}

export type DeliveryDecision =
  | { kind: 'succeeded' }
  /** `delayMs`: when the next attempt is due, jitter included (none without `random`). */
  | { kind: 'retry'; delayMs: number; retryAfterMs: number | null }
  | { kind: 'failed' }
  | { kind: 'disable'; reason: 'gone' | 'failing_too_long' };

function retryOrGiveUp(facts: AttemptFacts): DeliveryDecision {
  if (facts.attempt >= facts.maxAttempts) return { kind: 'failed' };
  const retryAfterMs = honouredRetryAfter(facts.statusCode, facts.retryAfterMs);
  return { kind: 'retry', retryAfterMs, delayMs: retryDelay(facts.schedule, facts.attempt, retryAfterMs, facts.random ?? (() => 0)) };
}

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

/** Answers a CRM will give again however often it is asked. */
const PERMANENT_CRM_STATUSES = new Set([400, 401, 403, 404]);

export type CrmDecision =
  | { kind: 'succeeded' }
  /** `pauseMs`: how long the whole connection should wait (set on 429 only). */
  | { kind: 'retry'; delayMs: number; retryAfterMs: number | null; pauseMs: number | null }
  | { kind: 'failed'; permanent: boolean };

export function decideCrmSync(facts: AttemptFacts): CrmDecision {
  if (isSuccess(facts.statusCode)) return { kind: 'succeeded' };
  if (facts.statusCode !== null && PERMANENT_CRM_STATUSES.has(facts.statusCode)) return { kind: 'failed', permanent: true };
  const next = retryOrGiveUp(facts);
  if (next.kind !== 'retry') return { kind: 'failed', permanent: false };
  return { ...next, pauseMs: facts.statusCode === 429 ? next.delayMs : null };
}
