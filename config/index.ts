import Joi from 'joi';
import { parseTrustedProxies } from '../src/lib/client-ip';
import { parseClusterNodes, queuePrefixFor } from './redis-address';

/** Standard Webhooks schedule: 5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 14 h, 20 h, 24 h. */
const DEFAULT_RETRY_DELAYS_MS = [5e3, 3e5, 18e5, 72e5, 18e6, 36e6, 504e5, 72e6, 864e5];

export interface Config {
  host: string;
  port: number;
  databaseUrl: string;
  /** A streaming replica for reads that may lag; null: the primary serves them. */
  databaseReadUrl: string | null;
  redisUrl: string;
  /** Seed nodes of a Redis Cluster; empty: the single node of `redisUrl`. */
  redisClusterNodes: Array<{ host: string; port: number }>;
  publicUrl: string;
  webhookAllowPrivateTargets: boolean;
  webhookRetryDelaysMs: number[];
  webhookTimeoutMs: number;
  turnstileSiteKey: string | null;
  turnstileSecretKey: string | null;
  turnstileVerifyUrl: string;
  turnstileScriptUrl: string;
  stripeSecretKey: string | null;
  stripeApiBase: string;
  /** `pk_…`; with the secret key it enables payments on the hosted page. */
  stripePublishableKey: string | null;
  /** The Stripe.js script the hosted page loads. */
  stripeJsUrl: string;
  /** A succeeded intent the service made and no submission claimed is refunded once this old. */
  paymentAbandonHours: number;
  hubspotApiBase: string;
  publicRateLimitGet: number;
  publicRateLimitPost: number;
  /** Public requests per minute per client IP that name a missing or unpublished form. */
  publicRateLimitMisses: number;
  /** When set, /metrics (API and worker ports) requires `Authorization: Bearer <token>`. */
  metricsToken: string | null;
  adminToken: string | null;
  encryptionKey: Buffer | null;
  /** Keys that still open values sealed before a rotation; never used to seal. */
  previousEncryptionKeys: Buffer[];
  logLevel: string;
  metricsPort: number;
  workerConcurrency: number;
  /**
   * Deliveries in flight per webhooks worker process. A delivery mostly waits (on the receiver, on
   * PostgreSQL), so by Little's law a worker sends at most this many per receiver round trip:
   * 1,000/s to receivers answering in 50 ms takes 50.
   */
  webhookWorkerConcurrency: number;
  queuePrefix: string;
  dbPoolMax: number;
  /** Whole months of submissions kept before the current one; null: kept forever. */
  submissionRetentionMonths: number | null;
  /** false for PgBouncer in transaction mode and other poolers without prepared-statement support. */
  dbPreparedStatements: boolean;
  workerLockMs: number;
  /** How often every process samples the queue gauges and the outbox backlog it exports. */
  queueSampleIntervalMs: number;
  /** Proxies whose X-Forwarded-For is believed (addresses or CIDRs); empty: none. */
  trustedProxies: string[];
  /** PostgreSQL statement, lock-wait and idle-in-transaction limits in ms (0: none). */
  dbTimeouts: { statementMs: number; lockMs: number; idleInTransactionMs: number };
  /** The statement limit of worker-only processes, whose jobs (maintenance, roll-ups) answer no client. */
  workerDbStatementTimeoutMs: number;
  /** Ended deliveries, CRM syncs and processed outbox rows older than this many days are removed. */
  retentionDays: number;
  /** The day marks (src/README.md, day counts): a mark every `every` rows of a form's day of `minRows` or more, built `marginMs` behind the clock. */
  dayMarks: { every: number; minRows: number; marginMs: number };
  /** How often the sweep looks for owed deliveries and syncs that have no live job. */
  owedSweepIntervalMs: number;
  /** Idle keep-alive connections stay open this long: longer than a load balancer's idle timeout. */
  httpKeepAliveTimeoutMs: number;
  /** Time allowed for a request's headers; above the keep-alive timeout. */
  httpHeadersTimeoutMs: number;
  /** Where uploaded files live: `local` (under fileStorageDir, one machine only) or `s3`. */
  fileStorage: 'local' | 's3';
  fileStorageDir: string;
  /** The S3-compatible store when fileStorage is `s3`; null otherwise. */
  s3: S3Settings | null;
  /** The largest file any field may accept. */
  uploadMaxBytes: number;
  /** How long a download link stays valid. */
  fileUrlTtlSeconds: number;
}

export interface S3Settings {
  /** null: AWS's own endpoint for the region. */
  endpoint: string | null;
  region: string;
  bucket: string;
  accessKeyId: string;
  secretAccessKey: string;
  forcePathStyle: boolean;
}

const delayList = Joi.string()
  .pattern(/^\s*\d+\s*(,\s*\d+\s*)*$/)
  .message('"WEBHOOK_RETRY_DELAYS_MS" must be a comma-separated list of non-negative integers');

const base64Key = Joi.string().custom((value: string) => {
  const key = Buffer.from(value, 'base64');
  if (key.length !== 32) throw new Error('must be 32 bytes encoded in base64');
  return value;
});

const url = Joi.string().uri({ scheme: ['http', 'https'] });

const schema = Joi.object({
  HOST: Joi.string().default('0.0.0.0'),
  PORT: Joi.number().integer().min(0).max(65535).default(3000),
  DATABASE_URL: Joi.string().uri({ scheme: ['postgres', 'postgresql'] })
    .default('postgres://postgres@127.0.0.1:5432/formservice'),
  DATABASE_READ_URL: Joi.string().uri({ scheme: ['postgres', 'postgresql'] }),
  REDIS_URL: Joi.string().uri({ scheme: ['redis', 'rediss'] }).default('redis://127.0.0.1:6379'),
  REDIS_CLUSTER_NODES: Joi.string().custom((value: string) => {
    if (!parseClusterNodes(value).length) throw new Error('must name at least one host:port');
    return value;
  }),
  PUBLIC_URL: url,
  WEBHOOK_ALLOW_PRIVATE_TARGETS: Joi.boolean().truthy('1').falsy('0').default(false),
  WEBHOOK_RETRY_DELAYS_MS: delayList,
  WEBHOOK_TIMEOUT_MS: Joi.number().integer().min(100).max(120_000).default(10_000),
  TURNSTILE_SITE_KEY: Joi.string(),
  TURNSTILE_SECRET_KEY: Joi.string(),
  TURNSTILE_VERIFY_URL: url.default('https://challenges.cloudflare.com/turnstile/v0/siteverify'),
  TURNSTILE_SCRIPT_URL: url.default('https://challenges.cloudflare.com/turnstile/v0/api.js'),
  STRIPE_SECRET_KEY: Joi.string(),
  STRIPE_API_BASE: url.default('https://api.stripe.com'),
  STRIPE_PUBLISHABLE_KEY: Joi.string().pattern(/^pk_[A-Za-z0-9_]+$/),
  STRIPE_JS_URL: url.default('https://js.stripe.com/v3/'),
  PAYMENT_ABANDON_HOURS: Joi.number().integer().min(1).max(24 * 30).default(24),
  HUBSPOT_API_BASE: url.default('https://api.hubapi.com'),
  PUBLIC_RATE_LIMIT_GET: Joi.number().integer().min(1).default(120),
  PUBLIC_RATE_LIMIT_POST: Joi.number().integer().min(1).default(20),
  PUBLIC_RATE_LIMIT_MISSES: Joi.number().integer().min(1).default(30),
  METRICS_TOKEN: Joi.string().min(16),
  ADMIN_TOKEN: Joi.string().min(16),
  ENCRYPTION_KEY: base64Key,
  ENCRYPTION_KEYS_PREVIOUS: Joi.string().custom((value: string) => {
    for (const entry of value.split(',').filter((e) => e.trim())) {
      if (Buffer.from(entry.trim(), 'base64').length !== 32) throw new Error('every entry must be 32 bytes encoded in base64');
    }
    return value;
  }),
  LOG_LEVEL: Joi.string().valid('fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent').default('info'),
  METRICS_PORT: Joi.number().integer().min(0).max(65535).default(9100),
  WORKER_CONCURRENCY: Joi.number().integer().min(1).max(1000).default(10),
  WEBHOOK_WORKER_CONCURRENCY: Joi.number().integer().min(1).max(1000).default(50),
  QUEUE_PREFIX: Joi.string().pattern(/^[^:]+$/).default('bull'),
  SUBMISSION_RETENTION_MONTHS: Joi.number().integer().min(1).max(1200),
  DB_POOL_MAX: Joi.number().integer().min(1).max(200).default(10),
  DB_PREPARED_STATEMENTS: Joi.boolean().truthy('1').falsy('0').default(true),
  WORKER_LOCK_MS: Joi.number().integer().min(500).max(600_000).default(30_000),
  QUEUE_SAMPLE_INTERVAL_MS: Joi.number().integer().min(100).max(600_000).default(10_000),
  TRUSTED_PROXIES: Joi.string().custom((value: string) => {
    parseTrustedProxies(value.split(',').filter((entry) => entry.trim()));
    return value;
  }),
  DB_STATEMENT_TIMEOUT_MS: Joi.number().integer().min(0).max(3_600_000).default(3_000),
  WORKER_DB_STATEMENT_TIMEOUT_MS: Joi.number().integer().min(0).max(3_600_000).default(60_000),
  DB_LOCK_TIMEOUT_MS: Joi.number().integer().min(0).max(3_600_000).default(2_000),
  DB_IDLE_IN_TRANSACTION_TIMEOUT_MS: Joi.number().integer().min(0).max(3_600_000).default(15_000),
  RETENTION_DAYS: Joi.number().integer().min(1).max(3650).default(30),
  DAY_MARK_EVERY: Joi.number().integer().min(2).max(1_000_000).default(1_000),
  DAY_MARK_MIN_ROWS: Joi.number().integer().min(2).max(1_000_000_000).default(20_000),
  DAY_MARKS_MARGIN_MS: Joi.number().integer().min(0).max(86_400_000).default(600_000),
  OWED_SWEEP_INTERVAL_MS: Joi.number().integer().min(100).max(3_600_000).default(30_000),
  // Read by the OpenTelemetry SDK (src/lib/tracing.ts), checked here so a typo stops the process.
  OTEL_EXPORTER_OTLP_ENDPOINT: url,
  OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: url,
  OTEL_EXPORTER_OTLP_PROTOCOL: Joi.string().valid('http/protobuf', 'http/json', 'grpc'),
  OTEL_TRACES_SAMPLER: Joi.string().valid(
    'always_on', 'always_off', 'traceidratio', 'parentbased_always_on', 'parentbased_always_off', 'parentbased_traceidratio',
  ),
  OTEL_TRACES_SAMPLER_ARG: Joi.number().min(0).max(1),
  HTTP_KEEP_ALIVE_TIMEOUT_MS: Joi.number().integer().min(1_000).max(3_600_000).default(65_000),
  HTTP_HEADERS_TIMEOUT_MS: Joi.number().integer().min(1_000).max(3_600_000)
    .greater(Joi.ref('HTTP_KEEP_ALIVE_TIMEOUT_MS')).default((parent) => parent.HTTP_KEEP_ALIVE_TIMEOUT_MS + 1_000)
    .messages({ 'number.greater': '"HTTP_HEADERS_TIMEOUT_MS" must be greater than HTTP_KEEP_ALIVE_TIMEOUT_MS' }),
  FILE_STORAGE: Joi.string().valid('local', 's3').default('local'),
  FILE_STORAGE_DIR: Joi.string().default('./data/files'),
  S3_ENDPOINT: url,
  S3_REGION: Joi.string().default('us-east-1'),
  S3_BUCKET: Joi.string().when('FILE_STORAGE', { is: 's3', then: Joi.required() }),
  S3_ACCESS_KEY_ID: Joi.string().when('FILE_STORAGE', { is: 's3', then: Joi.required() }),
  S3_SECRET_ACCESS_KEY: Joi.string().when('FILE_STORAGE', { is: 's3', then: Joi.required() }),
  S3_FORCE_PATH_STYLE: Joi.boolean().truthy('1').falsy('0').default(false),
  UPLOAD_MAX_BYTES: Joi.number().integer().min(1).max(5 * 1024 ** 3).default(26_214_400),
  FILE_URL_TTL_SECONDS: Joi.number().integer().min(1).max(7 * 24 * 3600).default(3600),
}).unknown(true);

export class ConfigError extends Error {}

/** Reads and validates the environment once; a wrong value names its variable. */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): Readonly<Config> {
  const cleaned = Object.fromEntries(Object.entries(env).filter(([, v]) => v !== undefined && v !== ''));
  const { error, value: v } = schema.validate(cleaned, { abortEarly: true, convert: true });
  if (error) throw new ConfigError(`Invalid configuration: ${error.message}`);
  return Object.freeze({
    host: v.HOST,
    port: v.PORT,
    databaseUrl: v.DATABASE_URL,
    databaseReadUrl: v.DATABASE_READ_URL ?? null,
    redisUrl: v.REDIS_URL,
    redisClusterNodes: v.REDIS_CLUSTER_NODES ? parseClusterNodes(v.REDIS_CLUSTER_NODES) : [],
    publicUrl: (v.PUBLIC_URL ?? `http://localhost:${v.PORT}`).replace(/\/+$/, ''),
    webhookAllowPrivateTargets: v.WEBHOOK_ALLOW_PRIVATE_TARGETS,
    webhookRetryDelaysMs: v.WEBHOOK_RETRY_DELAYS_MS
      ? String(v.WEBHOOK_RETRY_DELAYS_MS).split(',').map((s) => Number(s.trim()))
      : DEFAULT_RETRY_DELAYS_MS,
    webhookTimeoutMs: v.WEBHOOK_TIMEOUT_MS,
    turnstileSiteKey: v.TURNSTILE_SITE_KEY ?? null,
    turnstileSecretKey: v.TURNSTILE_SECRET_KEY ?? null,
    turnstileVerifyUrl: v.TURNSTILE_VERIFY_URL,
    turnstileScriptUrl: v.TURNSTILE_SCRIPT_URL,
    stripeSecretKey: v.STRIPE_SECRET_KEY ?? null,
    stripeApiBase: v.STRIPE_API_BASE.replace(/\/+$/, ''),
    stripePublishableKey: v.STRIPE_PUBLISHABLE_KEY ?? null,
    stripeJsUrl: v.STRIPE_JS_URL,
    paymentAbandonHours: v.PAYMENT_ABANDON_HOURS,
    hubspotApiBase: v.HUBSPOT_API_BASE.replace(/\/+$/, ''),
    publicRateLimitGet: v.PUBLIC_RATE_LIMIT_GET,
    publicRateLimitPost: v.PUBLIC_RATE_LIMIT_POST,
    publicRateLimitMisses: v.PUBLIC_RATE_LIMIT_MISSES,
    metricsToken: v.METRICS_TOKEN ?? null,
    adminToken: v.ADMIN_TOKEN ?? null,
    encryptionKey: v.ENCRYPTION_KEY ? Buffer.from(v.ENCRYPTION_KEY, 'base64') : null,
    previousEncryptionKeys: v.ENCRYPTION_KEYS_PREVIOUS
      ? String(v.ENCRYPTION_KEYS_PREVIOUS).split(',').filter((e) => e.trim()).map((e) => Buffer.from(e.trim(), 'base64'))
      : [],
    logLevel: v.LOG_LEVEL,
    metricsPort: v.METRICS_PORT,
    workerConcurrency: v.WORKER_CONCURRENCY,
    webhookWorkerConcurrency: v.WEBHOOK_WORKER_CONCURRENCY,
    queuePrefix: queuePrefixFor(v.QUEUE_PREFIX, !!v.REDIS_CLUSTER_NODES),
    dbPoolMax: v.DB_POOL_MAX,
    submissionRetentionMonths: v.SUBMISSION_RETENTION_MONTHS ?? null,
    dbPreparedStatements: v.DB_PREPARED_STATEMENTS,
    workerLockMs: v.WORKER_LOCK_MS,
    queueSampleIntervalMs: v.QUEUE_SAMPLE_INTERVAL_MS,
    trustedProxies: v.TRUSTED_PROXIES ? String(v.TRUSTED_PROXIES).split(',').map((e) => e.trim()).filter(Boolean) : [],
    dbTimeouts: {
      statementMs: v.DB_STATEMENT_TIMEOUT_MS, lockMs: v.DB_LOCK_TIMEOUT_MS, idleInTransactionMs: v.DB_IDLE_IN_TRANSACTION_TIMEOUT_MS,
    },
    workerDbStatementTimeoutMs: v.WORKER_DB_STATEMENT_TIMEOUT_MS,
    retentionDays: v.RETENTION_DAYS,
    dayMarks: { every: v.DAY_MARK_EVERY, minRows: v.DAY_MARK_MIN_ROWS, marginMs: v.DAY_MARKS_MARGIN_MS },
    owedSweepIntervalMs: v.OWED_SWEEP_INTERVAL_MS,
    httpKeepAliveTimeoutMs: v.HTTP_KEEP_ALIVE_TIMEOUT_MS,
    httpHeadersTimeoutMs: v.HTTP_HEADERS_TIMEOUT_MS,
    fileStorage: v.FILE_STORAGE,
    fileStorageDir: v.FILE_STORAGE_DIR,
    s3: v.FILE_STORAGE === 's3'
      ? {
        endpoint: v.S3_ENDPOINT ?? null, region: v.S3_REGION, bucket: v.S3_BUCKET, accessKeyId: v.S3_ACCESS_KEY_ID,
        secretAccessKey: v.S3_SECRET_ACCESS_KEY, forcePathStyle: v.S3_FORCE_PATH_STYLE,
      }
      : null,
    uploadMaxBytes: v.UPLOAD_MAX_BYTES,
    fileUrlTtlSeconds: v.FILE_URL_TTL_SECONDS,
  });
}
