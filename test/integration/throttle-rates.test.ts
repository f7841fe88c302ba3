import { expect } from 'chai';
import IORedis from 'ioredis';
import { intervalMicros, SharedThrottle, throttleKeys } from '../../src/lib/throttle';
import { startTestApp, type TestApp } from '../support/harness';
import { freshQueuePrefix } from '../support/worker-stack';

/** The previous release's script and keys (`<tag>:tat`, `<tag>:held`, times in ms), as its workers run it during a rolling deploy. */
const PREVIOUS_RELEASE_SCRIPT = `
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

/** The most grants within any closed second of Redis's clock (µs times). */
function mostInClosedSecond(times: number[]): number {
  const sorted = [...times].sort((a, b) => a - b);
  let most = 0;
  for (let i = 0, j = 0; i < sorted.length; i++) {
    while (sorted[i] - sorted[j] > 1_000_000) j++;
    most = Math.max(most, i - j + 1);
  }
  return most;
}

/**
 * The throttle's script on the real Redis, with Redis's clock: slot times are whole microseconds, so
 * every rate holds within 1%, and no second ever holds more than rate + 1 grants.
 */
describe('the shared throttle at every rate (Redis, Redis\'s clock)', function () {
  this.timeout(60_000);
  let t: TestApp;
  let prefix: string;
  let throttle: SharedThrottle;
  let redis: IORedis;
  before(async () => {
    t = await startTestApp();
    prefix = freshQueuePrefix();
    // Calls made together go to Redis together, so the script, not this client, is what is measured.
    redis = new IORedis(t.app.config.redisUrl, { enableAutoPipelining: true });
    throttle = new SharedThrottle(redis, prefix);
  });
  after(async () => {
    const keys = await redis.keys(`${prefix}:throttle:*`);
    if (keys.length) await redis.del(...keys);
    redis.disconnect();
    await t.close();
  });

  for (const rate of [1, 7, 333, 7000, 10000]) {
    it(`rate ${rate}: reservations spaced at the rate within 1%, every ticket granted once, no second over rate + 1`, async () => {
      const key = `wh_rate${rate}`;
      // A second's worth (at least 4), at most 2,000: more would measure this client's event loop, not the script.
      const tickets = Math.min(Math.max(rate, 4), 2_000);
      const grants: number[] = [];
      const slots: number[] = [];
      // Every ticket asks at once, then comes back at its slot (as a delayed job would) until granted.
      await Promise.all(Array.from({ length: tickets }, async (_, i) => {
        for (let asked = 0; ; asked++) {
          const { waitMicros, slotMicros } = await throttle.reserve(key, rate, `dlv_${i}`);
          if (asked === 0) slots.push(slotMicros);
          if (waitMicros === 0) { grants.push(slotMicros); return; }
          await new Promise((r) => setTimeout(r, Math.ceil(waitMicros / 1000)));
        }
      }));
      slots.sort((a, b) => a - b);
      const gaps = slots.slice(1).map((s, i) => s - slots[i]);
      // Back-to-back reservations are one interval apart; a longer gap is a moment the line was empty
      // (this client asked more slowly than the rate), never a shorter one.
      const back = gaps.filter((g) => g === intervalMicros(rate));
      const spacing = back.length ? back.reduce((a, b) => a + b, 0) / back.length : Infinity;
      const reserved = 1_000_000 / spacing;
      const granted = grants.length > 1 ? (grants.length - 1) / ((Math.max(...grants) - Math.min(...grants)) / 1_000_000) : rate;
      const most = mostInClosedSecond(grants);
      console.log(`      rate ${rate}: reserved ${reserved.toFixed(2)}/s (interval ${intervalMicros(rate)} µs), `
        + `${grants.length} granted, at ${granted.toFixed(2)}/s from first to last, most in one second ${most}`);
      expect(grants).to.have.length(tickets);
      expect(Math.min(...gaps)).to.equal(intervalMicros(rate));
      expect(back.length / gaps.length, JSON.stringify([...new Set(gaps)])).to.be.at.least(0.9);
      expect(reserved).to.be.within(rate * 0.99, rate);
      expect(most).to.be.at.most(rate + 1);
      expect(granted).to.be.at.most(rate * 1.01);
    });
  }

  it('a reservation that comes back late is spaced again at the rate, never granted beside the next one', async () => {
    const key = 'wh_late';
    expect((await throttle.reserve(key, 2, 'dlv_a')).waitMicros).to.equal(0);
    expect((await throttle.reserve(key, 2, 'dlv_b')).waitMicros).to.be.within(1, 500_000);
    expect((await throttle.reserve(key, 2, 'dlv_c')).waitMicros).to.be.within(500_001, 1_000_000);
    // Both slots pass (a worker stalled, the service restarted): b and c come back over a second late.
    await new Promise((r) => setTimeout(r, 2_200));
    expect((await throttle.reserve(key, 2, 'dlv_b')).waitMicros).to.equal(0);
    const c = await throttle.reserve(key, 2, 'dlv_c');
    expect(c.waitMicros, 'c was granted at once beside b').to.be.within(400_000, 500_000);
  });

  it('a rate change applies to the tickets already waiting', async () => {
    const key = 'wh_change';
    const waits = [];
    for (let i = 0; i < 4; i++) waits.push((await throttle.reserve(key, 1, `dlv_${i}`)).waitMicros);
    expect(waits[3]).to.be.above(2_900_000);
    // Faster now: the ticket that waited 3 s at one a second goes within 10 ms at a hundred.
    const again = await throttle.reserve(key, 100, 'dlv_3');
    expect(again.waitMicros).to.be.at.most(10_000);
    const next = await throttle.reserve(key, 100, 'dlv_2');
    expect(next.waitMicros).to.be.at.most(20_000);
    // The keys the code builds share the webhook's hash tag.
    const keys = throttleKeys(prefix, key);
    expect(await redis.exists(keys.line, keys.log)).to.equal(2);
  });
  it('during a rolling deploy, a ticket this release reserved and the previous release\'s worker picks up waits its slot, not forever', async () => {
    const key = 'wh_rolling';
    const tag = `${prefix}:throttle:{${key}}`;
    const previous = (ticket: string) => redis.eval(PREVIOUS_RELEASE_SCRIPT, 2, `${tag}:tat`, `${tag}:held`, 1000 / 2, ticket, 60_000) as Promise<number>;
    expect((await throttle.reserve(key, 2, 'dlv_a')).waitMicros).to.equal(0);
    const b = await throttle.reserve(key, 2, 'dlv_b');
    expect(b.waitMicros).to.be.above(0);
    // dlv_b's delayed job comes back on a worker of the previous release (ms, its own keys): a wait of
    // a second at most, never this release's µs slot read as ms (57,000 years: a delivery stranded).
    const waitMs = await previous('dlv_b');
    expect(waitMs).to.be.at.most(1_000);
    // And the other way round: what the previous release reserved never strands a ticket here.
    expect(await previous('dlv_x')).to.be.at.most(1_000);
    expect(await previous('dlv_y')).to.be.at.most(1_000);
    expect((await throttle.reserve(key, 2, 'dlv_y')).waitMicros).to.be.at.most(1_500_000);
  });
});
