import type { Config } from '../../../config';
import type { Orm } from '../../db/orm';
import { OutboundError, outboundFetch, type OutboundRequest } from '../../lib/outbound';

/**
 * One attempt of an outbound call that is retried on a schedule (webhook deliveries, CRM syncs):
 * the retry schedule, Retry-After, what counts as success, when to give up, and how an HTTP answer
 * (or its absence) becomes the result recorded on the row.
 */

export const RESPONSE_EXCERPT_BYTES = 1024;

/** What an attempt uses: the database, the outbound settings and schedule, the keys that open secrets. */
export interface AttemptDeps {
  orm: Orm;
  config: Readonly<Config>;
  decryptionKeys: Buffer[];
}

/** The first attempt plus one per configured delay. */
export function maxAttempts(schedule: readonly number[]): number {
  return schedule.length + 1;
}

/**
 * The delay before retry `attempt` (1-based) from the configured schedule, with up to 20% jitter.
 * A Retry-After is honoured: at least the scheduled delay, at most twice it.
 */
export function retryDelay(schedule: readonly number[], attempt: number, retryAfterMs: number | null, random = Math.random): number {
  const scheduled = schedule[Math.min(attempt, schedule.length) - 1] ?? 0;
  const jittered = Math.round(scheduled * (1 + 0.2 * random()));
  if (retryAfterMs === null) return jittered;
  return Math.min(Math.max(retryAfterMs, jittered), 2 * scheduled || retryAfterMs);
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

/** `delayMs`: when the next attempt is due, jitter included (none without `random`). */
export type RetryDecision = { kind: 'retry'; delayMs: number; retryAfterMs: number | null };

/** Another attempt after the schedule's delay, or giving up once the schedule is used. */
export function retryOrGiveUp(facts: AttemptFacts): RetryDecision | { kind: 'failed' } {
  if (facts.attempt >= facts.maxAttempts) return { kind: 'failed' };
  const retryAfterMs = honouredRetryAfter(facts.statusCode, facts.retryAfterMs);
  return { kind: 'retry', retryAfterMs, delayMs: retryDelay(facts.schedule, facts.attempt, retryAfterMs, facts.random ?? (() => 0)) };
}

/** The row's status after an attempt: only a retry keeps it pending. */
export function rowStatus(decision: { kind: string }): 'succeeded' | 'pending' | 'failed' {
  if (decision.kind === 'succeeded') return 'succeeded';
  return decision.kind === 'retry' ? 'pending' : 'failed';
}

/** When the next attempt is due; null when there is none. */
export function nextAttemptAt(decision: { kind: string; delayMs?: number }, now: Date): Date | null {
  return decision.kind === 'retry' ? new Date(now.getTime() + (decision.delayMs ?? 0)) : null;
}

export interface AttemptResult {
  /** null when there was no HTTP answer. */
  statusCode: number | null;
  retryAfterMs: number | null;
  /** null when the receiver answered 2xx. */
  error: string | null;
  durationMs: number;
  responseExcerpt: string | null;
}

/**
 * One outbound call. Never throws for what the other side does (status, timeout, refused address,
 * redirect): those are reported in the result. `describeTimeout` names the time limit in the error.
 */
export async function callOnce(url: string, req: OutboundRequest, opts: { describeTimeout?: boolean } = {}): Promise<AttemptResult> {
  const started = performance.now();
  try {
    const res = await outboundFetch(url, req);
    return {
      statusCode: res.status,
      retryAfterMs: parseRetryAfter(res.headers['retry-after'], Date.now()),
      error: isSuccess(res.status) ? null : statusError(res.status),
      durationMs: res.durationMs,
      responseExcerpt: excerpt(res.body),
    };
  } catch (err) {
    if (!(err instanceof OutboundError)) throw err;
    const error = opts.describeTimeout && err.kind === 'timeout' ? `Timed out after ${req.timeoutMs} ms` : err.message;
    return { statusCode: null, retryAfterMs: null, error, durationMs: Math.round(performance.now() - started), responseExcerpt: null };
  }
}
