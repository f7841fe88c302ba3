import type { Config } from '../../../config';
import { callOnce, RESPONSE_EXCERPT_BYTES, type AttemptResult } from '../outbound/attempt';
import { deliveryHeaders } from './events';

export interface SendTarget {
  url: string;
  secret: string;
  /** The rotated-out secret while it is within its grace; null or absent otherwise. */
  previousSecret?: string | null;
  body: string;
  eventType: string;
  deliveryId: string;
  /** The event's id (`webhook-id`): the same on every attempt and every webhook it goes to. */
  eventId: string;
}

export type SendResult = AttemptResult;

/**
 * One signed POST, freshly timestamped. Never throws for what the receiver does (status, timeout,
 * refused address, redirect): those are reported in the result.
 */
export async function sendSigned(config: Readonly<Config>, target: SendTarget): Promise<SendResult> {
  const headers = deliveryHeaders({
    secret: target.secret, previousSecret: target.previousSecret, body: target.body, eventType: target.eventType, deliveryId: target.deliveryId, eventId: target.eventId,
    nowSeconds: Math.floor(Date.now() / 1000),
  });
  return callOnce(target.url, {
    method: 'POST', headers, body: target.body, timeoutMs: config.webhookTimeoutMs,
    maxResponseBytes: RESPONSE_EXCERPT_BYTES, allowPrivate: config.webhookAllowPrivateTargets,
  }, { describeTimeout: true });
}
