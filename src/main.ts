// First, before anything that loads http, pg or ioredis: the instrumentations patch them as they load.
import { startTracing } from './lib/tracing';
startTracing('all-in-one');

import { loadConfig, ConfigError } from '../config';
import { createAppContext, prepareDatabase } from './app';
import { bootstrapDefaultOrganization } from './domain/auth/admin';
import { startHttp } from './http/start';
import { createLogger } from './lib/logger';
import { startWorkers } from '../workers/runtime';
import { QUEUE_NAMES } from './queues/catalogue';
import { onShutdown } from './lib/shutdown';

/** Everything in one process: migrate, API + public runtime, every worker. */
async function main(): Promise<void> {
  const config = loadConfig();
  const logger = createLogger(config.logLevel);
  await prepareDatabase(config);
  const app = await createAppContext(config, logger);
  const bootstrap = await bootstrapDefaultOrganization(app.orm.em.fork());
  if (bootstrap) {
    process.stdout.write(
      `\nCreated organization "default" (${bootstrap.organizationId}) and its first API key (scope *).\n` +
      `It is shown only this once:\n\n    ${bootstrap.key}\n\n`,
    );
  }
  // Workers first: once the API answers (readiness), the shutdown handlers are in place, so a
  // SIGTERM right after readiness drains instead of killing a process still starting its workers.
  const workers = await startWorkers(app, QUEUE_NAMES);
  const http = await startHttp(app);
  onShutdown(logger, [() => http.drain(), () => workers.close(), () => app.close()]);
}

main().catch((err) => {
  process.stderr.write(`${err instanceof ConfigError ? err.message : err?.stack ?? err}\n`);
  process.exit(1);
});
