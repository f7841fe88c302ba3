import type { Queue } from 'bullmq';
import type { AppContext } from '../app';
import { metrics } from '../lib/metrics';
import { QUEUE_NAMES } from '../queues/catalogue';
import { readOutboxBacklog, readQueueStats, type QueueStats } from './queue-health';

const GAUGED_STATES = ['waiting', 'active', 'delayed', 'failed', 'completed'] as const;

interface QueueSample {
  stats: QueueStats;
  /** null when Redis refuses CLIENT LIST (some managed services): the other gauges still count. */
  workers: number | null;
}

async function sampleQueue(queue: Queue): Promise<QueueSample> {
  const [stats, workers] = await Promise.all([readQueueStats(queue), queue.getWorkersCount().catch(() => null)]);
  return { stats, workers };
}

function record({ stats, workers }: QueueSample): void {
  for (const state of GAUGED_STATES) metrics.queueJobs.set({ queue: stats.name, state }, stats[state]);
  metrics.queueOldestWaitingAge.set({ queue: stats.name }, stats.oldestWaitingAgeSeconds ?? 0);
  if (workers !== null) metrics.queueWorkers.set({ queue: stats.name }, workers);
}

/** The outbox backlog is read from PostgreSQL even while Redis is away: that is when it grows. */
async function sampleOnce(app: AppContext): Promise<void> {
  const [stats, backlog, throttled] = await Promise.allSettled([
    app.producer.bounded(() => Promise.all(QUEUE_NAMES.map((name) => sampleQueue(app.producer.queue(name))))),
    readOutboxBacklog(app),
    app.producer.bounded(() => app.throttle.countWaiting()),
  ]);
  if (backlog.status === 'fulfilled') metrics.outboxBacklog.set(backlog.value);
  if (stats.status === 'fulfilled') stats.value.forEach(record);
  if (throttled.status === 'fulfilled') metrics.webhookDeliveriesThrottled.set(throttled.value);
  const failed = [stats, backlog, throttled].find((r) => r.status === 'rejected') as PromiseRejectedResult | undefined;
  if (failed) throw failed.reason;
}

/**
 * Queue gauges are sampled on a timer, not per scrape, so Redis sees a bounded load whatever the
 * number of scrapers. Samples right away, then every intervalMs (QUEUE_SAMPLE_INTERVAL_MS); a slow
 * sample is never overlapped. Returns the function that stops it.
 */
export function startQueueSampler(app: AppContext, intervalMs = app.config.queueSampleIntervalMs): () => void {
  let running = false;
  const sample = async () => {
    if (running) return;
    running = true;
    try {
      await sampleOnce(app);
    } catch (err) {
      app.logger.debug({ err: (err as Error).message }, 'queue sampling failed');
    } finally {
      running = false;
    }
  };
  void sample();
  const timer = setInterval(sample, intervalMs);
  timer.unref();
  return () => clearInterval(timer);
}
