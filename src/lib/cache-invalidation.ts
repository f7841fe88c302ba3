import type { Redis } from 'ioredis';

/**
 * The Redis channel on which any process announces cached records the others must drop: API keys
 * (revocation), organizations (plan changes), forms (edits, publication). Every process subscribes.
 */
export const INVALIDATION_CHANNEL = 'formservice:auth-invalidate';

/** Cached records other processes must drop: API keys, organizations (plan changes), forms. */
export type InvalidationMessage = `key:${string}` | `org:${string}` | `form:${string}`;

export async function publishInvalidation(redis: Redis, message: InvalidationMessage): Promise<void> {
  await redis.publish(INVALIDATION_CHANNEL, message);
}
