import type { AppContext } from '../src/app';
import { outboxBacklog } from '../src/domain/usage/usage-jobs';
import { metrics } from '../src/lib/metrics';
import { QUEUE_NAMES } from '../src/queues/catalogue';

export const SAMPLE_INTERVAL_MS = 10_000;
const STATES = ['waiting', 'active', 'delayed', 'prioritized', 'failed'] as const;

async function sampleOnce(app: AppContext): Promise<void> {
  for (const name of QUEUE_NAMES) {
    const queue = app.producer.queue(name);
    const counts = await queue.getJobCounts(...STATES);
    for (const state of STATES) metrics.queueJobs.set({ queue: name, state }, counts[state] ?? 0);
    // The wait list is pushed at its head, so its last element is the oldest.
    const [oldest] = await queue.getJobs(['wait'], 0, 0, true);
    metrics.queueOldestWaitingAge.set({ queue: name }, oldest ? Math.max(0, Date.now() - oldest.timestamp) / 1000 : 0);
  }
  metrics.outboxBacklog.set(await outboxBacklog(app.orm.em.fork()));
}

/**
 * Queue gauges are sampled on a timer, not per scrape, so scrapes stay cheap and Redis sees a
 * bounded load whatever the number of scrapers.
 */
export function startQueueSampler(app: AppContext, intervalMs = SAMPLE_INTERVAL_MS): { stop(): void } {
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
  return { stop: () => clearInterval(timer) };
}
