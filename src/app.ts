import type { Redis } from 'ioredis';
import type { Config } from '../config';
import { failFastRedis } from '../config/redis';
import { ADMIN_DB_TIMEOUTS, ensureDatabase, initOrm, migrate, type AppliedMigration, type Orm } from './db/orm';
import { KeyStore } from './domain/auth/key-store';
import { resolveEncryptionKeys } from './domain/secrets/keys';
import { INVALIDATION_CHANNEL, publishInvalidation } from './lib/cache-invalidation';
import { FormCache } from './domain/forms/form-cache';
import { SubmissionWriter } from './domain/submissions/submission-writer';
import { ensureSubmissionPartitions } from './domain/submissions/partitions';
import { RateLimiter } from './domain/quotas/rate-limiter';
import { createLogger, type Logger } from './lib/logger';
import { Producer } from './queues/producer';
import { SharedThrottle } from './lib/throttle';
import { createFileStore } from './domain/files/file-store';
import { FileLinks } from './domain/files/links';
import type { Files } from './domain/files/uploads';

/** Everything a request handler or a job needs, built once per process. */
export interface AppContext {
  config: Readonly<Config>;
  orm: Orm;
  /**
   * Reads that may lag behind the last commit (lists, export, change feed, analytics): a streaming
   * replica when DATABASE_READ_URL is set, else the primary. A read that must see what was just
   * acknowledged (a submission right after its 201) uses `orm`. Requests read it through their
   * context's `readLagging` (src/http/pipeline.ts), which asks the primary when the replica fails.
   */
  readOrm: Orm;
  logger: Logger;
  /** Fails fast when Redis is down: request paths must never wait on it. */
  redis: Redis;
  producer: Producer;
  /** Per-webhook delivery rates (`throttleRate`), shared by every worker process through Redis. */
  throttle: SharedThrottle;
  keyStore: KeyStore;
  rateLimiter: RateLimiter;
  formCache: FormCache;
  /** Stores the single submissions of concurrent requests together (one statement and commit). */
  submissionWriter: SubmissionWriter;
  /** The key new secrets are sealed with. */
  encryptionKey: Buffer;
  /** Every key that may open a sealed value (the current one first). */
  decryptionKeys: Buffer[];
  /** The file store (local or S3) and the signed links to its files. */
  files: Files;
  /** Drops a changed form from this process's cache and tells the other processes to. */
  forgetForm(formId: string): void;
  close(): Promise<void>;
}

function untilReady(client: Redis, timeoutMs: number): Promise<void> {
  if (client.status === 'ready') return Promise.resolve();
  return new Promise((resolve) => {
    const timer = setTimeout(done, timeoutMs);
    function done() {
      clearTimeout(timer);
      client.off('ready', done);
      resolve();
    }
    client.once('ready', done);
  });
}

export async function prepareDatabase(config: Readonly<Config>, log?: (line: string) => void): Promise<AppliedMigration[]> {
  await ensureDatabase(config.databaseUrl);
  const orm = await initOrm(config.databaseUrl, 1, { preparedStatements: config.dbPreparedStatements, timeouts: ADMIN_DB_TIMEOUTS });
  try {
    const applied = await migrate(orm, log);
    await ensureSubmissionPartitions(orm.em.fork());
    return applied;
  } finally {
    await orm.close();
  }
}

export async function createAppContext(config: Readonly<Config>, logger = createLogger(config.logLevel)): Promise<AppContext> {
  const ormOptions = { preparedStatements: config.dbPreparedStatements, timeouts: config.dbTimeouts };
  const orm = await initOrm(config.databaseUrl, config.dbPoolMax, ormOptions);
  const readOrm = config.databaseReadUrl ? await initOrm(config.databaseReadUrl, config.dbPoolMax, { ...ormOptions, replica: true }) : orm;
  const redis = failFastRedis(config);
  // BullMQ asks a Cluster for its version as soon as the queue exists, before the Cluster is ready:
  // that first command must wait for it rather than fail and leave the queue unusable.
  const producerConnection = failFastRedis(config, config.redisClusterNodes.length ? { enableOfflineQueue: true } : {});
  const subscriber = failFastRedis(config, { enableOfflineQueue: true, maxRetriesPerRequest: null, commandTimeout: undefined });
  for (const client of [redis, producerConnection, subscriber]) {
    client.on('error', (err) => logger.debug({ err: err.message }, 'redis connection error'));
  }
  const keyStore = new KeyStore(orm);
  subscriber.subscribe(INVALIDATION_CHANNEL).catch((err) => logger.warn({ err: err.message }, 'cannot subscribe to key invalidations'));
  const formCache = new FormCache(orm);
  subscriber.on('message', (_channel, message: string) => {
    keyStore.handleInvalidation(message);
    formCache.handleInvalidation(message);
  });
  // A reconnect may have missed invalidations: start from clean caches.
  subscriber.on('ready', () => {
    keyStore.handleInvalidation('all');
    formCache.handleInvalidation('all');
  });

  let fallbackWarned = 0;
  const rateLimiter = new RateLimiter(redis, (err) => {
    if (Date.now() - fallbackWarned > 10_000) {
      fallbackWarned = Date.now();
      logger.warn({ err: (err as Error).message }, 'Redis unavailable: rate limits fall back to this process');
    }
  });
  const { current: encryptionKey, all: decryptionKeys } = await resolveEncryptionKeys(orm, config, logger);
  // Give Redis a moment to connect so the first requests are counted in Redis, not in the
  // per-process fallback; an unreachable Redis does not hold the start-up back.
  await Promise.all([untilReady(redis, 2_000), untilReady(producerConnection, 2_000)]);
  const producer = new Producer(producerConnection, config.queuePrefix, config.webhookRetryDelaysMs);
  return {
    config, orm, readOrm, logger, redis, producer, throttle: new SharedThrottle(redis, config.queuePrefix), keyStore, rateLimiter, encryptionKey, decryptionKeys,
    formCache, submissionWriter: new SubmissionWriter(orm, logger),
    files: {
      store: createFileStore(config),
      links: FileLinks.fromEncryptionKey(encryptionKey, config.publicUrl, config.fileUrlTtlSeconds),
    },
    forgetForm(formId: string) {
      formCache.invalidate(formId);
      publishInvalidation(redis, `form:${formId}`).catch(() => {
        // Redis down: other processes' entries expire with the cache TTL; submissions are safe anyway.
      });
    },
    async close() {
      await producer.close().catch(() => {});
      for (const client of [redis, producerConnection, subscriber]) client.disconnect();
      await orm.close();
      if (readOrm !== orm) await readOrm.close();
    },
  };
}
