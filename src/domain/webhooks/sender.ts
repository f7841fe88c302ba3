import type { Config } from '../../../config';
import { OutboundError, outboundFetch } from '../../lib/outbound';
import { deliveryHeaders } from './events';
import { excerpt, isSuccess, parseRetryAfter, RESPONSE_EXCERPT_BYTES, statusError } from './policy';

export interface SendTarget {
  url: string;
  secret: string;
  /** The rotated-out secret while it is within its grace; null or absent otherwise. */
  previousSecret?: string | null;
  body: string;
  eventType: string;
  deliveryId: string;
}

export interface SendResult {
  /** null when there was no HTTP answer. */
  statusCode: number | null;
  retryAfterMs: number | null;
  /** null when the receiver answered 2xx. */
  error: string | null;
  durationMs: number;
  responseExcerpt: string | null;
}

function describeOutboundError(err: OutboundError, timeoutMs: number): string {
  return err.kind === 'timeout' ? `Timed out after ${timeoutMs} ms` : err.message;
}

/**
 * One signed POST, freshly timestamped. Never throws for what the receiver does (status, timeout,
 * refused address, redirect): those are reported in the result.
 */
export async function sendSigned(config: Readonly<Config>, target: SendTarget): Promise<SendResult> {
  const started = performance.now();
  const headers = deliveryHeaders({
    secret: target.secret, previousSecret: target.previousSecret, body: target.body, eventType: target.eventType, deliveryId: target.deliveryId,
    nowSeconds: Math.floor(Date.now() / 1000),
  });
  try {
    const res = await outboundFetch(target.url, {
      method: 'POST', headers, body: target.body, timeoutMs: config.webhookTimeoutMs,
      maxResponseBytes: RESPONSE_EXCERPT_BYTES, allowPrivate: config.webhookAllowPrivateTargets,
    });
    return {
      statusCode: res.status,
      retryAfterMs: parseRetryAfter(res.headers['retry-after'], Date.now()),
      error: isSuccess(res.status) ? null : statusError(res.status),
      durationMs: res.durationMs,
      responseExcerpt: excerpt(res.body),
    };
  } catch (err) {
    if (!(err instanceof OutboundError)) throw err;
    return {
      statusCode: null, retryAfterMs: null, error: describeOutboundError(err, config.webhookTimeoutMs),
      durationMs: Math.round(performance.now() - started), responseExcerpt: null,
    };
  }
}
