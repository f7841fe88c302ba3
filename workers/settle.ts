import { UnrecoverableError } from 'bullmq';
import { RetryLaterError } from './backoff';

type Decision = { kind: 'succeeded' } | { kind: 'retry'; delayMs: number } | { kind: string };
type RecordedAttempt<D extends Decision> = { decision: D; result: { statusCode: number | null; error: string | null } };
/** The message for a decision that gives up (any kind but success and retry), with the attempt's error. */
type GiveUpMessage<D extends Decision> = (decision: Exclude<D, { kind: 'succeeded' | 'retry' }>, reason: string) => string;

/** What one recorded attempt's decision means for the work: done, again after a delay, or given up. */
export type AttemptEnd =
  | { kind: 'succeeded'; statusCode: number | null }
  | { kind: 'retry'; delayMs: number; reason: string }
  | { kind: 'gave_up'; message: string };

/**
 * How one recorded attempt ends: success, a retry with the delay the row recorded as its next
 * attempt time, or anything else as given up (with the message of `giveUpMessage`). The row, not
 * the job, counts the attempts and decides when they are used up; the caller carries the end out
 * for its queue (settle for a job of its own, a delivery group's first attempt for a member).
 */
export function attemptEnd<D extends Decision>(
  run: RecordedAttempt<D>,
  giveUpMessage: GiveUpMessage<D>,
): AttemptEnd {
  const { decision, result } = run;
  const reason = result.error ?? '';
  if (decision.kind === 'succeeded') return { kind: 'succeeded', statusCode: result.statusCode };
  if (decision.kind === 'retry') return { kind: 'retry', delayMs: (decision as { delayMs: number }).delayMs, reason };
  return { kind: 'gave_up', message: giveUpMessage(decision as Parameters<GiveUpMessage<D>>[0], reason) };
}

/**
 * How one recorded attempt ends its job run (attemptEnd): success returns, a retry throws
 * RetryLaterError with the row's delay, giving up ends the job without a retry.
 */
export function settle<D extends Decision>(
  run: RecordedAttempt<D>,
  giveUpMessage: GiveUpMessage<D>,
): { statusCode: number | null } {
  const end = attemptEnd(run, giveUpMessage);
  if (end.kind === 'retry') throw new RetryLaterError(end.reason, end.delayMs);
  if (end.kind === 'gave_up') throw new UnrecoverableError(end.message);
  return { statusCode: end.statusCode };
}
