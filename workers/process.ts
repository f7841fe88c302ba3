import { ConfigError, loadConfig } from '../config';
import { createAppContext } from '../src/app';
import { createLogger } from '../src/lib/logger';
import { onShutdown } from '../src/lib/shutdown';
import { startQueueSampler } from '../src/ops/queue-sampler';
import type { QueueName } from '../src/queues/catalogue';
import { startOpsServer } from './ops-server';
import { startWorkers } from './runtime';

/**
 * A worker process for the given queues. Stateless: run as many copies as needed, on any machines;
 * BullMQ hands each job to one of them.
 */
async function runWorkers(queues: readonly QueueName[]): Promise<void> {
  const config = loadConfig();
  const logger = createLogger(config.logLevel);
  // No client waits on a worker's statements: a big roll-up or retention batch may run longer.
  const app = await createAppContext({
    ...config, dbTimeouts: { ...config.dbTimeouts, statementMs: config.workerDbStatementTimeoutMs },
  }, logger);
  const workers = await startWorkers(app, queues);
  const stopSampler = startQueueSampler(app);
  const ops = await startOpsServer(app, config.metricsPort, config.host);
  logger.info({ queues, metricsPort: ops.port }, 'workers started');
  onShutdown(logger, [
    async () => ops.markDraining(),
    () => workers.close(),
    async () => stopSampler(),
    () => ops.close(),
    () => app.close(),
  ]);
}

export function runWorkerProcess(queues: readonly QueueName[]): void {
  runWorkers(queues).catch((err) => {
    process.stderr.write(`${err instanceof ConfigError ? err.message : err?.stack ?? err}\n`);
    process.exit(1);
  });
}
