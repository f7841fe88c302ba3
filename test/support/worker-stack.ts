import { randomBytes } from 'node:crypto';
import { loadConfig } from '../../config';
import { createAppContext, type AppContext } from '../../src/app';
import { createLogger } from '../../src/lib/logger';
import type { Job } from 'bullmq';
import { jobIds, type JobPayload, type QueueName } from '../../src/queues/catalogue';
import { startWorkers, type RunningWorkers } from '../../workers/runtime';
import { startTestApp, type TestApp } from './harness';
import { deleteQueueKeys } from './databases';
import { spawnEntry, type ServiceProcess } from './processes';

/** Short retry delays so retry paths run in milliseconds. */
export const FAST_RETRIES = '100,200,300';

/** A queue prefix of its own, so stacks with different settings never take each other's jobs. */
export function freshQueuePrefix(): string {
  return `${process.env.QUEUE_PREFIX ?? 'fstest'}x${randomBytes(3).toString('hex')}`;
}

export interface InProcessWorkers {
  app: AppContext;
  workers: RunningWorkers;
  close(): Promise<void>;
}

export async function startInProcessWorkers(queues: readonly QueueName[], env: Record<string, string>): Promise<InProcessWorkers> {
  const app = await createAppContext(loadConfig({ ...process.env, ...env }), createLogger(process.env.TEST_LOG_LEVEL ?? 'silent'));
  const workers = await startWorkers(app, queues);
  return {
    app, workers,
    async close() {
      await workers.close();
      await app.close();
    },
  };
}

export interface Stack {
  api: TestApp;
  workers: InProcessWorkers | null;
  env: Record<string, string>;
  prefix: string;
  close(): Promise<void>;
}

/** The API plus, optionally, in-process workers for some queues, sharing one fresh queue prefix. */
export async function startStack(queues: readonly QueueName[], env: Record<string, string> = {}): Promise<Stack> {
  const prefix = freshQueuePrefix();
  const fullEnv = { QUEUE_PREFIX: prefix, WEBHOOK_RETRY_DELAYS_MS: FAST_RETRIES, ...env };
  const api = await startTestApp(fullEnv);
  const workers = queues.length ? await startInProcessWorkers(queues, fullEnv) : null;
  return {
    api, workers, env: fullEnv, prefix,
    async close() {
      await workers?.close();
      await api.close();
      await deleteQueueKeys(prefix);
    },
  };
}

/** Polls until `check` returns a truthy value; rejects with `what` after timeoutMs. */
export async function waitUntil<T>(what: string, check: () => Promise<T>, timeoutMs = 5_000, intervalMs = 50): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, intervalMs));
  }
}

/**
 * The job queued for a delivery: its own (`deliver-<id>`), or the job of its storing group
 * (`deliver-group-<job_group>`) when that job names it.
 */
export async function deliveryJob(app: AppContext, deliveryId: string): Promise<Job | undefined> {
  const queue = app.producer.queue('webhooks');
  const own = await queue.getJob(jobIds.deliver(deliveryId));
  if (own) return own;
  const [row] = await app.orm.em.fork().execute<Array<{ job_group: string | null }>>(
    'select job_group from webhook_deliveries where id = ?', [deliveryId],
  );
  if (!row?.job_group) return undefined;
  const group: Job<JobPayload<'webhooks', 'deliver-group'>> | undefined = await queue.getJob(jobIds.deliverGroup(row.job_group));
  return group?.data.deliveries.some((member) => member.deliveryId === deliveryId) ? group : undefined;
}

export type WorkerChild = ServiceProcess;

/** `node dist/workers/<name>.js` as a child process, with the test run's environment plus `env`. */
export function spawnWorker(name: 'webhooks' | 'submissions' | 'crm' | 'usage' | 'all', env: Record<string, string>): WorkerChild {
  return spawnEntry(`workers/${name}.js`, {
    HOST: '127.0.0.1', METRICS_PORT: '0', LOG_LEVEL: process.env.TEST_LOG_LEVEL ?? 'warn', ...env,
  });
}
