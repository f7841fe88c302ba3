import type { Redis } from 'ioredis';

/**
 * A rate shared by every process that uses the same Redis: at most `ratePerSecond` grants a second
 * per key, evenly spaced (one every `intervalMicros(rate)` µs). A caller that cannot go now gets a
 * slot of its own in the key's line (a reservation under its `ticket`) and the time until it; coming
 * back with the same ticket at that time is granted without queueing again, so waiting callers go in
 * the order they asked, each once, rather than racing for every slot.
 *
 * Three guarantees hold whatever the callers do:
 * - times are integer microseconds in the script (Redis's Lua numbers are doubles, and `tostring`
 *   keeps 14 digits, which would round epoch times; `%d` writes them whole), so every rate from 1 to
 *   10,000 holds within 1% (the interval is rounded up to a whole µs, never granting more);
 * - the key also keeps the times of its last rate + 1 grants, and nothing is granted that would put
 *   more than rate + 1 grants in any second (closed interval) of Redis's clock: a reservation that
 *   comes back late (a restart, a stalled worker, a pause longer than its wait) is never a burst;
 * - a ticket late by more than LATE_MICROS (a second, or one interval if longer) has lost its slot and
 *   takes a new one at the end of the line, as a new caller would: it is spaced again at the rate.
 * A rate change starts the line afresh: reservations made at the old rate are forgotten, so each
 * waiting ticket takes a slot at the new rate when it comes back.
 *
 * The time is Redis's own (`TIME`), so processes on machines whose clocks differ agree. On a Redis
 * Cluster a key's entries share one hash slot (`{key}`, see `throttleKeys`), and the script touches
 * nothing else. Everything here expires on its own; a Redis that forgets it merely lets the next
 * callers go at once.
 *
 * KEYS: line (hash: `tat` the end of the line, `iv` its interval), held (`:slots`, hash: ticket → slot), log
 * (list of grant times, newest first). ARGV: interval µs, ticket, linger ms, rate, lateness µs.
 * Answers {wait µs, slot µs}: wait 0 means go now.
 */
const TAKE_SCRIPT = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local iv = tonumber(ARGV[1])
local ticket = ARGV[2]
local linger = tonumber(ARGV[3])
local rate = tonumber(ARGV[4])
local late = tonumber(ARGV[5])
local line, held, log = KEYS[1], KEYS[2], KEYS[3]
local function int(x) return string.format('%d', x) end
if tonumber(redis.call('HGET', line, 'iv') or iv) ~= iv then
  redis.call('DEL', line, held)
end
local tat = tonumber(redis.call('HGET', line, 'tat') or '0')
-- The earliest time a grant leaves at most rate + 1 grants in every closed second.
local function free()
  local n = redis.call('LLEN', log)
  if n > rate then redis.call('LTRIM', log, 0, rate) n = rate + 1 end
  if n <= rate then return now end
  return tonumber(redis.call('LINDEX', log, -1)) + 1000000 + 1
end
local function grant()
  redis.call('LPUSH', log, int(now))
  redis.call('LTRIM', log, 0, rate)
  redis.call('PEXPIRE', log, 1000 + linger)
end
local function keep(until_)
  redis.call('HSET', line, 'tat', int(until_), 'iv', int(iv))
  redis.call('PEXPIRE', line, math.ceil((until_ - now) / 1000) + linger)
end
local slot = redis.call('HGET', held, ticket)
if slot then
  slot = tonumber(slot)
  if slot > now then return {slot - now, slot} end
  redis.call('HDEL', held, ticket)
  if now - slot <= math.max(late, iv) and free() <= now then
    grant()
    return {0, now}
  end
end
local at = math.max(tat, now, free())
if at <= now then
  grant()
  keep(now + iv)
  return {0, now}
end
redis.call('HSET', held, ticket, int(at))
redis.call('PEXPIRE', held, math.ceil((at - now) / 1000) + linger)
keep(at + iv)
return {at - now, at}
`;

/**
 * A reservation this much past its slot (or one interval, if longer) has lost it: it queues again.
 * Shorter lateness (a busy worker, a delayed job promoted late) keeps its slot; the grant log still
 * bounds what it may add to any second. Long enough that ordinary scheduling delays never cost a
 * ticket its place (a ticket late every time would otherwise never be granted while others wait).
 */
const LATE_MICROS = 1_000_000;

/** The spacing of a rate, in whole microseconds, rounded up so the rate is never exceeded (within 1% up to 10,000 a second). */
export function intervalMicros(ratePerSecond: number): number {
  return Math.ceil(1_000_000 / ratePerSecond);
}

/**
 * The Redis keys of one throttled key (a webhook), all in one Cluster hash slot (`{key}`): the
 * script's line, reservations and grant log. `prefix` namespaces them; a hash tag in it is dropped.
 */
export function throttleKeys(prefix: string, key: string): { line: string; held: string; log: string } {
  const tag = `${prefix.replace(/[{}]/g, '')}:throttle:{${key}}`;
  // Names none of the previous release's keys (`:tat`, `:held`, in ms) uses: during a rolling deploy
  // its workers would read a µs slot of ours as ms and hold a delivery for ever (deploy/README.md).
  return { line: `${tag}:line`, held: `${tag}:slots`, log: `${tag}:log` };
}

/** How long a key's state outlives its last slot, and a reservation its time. */
const LINGER_MS = 60_000;
/** Entries of the waiting set past their time by this much are trimmed as new ones come. */
const WAITING_TRIM_MS = 60_000;
/** The waiting set goes once nothing has been noted for longer than any wait lasts. */
const WAITING_SET_TTL_MS = 2 * 86_400_000;

type ThrottleRedis = Redis & {
  formserviceThrottleTake(line: string, held: string, log: string, interval: number, ticket: string, linger: number, rate: number, late: number): Promise<[number, number]>;
};

export class SharedThrottle {
  private readonly base: string;

  /** `prefix` namespaces the keys; a Cluster hash tag in it is dropped, each key brings its own. */
  constructor(private readonly redis: Redis, prefix: string) {
    this.base = prefix.replace(/[{}]/g, '');
    if (!(redis as unknown as Partial<ThrottleRedis>).formserviceThrottleTake) {
      redis.defineCommand('formserviceThrottleTake', { numberOfKeys: 3, lua: TAKE_SCRIPT });
    }
  }

  /** 0: go now. Otherwise the ms until this ticket's reserved slot; call again with it then. */
  async take(key: string, ratePerSecond: number, ticket: string): Promise<number> {
    const { waitMicros } = await this.reserve(key, ratePerSecond, ticket);
    return Math.ceil(waitMicros / 1000);
  }

  /** The script's own answer: µs until the ticket's slot (0: granted now) and that slot, on Redis's clock in µs. */
  async reserve(key: string, ratePerSecond: number, ticket: string): Promise<{ waitMicros: number; slotMicros: number }> {
    const { line, held, log } = throttleKeys(this.base, key);
    const [waitMicros, slotMicros] = await (this.redis as unknown as ThrottleRedis).formserviceThrottleTake(
      line, held, log, intervalMicros(ratePerSecond), ticket, LINGER_MS, ratePerSecond, LATE_MICROS,
    );
    return { waitMicros, slotMicros };
  }

  /** Forgets a key's line and reservations (its grant log stays, so the rate still holds): waiting tickets queue afresh. */
  async reset(key: string): Promise<void> {
    const { line, held } = throttleKeys(this.base, key);
    await this.redis.del(line, held);
  }

  private get waitingKey(): string {
    return `${this.base}:throttle:waiting`;
  }

  /** Notes that `ticket` waits until `untilMs` (epoch ms), for countWaiting. */
  async noteWaiting(ticket: string, untilMs: number): Promise<void> {
    await this.redis.multi()
      .zadd(this.waitingKey, untilMs, ticket)
      .zremrangebyscore(this.waitingKey, '-inf', Date.now() - WAITING_TRIM_MS)
      .pexpire(this.waitingKey, WAITING_SET_TTL_MS)
      .exec();
  }

  /** How many tickets wait now (their time has not come). */
  async countWaiting(nowMs = Date.now()): Promise<number> {
    return this.redis.zcount(this.waitingKey, `(${nowMs}`, '+inf');
  }
}
