import { expect } from 'chai';
import IORedis from 'ioredis';
import { Producer, QueueUnavailableError } from '../../src/queues/producer';
import { freePort } from '../support/processes';

describe('Producer while Redis is unreachable', () => {
  let connection: IORedis;
  let producer: Producer;

  before(async () => {
    // Nothing listens there: the connection never becomes ready, as when Redis was down at start.
    connection = new IORedis(`redis://127.0.0.1:${await freePort()}`, {
      enableOfflineQueue: false, maxRetriesPerRequest: 1, retryStrategy: (times) => Math.min(200 * times, 2000),
    });
    connection.on('error', () => undefined);
    producer = new Producer(connection, 'fsunavailable');
  });
  after(async () => {
    await producer.close().catch(() => undefined);
    connection.disconnect();
  });

  it('add, requeue and addBulk fail with QueueUnavailableError within 2.5 s instead of waiting for Redis', async () => {
    for (const call of [
      () => producer.add('webhooks', 'deliver', { deliveryId: 'dlv_a' }, { jobId: 'deliver-dlv_a' }),
      () => producer.requeue('webhooks', 'deliver', { deliveryId: 'dlv_a' }, { jobId: 'deliver-dlv_a', replaceWaiting: true }),
      () => producer.addBulk('webhooks', [{ name: 'deliver', data: { deliveryId: 'dlv_a' }, opts: { jobId: 'deliver-dlv_a' } }]),
    ]) {
      const started = Date.now();
      const err = await call().then(() => null, (e) => e);
      expect(err).to.be.instanceOf(QueueUnavailableError);
      expect(Date.now() - started).to.be.below(2_500);
    }
  });

  it('addSoon fails at once, so nothing piles up in memory', async () => {
    const started = Date.now();
    const outcomes = await Promise.allSettled(Array.from({ length: 1000 }, (_, i) =>
      producer.addSoon('submissions', 'fanout', { submissionId: `sub_${i}`, outboxId: String(i) }, { jobId: `fanout-sub_${i}` })));
    expect(outcomes.every((o) => o.status === 'rejected' && o.reason instanceof QueueUnavailableError)).to.equal(true);
    expect(Date.now() - started).to.be.below(500);
    const waiting = [...(producer as any).ticks.values()].reduce((n: number, tick: any) => n + tick.pending.length, 0);
    expect(waiting).to.equal(0);
  });
});
