import { expect } from 'chai';
import { ConfigError, loadConfig } from '../../config';

describe('configuration', () => {
  it('applies the contract\'s defaults', () => {
    const config = loadConfig({});
    expect(config).to.include({
      host: '0.0.0.0', port: 3000, databaseUrl: 'postgres://postgres@127.0.0.1:5432/formservice',
      redisUrl: 'redis://127.0.0.1:6379', publicUrl: 'http://localhost:3000', webhookAllowPrivateTargets: false,
      webhookTimeoutMs: 10_000, publicRateLimitGet: 120, publicRateLimitPost: 20, logLevel: 'info', adminToken: null,
      stripeApiBase: 'https://api.stripe.com', hubspotApiBase: 'https://api.hubapi.com',
      turnstileVerifyUrl: 'https://challenges.cloudflare.com/turnstile/v0/siteverify',
    });
    expect(config.webhookRetryDelaysMs).to.deep.equal([5000, 300000, 1800000, 7200000, 18000000, 36000000, 50400000, 72000000, 86400000]);
    expect(Object.isFrozen(config)).to.equal(true);
    expect(config).to.include({ retentionDays: 30, owedSweepIntervalMs: 30_000, httpKeepAliveTimeoutMs: 65_000, httpHeadersTimeoutMs: 66_000 });
    expect(config).to.include({ workerConcurrency: 10, webhookWorkerConcurrency: 50 });
    expect(config).to.include({ stripePublishableKey: null, stripeJsUrl: 'https://js.stripe.com/v3/', paymentAbandonHours: 24 });
    expect(config.dbTimeouts).to.deep.equal({ statementMs: 3_000, lockMs: 2_000, idleInTransactionMs: 15_000 });
  });

  it('stores files locally by default, and needs a bucket and keys for s3', () => {
    const config = loadConfig({});
    expect(config).to.include({ fileStorage: 'local', fileStorageDir: './data/files', uploadMaxBytes: 26_214_400, fileUrlTtlSeconds: 3600, s3: null });
    expect(() => loadConfig({ FILE_STORAGE: 's3' })).to.throw(ConfigError, 'S3_BUCKET');
    expect(() => loadConfig({ FILE_STORAGE: 's3', S3_BUCKET: 'b' })).to.throw(ConfigError, 'S3_ACCESS_KEY_ID');
    expect(() => loadConfig({ FILE_STORAGE: 'ftp' })).to.throw(ConfigError, 'FILE_STORAGE');
    const s3 = loadConfig({ FILE_STORAGE: 's3', S3_BUCKET: 'b', S3_ACCESS_KEY_ID: 'k', S3_SECRET_ACCESS_KEY: 's', S3_FORCE_PATH_STYLE: 'true' });
    expect(s3.s3).to.deep.equal({ endpoint: null, region: 'us-east-1', bucket: 'b', accessKeyId: 'k', secretAccessKey: 's', forcePathStyle: true });
  });

  it('keeps the headers timeout above the keep-alive timeout', () => {
    expect(loadConfig({ HTTP_KEEP_ALIVE_TIMEOUT_MS: '120000' }).httpHeadersTimeoutMs).to.equal(121_000);
    expect(() => loadConfig({ HTTP_KEEP_ALIVE_TIMEOUT_MS: '65000', HTTP_HEADERS_TIMEOUT_MS: '60000' }))
      .to.throw(ConfigError, 'HTTP_HEADERS_TIMEOUT_MS');
  });

  it('derives PUBLIC_URL from PORT and parses lists and booleans', () => {
    const config = loadConfig({ PORT: '8080', WEBHOOK_RETRY_DELAYS_MS: '100, 200,300', WEBHOOK_ALLOW_PRIVATE_TARGETS: 'true' });
    expect(config.publicUrl).to.equal('http://localhost:8080');
    expect(config.webhookRetryDelaysMs).to.deep.equal([100, 200, 300]);
    expect(config.webhookAllowPrivateTargets).to.equal(true);
  });

  it('reads Redis Cluster seeds and puts the queue prefix in a hash tag on a Cluster', () => {
    const single = loadConfig({ QUEUE_PREFIX: 'fs' });
    expect(single.redisClusterNodes).to.deep.equal([]);
    expect(single.queuePrefix).to.equal('fs');
    expect(single.dbPreparedStatements).to.equal(true);
    const cluster = loadConfig({ REDIS_CLUSTER_NODES: '10.0.0.1:7000, redis-b:7001,[::1]:7002', QUEUE_PREFIX: 'fs', DB_PREPARED_STATEMENTS: 'false' });
    expect(cluster.redisClusterNodes).to.deep.equal([
      { host: '10.0.0.1', port: 7000 }, { host: 'redis-b', port: 7001 }, { host: '::1', port: 7002 },
    ]);
    expect(cluster.queuePrefix).to.equal('{fs}');
    expect(cluster.dbPreparedStatements).to.equal(false);
    expect(loadConfig({ REDIS_CLUSTER_NODES: 'r:7000', QUEUE_PREFIX: 'app{fs}' }).queuePrefix).to.equal('app{fs}');
  });

  const invalid: Array<[string, string]> = [
    ['PORT', 'eighty'], ['DATABASE_URL', 'mysql://x'], ['REDIS_URL', 'nope'], ['WEBHOOK_RETRY_DELAYS_MS', '1,two'],
    ['WEBHOOK_TIMEOUT_MS', '-5'], ['ENCRYPTION_KEY', 'c2hvcnQ='], ['LOG_LEVEL', 'loud'], ['PUBLIC_RATE_LIMIT_POST', '0'],
    ['WEBHOOK_ALLOW_PRIVATE_TARGETS', 'maybe'], ['STRIPE_API_BASE', 'ftp://stripe'], ['TRUSTED_PROXIES', '10.0.0.0/8, proxy.local'],
    ['RETENTION_DAYS', '0'], ['DB_STATEMENT_TIMEOUT_MS', '-1'], ['OWED_SWEEP_INTERVAL_MS', 'often'],
    ['REDIS_CLUSTER_NODES', 'redis-a,redis-b:6379'], ['REDIS_CLUSTER_NODES', '127.0.0.1:70000'], ['DB_PREPARED_STATEMENTS', 'sometimes'],
    ['STRIPE_PUBLISHABLE_KEY', 'sk_live_secret'], ['STRIPE_JS_URL', 'javascript:alert(1)'], ['PAYMENT_ABANDON_HOURS', '0'],
    ['OTEL_EXPORTER_OTLP_ENDPOINT', 'collector:4318'], ['OTEL_EXPORTER_OTLP_PROTOCOL', 'http/xml'], ['OTEL_TRACES_SAMPLER_ARG', '2'],
  ];
  for (const [name, value] of invalid) {
    it(`stops on ${name}=${value} with a message naming the variable`, () => {
      expect(() => loadConfig({ [name]: value })).to.throw(ConfigError, name);
    });
  }
});
