import { UnrecoverableError } from 'bullmq';
import { RetryLaterError } from './backoff';

type Decision = { kind: 'succeeded' } | { kind: 'retry'; delayMs: number } | { kind: string };

/**
 * How one recorded attempt ends its job run: success returns, a retry throws RetryLaterError with the
 * delay the row recorded as its next attempt time, anything else ends the job without a retry. The
 * row, not the job, counts the attempts and decides when they are used up.
 */
export function settle<D extends Decision>(
  run: { decision: D; result: { statusCode: number | null; error: string | null } },
  giveUpMessage: (decision: Exclude<D, { kind: 'succeeded' | 'retry' }>, reason: string) => string,
): { statusCode: number | null } {
  const { decision, result } = run;
  const reason = result.error ?? '';
  if (decision.kind === 'succeeded') return { statusCode: result.statusCode };
  if (decision.kind === 'retry') throw new RetryLaterError(reason, (decision as { delayMs: number }).delayMs);
  throw new UnrecoverableError(giveUpMessage(decision as Exclude<D, { kind: 'succeeded' | 'retry' }>, reason));
}
