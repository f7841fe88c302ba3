import { expect } from 'chai';
import { DelayedError, Queue, Worker, type Job } from 'bullmq';
import IORedis from 'ioredis';
import { loadConfig } from '../../config';
import { readQueueStats } from '../../src/ops/queue-health';
import { DUE_AT_FIELD, holdJobUntil, notingRetryDue } from '../../src/queues/held-jobs';
import { backoffStrategy, RetryLaterError } from '../../workers/backoff';
import { deleteQueueKeys } from '../support/databases';
import { waitUntil } from '../support/processes';
import { freshQueuePrefix } from '../support/worker-stack';

/**
 * FormServiceQueueFallingBehind reads formservice_queue_oldest_waiting_age_seconds: how long a job
 * has waited since it became due. Jobs created an hour ago and held by their processor (as a
 * throttled delivery is) read as due a moment ago, in the delayed set past their time and once
 * promoted to wait, on BullMQ's real structures; a job that waited the hour reads the hour.
 */
describe('queue lateness: counted from when a job became due', function () {
  this.timeout(30_000);
  const config = loadConfig();
  const prefix = freshQueuePrefix();
  const HOUR_MS = 3_600_000;
  const HOLD_MS = 300;
  let redis: IORedis;
  let held: Queue;
  let plain: Queue;

  before(async () => {
    redis = new IORedis(config.redisUrl, { maxRetriesPerRequest: null });
    held = new Queue('held', { connection: redis, prefix });
    plain = new Queue('plain', { connection: redis, prefix });
  });

  after(async () => {
    await held?.close();
    await plain?.close();
    await deleteQueueKeys(prefix);
    redis?.disconnect();
  });

  it('a throttled backlog created an hour ago reads as due a moment ago, in delayed and in wait', async () => {
    const created = Date.now() - HOUR_MS;
    await held.addBulk([1, 2, 3].map((n) => ({ name: 'deliver', data: { n }, opts: { jobId: `held-${n}`, timestamp: created } })));
    // A worker takes each job once and holds it, as the webhooks processor holds a throttled delivery.
    const worker = new Worker('held', async (job: Job) => {
      await holdJobUntil(redis, job, Date.now() + HOLD_MS);
      throw new DelayedError();
    }, { connection: new IORedis(config.redisUrl, { maxRetriesPerRequest: null }), prefix, concurrency: 3 });
    try {
      await waitUntil(async () => (await held.getJobCounts('delayed')).delayed === 3, 10_000, 50);
    } finally {
      await worker.close();
      await worker.disconnect();
    }
    await new Promise((r) => setTimeout(r, HOLD_MS + 200));

    // Due, but no worker left to promote them: still in the delayed set, past their score.
    const inDelayed = await readQueueStats(held);
    expect(inDelayed.delayed).to.equal(3);
    expect(inDelayed.oldestWaitingAgeSeconds).to.be.a('number').within(0, 30);

    // Promoted to wait, as a worker's moveToActive does: BullMQ sets `delay` to 0 and keeps `timestamp`.
    await held.promoteJobs();
    const inWait = await readQueueStats(held);
    expect(inWait.waiting).to.equal(3);
    const [tail] = await held.getJobs(['wait'], 0, 0, true);
    expect(tail.timestamp).to.equal(created);
    expect(await redis.hget(held.toKey(tail.id!), DUE_AT_FIELD)).to.be.a('string');
    expect(inWait.oldestWaitingAgeSeconds).to.be.a('number').within(0, 30);

    // What BullMQ's own fields alone tell: created an hour ago.
    await redis.hdel(held.toKey(tail.id!), DUE_AT_FIELD);
    expect((await readQueueStats(held)).oldestWaitingAgeSeconds).to.be.at.least(HOUR_MS / 1000 - 60);
  });

  it('a retry after an hour\'s backoff (the webhook schedule) reads as due when its backoff ended, not when it failed', async () => {
    const retried = new Queue('retried', { connection: redis, prefix });
    try {
      // The workers' own strategy (workers/runtime.ts): a receiver's Retry-After of an hour.
      const worker = new Worker('retried', async () => { throw new RetryLaterError('503', HOUR_MS); }, {
        connection: new IORedis(config.redisUrl, { maxRetriesPerRequest: null }), prefix,
        settings: { backoffStrategy: notingRetryDue(redis, backoffStrategy([5_000])) },
      });
      await retried.add('deliver', {}, { jobId: 'retry-1', attempts: 3, backoff: { type: 'webhook-schedule' } });
      try {
        await waitUntil(async () => (await retried.getJobCounts('delayed')).delayed === 1, 10_000, 50);
      } finally {
        await worker.close();
        await worker.disconnect();
      }
      // An hour later: every time BullMQ and the note keep, moved back by the hour (the backoff has ended).
      const key = retried.toKey('retry-1');
      const [timestamp, processedOn, dueAt] = await redis.hmget(key, 'timestamp', 'processedOn', DUE_AT_FIELD);
      expect(dueAt, 'the retry\'s due time is noted').to.be.a('string');
      expect(Number(dueAt) - Number(processedOn)).to.be.at.least(HOUR_MS);
      const score = Number(await redis.zscore(retried.keys.delayed, 'retry-1'));
      await redis.hset(key, 'timestamp', Number(timestamp) - HOUR_MS, 'processedOn', Number(processedOn) - HOUR_MS, DUE_AT_FIELD, Number(dueAt) - HOUR_MS);
      await redis.zadd(retried.keys.delayed, score - HOUR_MS * 0x1000, 'retry-1');
      await retried.promoteJobs();
      const stats = await readQueueStats(retried);
      expect(stats.waiting).to.equal(1);
      expect(stats.oldestWaitingAgeSeconds).to.be.a('number').within(0, 30);
    } finally {
      await retried.obliterate({ force: true });
      await retried.close();
    }
  });

  it('a job that has really waited since its creation an hour ago reads the hour', async () => {
    await plain.add('deliver', {}, { jobId: 'plain-1', timestamp: Date.now() - HOUR_MS });
    const stats = await readQueueStats(plain);
    expect(stats.waiting).to.equal(1);
    expect(stats.oldestWaitingAgeSeconds).to.be.within(HOUR_MS / 1000 - 60, HOUR_MS / 1000 + 60);
  });

  it('a job back in wait with a due time still ahead (its hold failed: lock lost) reads from its creation', async () => {
    await plain.obliterate({ force: true });
    await plain.add('deliver', {}, { jobId: 'plain-3', timestamp: Date.now() - HOUR_MS });
    await redis.hset(plain.toKey('plain-3'), DUE_AT_FIELD, String(Date.now() + HOUR_MS));
    const stats = await readQueueStats(plain);
    expect(stats.waiting).to.equal(1);
    expect(stats.oldestWaitingAgeSeconds).to.be.within(HOUR_MS / 1000 - 60, HOUR_MS / 1000 + 60);
  });

  it('a job delayed past its time, with no worker to promote it, reads from its due time', async () => {
    await plain.obliterate({ force: true });
    await plain.add('deliver', {}, { jobId: 'plain-2', delay: 200, timestamp: Date.now() - HOUR_MS });
    // Its due time is its creation plus its delay: an hour ago, and nobody took it since.
    const stats = await readQueueStats(plain);
    expect(stats.delayed).to.equal(1);
    expect(stats.oldestWaitingAgeSeconds).to.be.at.least(HOUR_MS / 1000 - 60);
  });
});
