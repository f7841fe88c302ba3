import type { Redis } from 'ioredis';
import { TickBatch } from '../../lib/tick-batch';

export interface RateDecision {
  allowed: boolean;
  limit: number;
  remaining: number;
  /** Unix seconds at which the current window ends. */
  resetAt: number;
  /** Seconds until the window ends (at least 1). */
  retryAfter: number;
}

/** One INCR per key (KEYS[i], expiring after ARGV[i] ms when new): the counts, in key order. */
const INCREMENT_SCRIPT = `
local counts = {}
for i = 1, #KEYS do
  local n = redis.call('INCR', KEYS[i])
  if n == 1 then redis.call('PEXPIRE', KEYS[i], ARGV[i]) end
  counts[i] = n
end
return counts`;

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

/** Keeps one script run (which blocks Redis meanwhile) short. */
const MAX_HITS_PER_CALL = 256;

interface Hit {
  key: string;
  ttlMs: number;
}

/**
 * Fixed-window counter per bucket, atomic in Redis so any number of API processes share one budget.
 * The hits that arrive during one turn of the event loop go to Redis together, as one script call
 * (one write, one command for Redis to run) instead of one round trip each; every hit still gets
 * its own count from Redis, so limits and remaining counts stay exact across processes. On a
 * Cluster, whose keys of one call must share a slot, each hit is its own call. When Redis does not
 * answer, each process falls back to counting in its own memory so requests are still served (and
 * still limited) without waiting on Redis.
 */
export class RateLimiter {
  private readonly local = new Map<string, number>();
  private localWindow = -1;
  private readonly hits = new TickBatch<Hit, number>(async (hits) => this.incrementAll(hits));

  constructor(private readonly redis: Redis, private readonly onFallback: (err: unknown) => void = () => {}) {
    redis.defineCommand('formserviceRateHits', { lua: INCREMENT_SCRIPT });
  }

  async hit(bucket: string, limit: number, windowMs = 60_000, nowMs = Date.now()): Promise<RateDecision> {
    const window = Math.floor(nowMs / windowMs);
    const windowEnd = (window + 1) * windowMs;
    const key = `rl:${bucket}:${windowMs}:${window}`;
    let count: number;
    try {
      count = await this.hits.call({ key, ttlMs: windowMs + 1000 });
    } catch (err) {
      this.onFallback(err);
      count = this.hitLocally(key, window);
    }
    return decide(count, limit, windowEnd, nowMs);
  }

  /** One script call per MAX_HITS_PER_CALL hits (per hit on a Cluster); each hit waits for its own call only. */
  private incrementAll(hits: Hit[]): Array<Promise<number>> {
    const size = (this.redis as { isCluster?: boolean }).isCluster ? 1 : MAX_HITS_PER_CALL;
    const counts: Array<Promise<number>> = [];
    for (let i = 0; i < hits.length; i += size) {
      const group = hits.slice(i, i + size);
      const answer = (async (): Promise<number[]> =>
        (this.redis as any).formserviceRateHits(group.length, ...group.map((h) => h.key), ...group.map((h) => h.ttlMs)))();
      group.forEach((_, j) => counts.push(answer.then((groupCounts) => groupCounts[j])));
    }
    return counts;
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
