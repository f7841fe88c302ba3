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

/**
 * One INCRBY per key (KEYS[i] by ARGV[2i-1], expiring after ARGV[2i] ms when new): the counts after
 * each, in key order. A count names the last position reserved: positions count - amount + 1 … count.
 */
const INCREMENT_SCRIPT = `
local counts = {}
for i = 1, #KEYS do
  local amount = tonumber(ARGV[2 * i - 1])
  local n = redis.call('INCRBY', KEYS[i], amount)
  if n == amount then redis.call('PEXPIRE', KEYS[i], ARGV[2 * i]) end
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

interface Reservation {
  key: string;
  amount: number;
  ttlMs: number;
}

/** A lease is at most this many positions; one is taken only while the budget left is this many leases' worth. */
const MAX_LEASE = 64;
const BUDGET_PER_LEASE = 64;

/**
 * How many positions of a window to reserve at once when `used` of `limit` are taken: a small share
 * of what is left, so that the positions another process holds unused (and which this one cannot
 * give out) are a small share of the budget too; 1, a hit counted alone, once little is left.
 */
export function leaseSize(limit: number, used: number): number {
  return Math.max(1, Math.min(MAX_LEASE, Math.floor((limit - used) / BUDGET_PER_LEASE)));
}

/** The positions of one bucket's window this process reserved and has not given out, lowest first. */
class Lease {
  private readonly ranges: Array<{ next: number; last: number }> = [];
  /** The reservation on its way, which hits with no position left wait for. */
  refill: Promise<void> | null = null;
  /** The highest count Redis answered for this window: where the budget stood. */
  highest = 0;

  constructor(readonly windowEndMs: number) {}

  get held(): number {
    return this.ranges.reduce((n, r) => n + r.last - r.next + 1, 0);
  }

  add(count: number, amount: number): void {
    this.highest = Math.max(this.highest, count);
    this.ranges.push({ next: count - amount + 1, last: count });
    this.ranges.sort((a, b) => a.next - b.next);
  }

  take(): number | null {
    const range = this.ranges[0];
    if (!range) return null;
    const position = range.next++;
    if (range.next > range.last) this.ranges.shift();
    return position;
  }
}

/**
 * Fixed-window counter per bucket, atomic in Redis so any number of API processes share one budget:
 * every hit has its own position in the window's count, and a position past the limit is refused,
 * so no window ever admits more than its limit, whatever the number of processes.
 *
 * While much of a window's budget is left, a process reserves several positions at once (a lease,
 * `leaseSize`: at most 1/64 of what is left) and gives them out to its next hits without waiting on
 * Redis, reserving the next lease when half of one is given out; a hit waits on Redis only for a
 * window's first lease, or when its process ran out. Near the limit every hit is reserved alone, as
 * every hit of a small limit is. A hit's remaining count is the limit minus its position: exact
 * with one process; with several, positions another process holds unused count as taken, so the
 * remaining count errs low, never high, and by a small share of the budget.
 *
 * The reservations of one turn of the event loop go to Redis together, as one script call (one
 * write, one command for Redis to run) instead of one round trip each. On a Cluster, whose keys of
 * one call must share a slot, each is its own call. When Redis does not answer, each process falls
 * back to counting in its own memory so requests are still served (and still limited) without
 * waiting on Redis.
 */
export class RateLimiter {
  private readonly local = new Map<string, number>();
  private localWindow = -1;
  private readonly leases = new Map<string, Lease>();
  private pruneAtMs = 0;
  private readonly reservations = new TickBatch<Reservation, number>(async (batch) => this.reserveAll(batch));

  constructor(private readonly redis: Redis, private readonly onFallback: (err: unknown) => void = () => {}) {
    redis.defineCommand('formserviceRateHits', { lua: INCREMENT_SCRIPT });
  }

  async hit(bucket: string, limit: number, windowMs = 60_000, nowMs = Date.now()): Promise<RateDecision> {
    const window = Math.floor(nowMs / windowMs);
    const windowEnd = (window + 1) * windowMs;
    const key = `rl:${bucket}:${windowMs}:${window}`;
    let position: number;
    try {
      position = await this.position(key, limit, windowMs, windowEnd, nowMs);
    } catch (err) {
      this.onFallback(err);
      position = this.hitLocally(key, window);
    }
    return decide(position, limit, windowEnd, nowMs);
  }

  /** This hit's position in the window: from the lease when it holds one, else reserved now. */
  private async position(key: string, limit: number, windowMs: number, windowEnd: number, nowMs: number): Promise<number> {
    this.prune(nowMs);
    let lease = this.leases.get(key);
    for (;;) {
      const taken = lease?.take();
      if (taken != null) {
        if (lease!.refill === null && lease!.held < leaseSize(limit, taken) / 2 && leaseSize(limit, lease!.highest) > 1) {
          this.refill(lease!, key, limit, windowMs); // the next lease, before this one runs out
        }
        return taken;
      }
      const size = leaseSize(limit, lease?.highest ?? 0);
      if (size === 1 && !lease?.refill) {
        // Reserved alone. Without a lease the limit is too small for one ever (leaseSize(limit, 0)
        // is 1): nothing is kept for its bucket, which a public limit has one of per client.
        const count = await this.reservations.call({ key, amount: 1, ttlMs: windowMs + 1000 });
        if (lease) lease.highest = Math.max(lease.highest, count);
        return count;
      }
      if (!lease) this.leases.set(key, (lease = new Lease(windowEnd)));
      await (lease.refill ?? this.refill(lease, key, limit, windowMs));
    }
  }

  private refill(lease: Lease, key: string, limit: number, windowMs: number): Promise<void> {
    const amount = leaseSize(limit, lease.highest);
    const done = this.reservations.call({ key, amount, ttlMs: windowMs + 1000 })
      .then((count) => lease.add(count, amount))
      .finally(() => { if (lease.refill === done) lease.refill = null; });
    lease.refill = done;
    done.catch(() => {}); // a failed prefetch only leaves the next hit to reserve for itself
    return done;
  }

  /** Forgets the leases of windows that ended. */
  private prune(nowMs: number): void {
    if (nowMs < this.pruneAtMs) return;
    this.pruneAtMs = nowMs + 10_000;
    for (const [key, lease] of this.leases) if (lease.windowEndMs <= nowMs) this.leases.delete(key);
  }

  /** One script call per MAX_HITS_PER_CALL reservations (per reservation on a Cluster); each waits for its own call only. */
  private reserveAll(batch: Reservation[]): Array<Promise<number>> {
    const size = (this.redis as { isCluster?: boolean }).isCluster ? 1 : MAX_HITS_PER_CALL;
    const counts: Array<Promise<number>> = [];
    for (let i = 0; i < batch.length; i += size) {
      const group = batch.slice(i, i + size);
      const answer = (async (): Promise<number[]> =>
        (this.redis as any).formserviceRateHits(group.length, ...group.map((r) => r.key), ...group.flatMap((r) => [r.amount, r.ttlMs])))();
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
