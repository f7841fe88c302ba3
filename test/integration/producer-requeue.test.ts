import { expect } from 'chai';
import { randomBytes } from 'node:crypto';
import IORedis from 'ioredis';
import { Worker } from 'bullmq';
import { Producer } from '../../src/queues/producer';
import { deleteQueueKeys } from '../support/databases';

describe('Producer.requeue: one job per owed row, whatever the queue remembers', () => {
  const prefix = `fsreq${randomBytes(4).toString('hex')}`;
  const redisUrl = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
  let connection: IORedis;
  let producer: Producer;

  before(() => {
    connection = new IORedis(redisUrl, { maxRetriesPerRequest: 1 });
    producer = new Producer(connection, prefix);
  });
  after(async () => {
    await producer.close();
    connection.disconnect();
    await deleteQueueKeys(prefix);
  });

  it('adds a job that the queue does not know', async () => {
    expect(await producer.requeue('webhooks', 'deliver', { deliveryId: 'dlv_a' }, { jobId: 'deliver-dlv_a', delay: 60_000 })).to.equal('queued');
    expect(await producer.queue('webhooks').getJob('deliver-dlv_a').then((j) => j?.getState())).to.equal('delayed');
  });

  it('leaves a waiting or delayed job alone, unless asked to replace it', async () => {
    expect(await producer.requeue('webhooks', 'deliver', { deliveryId: 'dlv_a' }, { jobId: 'deliver-dlv_a' })).to.equal('live');
    expect(await producer.queue('webhooks').getJob('deliver-dlv_a').then((j) => j?.getState())).to.equal('delayed');
    expect(await producer.requeue('webhooks', 'deliver', { deliveryId: 'dlv_a' }, { jobId: 'deliver-dlv_a', replaceWaiting: true })).to.equal('queued');
    expect(await producer.queue('webhooks').getJob('deliver-dlv_a').then((j) => j?.getState())).to.equal('waiting');
    const counts = await producer.queue('webhooks').getJobCounts('waiting', 'delayed');
    expect([counts.waiting, counts.delayed]).to.deep.equal([1, 0]);
  });

  it('adds again a job that has completed', async () => {
    const worker = new Worker('webhooks', async () => 'done', {
      connection: new IORedis(redisUrl, { maxRetriesPerRequest: null }), prefix, autorun: true,
    });
    try {
      const completed = new Promise((resolve) => worker.once('completed', resolve));
      await completed;
      const job = await producer.queue('webhooks').getJob('deliver-dlv_a');
      expect(await job?.getState()).to.equal('completed');
      await worker.pause();
      expect(await producer.requeue('webhooks', 'deliver', { deliveryId: 'dlv_a' }, { jobId: 'deliver-dlv_a' })).to.equal('queued');
      expect(await producer.queue('webhooks').getJob('deliver-dlv_a').then((j) => j?.getState())).to.equal('waiting');
    } finally {
      await worker.close();
    }
  });

  it('addSoon: a job alone in its tick is a plain add, jobs of one tick share one addBulk', async () => {
    const queue = producer.queue('submissions');
    const calls: string[] = [];
    const [add, addBulk] = [queue.add.bind(queue), queue.addBulk.bind(queue)];
    queue.add = ((...args: Parameters<typeof queue.add>) => { calls.push('add'); return add(...args); }) as typeof queue.add;
    queue.addBulk = ((jobs: Parameters<typeof queue.addBulk>[0]) => { calls.push(`addBulk ${jobs.length}`); return addBulk(jobs); }) as typeof queue.addBulk;
    try {
      await producer.addSoon('submissions', 'fanout', { submissionId: 'sub_alone', outboxId: '1' });
      await Promise.all([2, 3, 4].map((n) => producer.addSoon('submissions', 'fanout', { submissionId: `sub_${n}`, outboxId: String(n) })));
    } finally {
      Object.assign(queue, { add, addBulk });
    }
    expect(calls).to.deep.equal(['add', 'addBulk 3']);
    const jobs = await Promise.all(['sub_alone', 'sub_2', 'sub_3', 'sub_4'].map((id) => queue.getJob(`fanout-${id}`)));
    expect(jobs.map((job) => job?.data.submissionId)).to.deep.equal(['sub_alone', 'sub_2', 'sub_3', 'sub_4']);
    expect(jobs[0]!.opts.attempts).to.equal(jobs[1]!.opts.attempts);
  });
});
