import { flushLogger, type Logger } from './logger';
import { stopTracing } from './tracing';

const SHUTDOWN_DEADLINE_MS = 30_000;

/** On SIGTERM/SIGINT run the steps in order; exit when done or when the deadline passes. */
export function onShutdown(logger: Logger, steps: Array<() => Promise<unknown>>): void {
  let stopping = false;
  const stop = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    logger.info({ signal }, 'shutting down');
    setTimeout(() => {
      logger.error('shutdown deadline passed; exiting');
      process.exit(1);
    }, SHUTDOWN_DEADLINE_MS).unref();
    for (const step of steps) {
      await step().catch((err) => logger.error({ err }, 'shutdown step failed'));
    }
    await stopTracing();
    await flushLogger(logger);
    process.exit(0);
  };
  process.on('SIGTERM', () => void stop('SIGTERM'));
  process.on('SIGINT', () => void stop('SIGINT'));
}
