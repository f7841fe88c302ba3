import { DelayedError, Worker, type Job } from 'bullmq';
import type { AppContext } from '../src/app';
import { blockingRedis } from '../config/redis';
import { jobLogger } from '../src/lib/logger';
import { exportJobZeros, metrics } from '../src/lib/metrics';
import { bullmqTelemetry } from '../src/lib/tracing';
import { JOB_NAMES, type QueueName } from '../src/queues/catalogue';
import { backoffStrategy } from './backoff';
import { notingRetryDue } from '../src/queues/held-jobs';
import { PROCESSORS, PROCESSORS_INIT, type Processor } from './processors';

const CLOSE_DEADLINE_MS = 20_000;

export interface RunningWorkers {
  workers: Worker[];
  close(): Promise<void>;
}

/** Startup fails when a job of the catalogue has no processor. */
export function assertEveryJobHasAProcessor(
  queues: readonly QueueName[], processors: { [Q in QueueName]?: Record<string, Processor | undefined> } = PROCESSORS,
): void {
  for (const queue of queues) {
    for (const name of JOB_NAMES[queue]) {
      if (!processors[queue]?.[name]) {
        throw new Error(`job ${queue}/${name} has no processor`);
      }
    }
  }
}

export async function startWorkers(app: AppContext, queues: readonly QueueName[]): Promise<RunningWorkers> {
  assertEveryJobHasAProcessor(queues);
  exportJobZeros(queues);
  const workers = queues.map((queue) => {
    const processors = PROCESSORS[queue] as Record<string, Processor>;
    const worker = new Worker(queue, async (job: Job) => {
      const started = process.hrtime.bigint();
      try {
        const result = await processors[job.name](app, job);
        metrics.jobDuration.observe({ queue, result: 'completed' }, Number(process.hrtime.bigint() - started) / 1e9);
        return result;
      } catch (err) {
        // A job moved back to delayed (a throttled delivery, a paused CRM connection) has not failed.
        const result = err instanceof DelayedError ? 'delayed' : 'failed';
        metrics.jobDuration.observe({ queue, result }, Number(process.hrtime.bigint() - started) / 1e9);
        throw err;
      }
    }, {
      connection: blockingRedis(app.config),
      prefix: app.config.queuePrefix,
      concurrency: queue === 'webhooks' ? app.config.webhookWorkerConcurrency : app.config.workerConcurrency,
      // A job whose worker died is taken over once its lock lapses and the stall check runs.
      lockDuration: app.config.workerLockMs,
      stalledInterval: app.config.workerLockMs,
      // Webhook and CRM retries (their custom schedule) note when they are due, for the queue's lateness.
      settings: { backoffStrategy: notingRetryDue(app.redis, backoffStrategy(app.config.webhookRetryDelaysMs)) },
      telemetry: bullmqTelemetry(),
    });
    worker.on('failed', (job, err) => {
      const final = !job || job.attemptsMade >= (job.opts.attempts ?? 1);
      // attemptsMade already counts the attempt that failed; jobLogger names the attempt being run.
      const log = job
        ? jobLogger(app.logger, { id: job.id, name: job.name, queueName: queue, attemptsMade: job.attemptsMade - 1 })
        : app.logger.child({ queue });
      // Only the final failure is worth an error line; earlier ones are retries by design.
      log[final ? 'error' : 'debug']({ err: err.message }, final ? 'job failed for good' : 'job attempt failed');
    });
    worker.on('error', (err) => app.logger.debug({ queue, err: err.message }, 'worker connection error'));
    return worker;
  });
  await Promise.all(workers.map((w) => w.waitUntilReady()));
  const stops: Array<() => void> = [];
  for (const init of queues.map((q) => PROCESSORS_INIT[q]).filter(Boolean)) stops.push(await init!(app));
  return {
    workers,
    async close() {
      for (const stop of stops) stop();
      const closing = Promise.all(workers.map((w) => w.close()));
      const deadline = new Promise((resolve) => setTimeout(resolve, CLOSE_DEADLINE_MS).unref());
      await Promise.race([closing, deadline]);
    },
  };
}
