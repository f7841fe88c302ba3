import type { Redis } from 'ioredis';

export interface RateDecision {
  allowed: boolean;
  limit: number;
  remaining: number;
  /** Unix seconds at which the current window ends. */
  resetAt: number;
  /** Seconds until the window ends (at least 1). */
  retryAfter: number;
}

const INCREMENT_SCRIPT = `
local n = redis.call('INCR', KEYS[1])
if n == 1 then redis.call('PEXPIRE', KEYS[1], ARGV[1]) end
return n`;

export function decide(count: number, limit: number, windowEndMs: number, nowMs: number): RateDecision {
  const retryAfter = Math.max(1, Math.ceil((windowEndMs - nowMs) / 1000));
  return {
    allowed: count <= limit,
    limit,
    remaining: Math.max(0, limit - count),
    resetAt: Math.ceil(windowEndMs / 1000),
    retryAfter,
  };
}

/**
 * Fixed-window counter per bucket, atomic in Redis so any number of API processes share one budget.
 * When Redis does not answer, each process falls back to counting in its own memory so requests
 * are still served (and still limited) without waiting on Redis.
 */
export class RateLimiter {
  private readonly local = new Map<string, number>();
  private localWindow = -1;

  constructor(private readonly redis: Redis, private readonly onFallback: (err: unknown) => void = () => {}) {
    redis.defineCommand('formserviceRateHit', { numberOfKeys: 1, lua: INCREMENT_SCRIPT });
  }

  async hit(bucket: string, limit: number, windowMs = 60_000, nowMs = Date.now()): Promise<RateDecision> {
    const window = Math.floor(nowMs / windowMs);
    const windowEnd = (window + 1) * windowMs;
    const key = `rl:${bucket}:${windowMs}:${window}`;
    let count: number;
    try {
      count = await (this.redis as any).formserviceRateHit(key, windowMs + 1000);
    } catch (err) {
      this.onFallback(err);
      count = this.hitLocally(key, window);
    }
    return decide(count, limit, windowEnd, nowMs);
  }

  private hitLocally(key: string, window: number): number {
    if (window !== this.localWindow) {
      this.local.clear();
      this.localWindow = window;
    }
    const count = (this.local.get(key) ?? 0) + 1;
    this.local.set(key, count);
    return count;
  }
}
