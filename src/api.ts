// First, before anything that loads http, pg or ioredis: the instrumentations patch them as they load.
import { startTracing } from './lib/tracing';
startTracing('api');

import { loadConfig, ConfigError } from '../config';
import { createAppContext } from './app';
import { startHttp } from './http/start';
import { createLogger } from './lib/logger';
import { onShutdown } from './lib/shutdown';

/** The HTTP API and public runtime alone; run `cli migrate` (or the main entry) first. */
async function main(): Promise<void> {
  const config = loadConfig();
  const logger = createLogger(config.logLevel);
  const app = await createAppContext(config, logger);
  const http = await startHttp(app);
  onShutdown(logger, [() => http.drain(), () => app.close()]);
}

main().catch((err) => {
  process.stderr.write(`${err instanceof ConfigError ? err.message : err?.stack ?? err}\n`);
  process.exit(1);
});
