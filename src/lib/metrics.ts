import client from 'prom-client';

/** One registry per process; every metric the service exports is declared here. */
export const registry = new client.Registry();
client.collectDefaultMetrics({ register: registry, prefix: 'formservice_' });

export const metrics = {
  httpDuration: new client.Histogram({
    name: 'formservice_http_request_duration_seconds',
    help: 'HTTP request duration by route and status',
    labelNames: ['method', 'route', 'status'] as const,
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5],
    registers: [registry],
  }),
  queueJobs: new client.Gauge({
    name: 'formservice_queue_jobs',
    help: 'Jobs per queue and state (sampled)',
    labelNames: ['queue', 'state'] as const,
    registers: [registry],
  }),
  queueOldestWaitingAge: new client.Gauge({
    name: 'formservice_queue_oldest_waiting_age_seconds',
    help: 'Seconds the longest-due waiting job of each queue has waited since it became due, a throttled or paused wait not counted (sampled)',
    labelNames: ['queue'] as const,
    registers: [registry],
  }),
  queueWorkers: new client.Gauge({
    name: 'formservice_queue_workers',
    help: 'Worker connections consuming each queue, as Redis sees them (sampled)',
    labelNames: ['queue'] as const,
    registers: [registry],
  }),
  jobDuration: new client.Histogram({
    name: 'formservice_job_duration_seconds',
    help: 'Job processing time by queue and result',
    labelNames: ['queue', 'result'] as const,
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
    registers: [registry],
  }),
  webhookDeliveries: new client.Counter({
    name: 'formservice_webhook_deliveries_total',
    help: 'Webhook delivery attempts by result',
    labelNames: ['result'] as const,
    registers: [registry],
  }),
  webhookDeliveriesThrottled: new client.Gauge({
    name: 'formservice_webhook_deliveries_throttled',
    help: 'Webhook deliveries waiting on their webhook\'s throttleRate or a receiver\'s Retry-After, across all workers (sampled from Redis; aggregate with max)',
    registers: [registry],
  }),
  webhookThrottleWaits: new client.Counter({
    name: 'formservice_webhook_throttle_waits_total',
    help: 'Webhook deliveries held back without an attempt, by reason (rate: throttleRate, paused: a 429 Retry-After)',
    labelNames: ['reason'] as const,
    registers: [registry],
  }),
  outboxBacklog: new client.Gauge({
    name: 'formservice_outbox_backlog',
    help: 'Outbox rows not yet handed to the queue (sampled)',
    registers: [registry],
  }),
  rateLimitRejections: new client.Counter({
    name: 'formservice_rate_limit_rejections_total',
    help: 'Requests refused with 429',
    labelNames: ['scope'] as const,
    registers: [registry],
  }),
  quotaRejections: new client.Counter({
    name: 'formservice_quota_rejections_total',
    help: 'Submissions refused because the monthly quota was reached',
    registers: [registry],
  }),
  submissions: new client.Counter({
    name: 'formservice_submissions_total',
    help: 'Submissions stored',
    labelNames: ['source'] as const,
    registers: [registry],
  }),
  paymentRefunds: new client.Counter({
    name: 'formservice_payment_refunds_total',
    help: 'Payments refunded because no stored submission holds them',
    labelNames: ['reason'] as const,
    registers: [registry],
  }),
  replicaReadFailures: new client.Counter({
    name: 'formservice_replica_read_failures_total',
    help: 'Reads that may lag which the read replica failed, each then tried once on the primary, by reason (unavailable, cancelled, conflict, behind)',
    labelNames: ['reason'] as const,
    registers: [registry],
  }),
  dayMarkFailures: new client.Counter({
    name: 'formservice_day_mark_failures_total',
    help: 'Busy form-days whose day marks a run of the builder could not extend (the run went on with the other days)',
    registers: [registry],
  }),
  submissionGroupSize: new client.Histogram({
    name: 'formservice_submission_store_group_size',
    help: 'Single submissions of concurrent requests stored together in one statement and commit',
    buckets: [1, 2, 4, 8, 16, 32, 64],
    registers: [registry],
  }),
};

/**
 * Series of a closed label set exist at 0 from the start: a series that first appears at 1 is an
 * increase that rate() and increase() never see, so a process's first refund or failed delivery
 * would not reach an alert.
 */
function exportZeros(): void {
  for (const result of ['succeeded', 'failed', 'retrying', 'disabled']) metrics.webhookDeliveries.inc({ result }, 0);
  for (const reason of ['refused_submission', 'abandoned']) metrics.paymentRefunds.inc({ reason }, 0);
  for (const source of ['api', 'public']) metrics.submissions.inc({ source }, 0);
  for (const scope of ['api', 'public']) metrics.rateLimitRejections.inc({ scope }, 0);
  for (const reason of ['unavailable', 'cancelled', 'conflict', 'behind']) metrics.replicaReadFailures.inc({ reason }, 0);
}
exportZeros();

/** The job series of the queues a worker process consumes, at 0 until its first job (see exportZeros). */
export function exportJobZeros(queues: readonly string[]): void {
  for (const queue of queues) {
    for (const result of ['completed', 'failed']) metrics.jobDuration.zero({ queue, result });
  }
}
