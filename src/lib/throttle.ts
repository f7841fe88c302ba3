import type { Redis } from 'ioredis';

/**
 * A rate shared by every process that uses the same Redis: at most `ratePerSecond` grants a second
 * per key, evenly spaced (one every 1000/rate ms), so no second of wall-clock time holds more than
 * the rate. A caller that cannot go now gets a slot of its own (a reservation under its `ticket`)
 * and the time until it; coming back with the same ticket at that time is granted without queueing
 * again, so waiting callers go in the order they asked, each once, rather than racing for every slot.
 *
 * The time is Redis's own (`TIME`), so processes on machines whose clocks differ agree. On a Redis
 * Cluster a key's two entries share one hash slot (`{key}`), and the script touches nothing else.
 * Everything here expires on its own; a Redis that forgets it merely lets the next callers go at once.
 */
const TAKE_SCRIPT = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local interval = tonumber(ARGV[1])
local ticket = ARGV[2]
local linger = tonumber(ARGV[3])
local held = redis.call('HGET', KEYS[2], ticket)
if held then
  held = tonumber(held)
  if held <= now + 1 then
    redis.call('HDEL', KEYS[2], ticket)
    return 0
  end
  return math.ceil(held - now)
end
local tat = tonumber(redis.call('GET', KEYS[1]) or '0')
if tat <= now then
  redis.call('SET', KEYS[1], tostring(now + interval), 'PX', math.ceil(interval) + linger)
  return 0
end
redis.call('SET', KEYS[1], tostring(tat + interval), 'PX', math.ceil(tat + interval - now) + linger)
redis.call('HSET', KEYS[2], ticket, tostring(tat))
redis.call('PEXPIRE', KEYS[2], math.ceil(tat - now) + linger)
return math.ceil(tat - now)
`;

/** How long a key's state outlives its last slot, and a reservation its time. */
const LINGER_MS = 60_000;
/** Entries of the waiting set past their time by this much are trimmed as new ones come. */
const WAITING_TRIM_MS = 60_000;
/** The waiting set goes once nothing has been noted for longer than any wait lasts. */
const WAITING_SET_TTL_MS = 2 * 86_400_000;

type ThrottleRedis = Redis & { formserviceThrottleTake(tat: string, held: string, interval: number, ticket: string, linger: number): Promise<number> };

export class SharedThrottle {
  private readonly base: string;

  /** `prefix` namespaces the keys; a Cluster hash tag in it is dropped, each key brings its own. */
  constructor(private readonly redis: Redis, prefix: string) {
    this.base = prefix.replace(/[{}]/g, '');
    if (!(redis as unknown as Partial<ThrottleRedis>).formserviceThrottleTake) {
      redis.defineCommand('formserviceThrottleTake', { numberOfKeys: 2, lua: TAKE_SCRIPT });
    }
  }

  /** 0: go now. Otherwise the ms until this ticket's reserved slot; call again with it then. */
  async take(key: string, ratePerSecond: number, ticket: string): Promise<number> {
    const tag = `${this.base}:throttle:{${key}}`;
    return (this.redis as unknown as ThrottleRedis).formserviceThrottleTake(`${tag}:tat`, `${tag}:held`, 1000 / ratePerSecond, ticket, LINGER_MS);
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
