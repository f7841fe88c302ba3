import type { Queue } from 'bullmq';
import type { AppContext } from '../../app';
import type { Em } from '../../db/orm';
import { jobIds } from '../../queues/catalogue';
import { IDEMPOTENCY_TTL_HOURS, SUBMISSION_CREATED_TOPIC, SUBMISSION_DELETED_TOPIC } from '../submissions/store';
import { AUTO_DISABLE_AFTER_MS } from '../webhooks/policy';

/** Rows younger than this are left to the enqueue that follows their own commit. */
const RELAY_MIN_AGE_SECONDS = 5;
const RELAY_BATCH = 500;
/** Longer than a fan-out's own retries take (10 attempts, exponential from 1 s: about 9 minutes). */
const FAILED_FANOUT_RETRY_AFTER_MINUTES = 30;

/** The fan-out job of each outbox topic; its id derives from the submission. */
const FANOUT_OF_TOPIC = {
  [SUBMISSION_CREATED_TOPIC]: { name: 'fanout', jobId: jobIds.fanout },
  [SUBMISSION_DELETED_TOPIC]: { name: 'fanout-deletion', jobId: jobIds.fanoutDeletion },
} as const;
type OutboxTopic = keyof typeof FANOUT_OF_TOPIC;

/**
 * Hands outbox rows that never reached the queue (Redis was down, or the process died between
 * commit and enqueue) to the fan-out. Rows stay unprocessed until the fan-out marks them; job ids
 * derive from the submission, so a row relayed twice is queued once. `skip locked` lets several
 * relays run without waiting on each other.
 */
export async function relayOutbox(app: AppContext): Promise<number> {
  return app.orm.em.fork().transactional(async (tx) => {
    const rows = await tx.execute(
      `select id::text as id, topic, payload, created_at < now() - interval '${FAILED_FANOUT_RETRY_AFTER_MINUTES} minutes' as stale from outbox
        where processed_at is null and topic in (?, ?) and created_at < now() - interval '${RELAY_MIN_AGE_SECONDS} seconds'
        order by created_at limit ${RELAY_BATCH} for update skip locked`,
      [SUBMISSION_CREATED_TOPIC, SUBMISSION_DELETED_TOPIC],
    );
    if (rows.length === 0) return 0;
    const queue = app.producer.queue('submissions');
    const jobIdOf = (row: any) => FANOUT_OF_TOPIC[row.topic as OutboxTopic].jobId(row.payload.submissionId);
    await queue.addBulk(rows.map((row: any) => ({
      name: FANOUT_OF_TOPIC[row.topic as OutboxTopic].name,
      data: { submissionId: row.payload.submissionId, outboxId: row.id },
      opts: { jobId: jobIdOf(row) },
    })));
    await retryFailedFanouts(queue, rows.filter((row: any) => row.stale).map(jobIdOf));
    return rows.length;
  });
}

/**
 * A fan-out that used up its attempts (say, PostgreSQL was away for longer than its backoff) keeps
 * its job id in the failed set, where adding it again does nothing: the relay retries it instead,
 * for rows that have waited long enough that this is not a job still being retried.
 */
async function retryFailedFanouts(queue: Queue, fanoutJobIds: string[]): Promise<void> {
  for (const jobId of fanoutJobIds) {
    const job = await queue.getJob(jobId);
    if (job && (await job.isFailed())) await job.retry('failed');
  }
}

/** Submissions per organization, form and UTC month, recomputed for this month and the last. */
export async function rollupUsage(em: Em): Promise<void> {
  await em.execute(`
    insert into usage_rollups as r (organization_id, form_id, month, submissions, updated_at)
    select organization_id, form_id, to_char(created_at at time zone 'UTC', 'YYYY-MM'), count(*), now()
      from submissions
     where created_at >= date_trunc('month', now() at time zone 'UTC') at time zone 'UTC' - interval '1 month'
     group by 1, 2, 3
    on conflict (organization_id, form_id, month)
    do update set submissions = excluded.submissions, updated_at = now()
     where r.submissions <> excluded.submissions`);
}

export interface MaintenanceReport {
  idempotencyKeysDeleted: number;
  webhooksDisabled: number;
}

/** Expired idempotency records go; webhooks failing for more than 5 days are disabled. */
export async function runMaintenance(em: Em): Promise<MaintenanceReport> {
  const deleted = await em.execute(
    `delete from idempotency_keys where created_at < now() - interval '${IDEMPOTENCY_TTL_HOURS} hours'`, [], 'run',
  );
  const disabled = await em.execute(
    `update webhooks set enabled = false, updated_at = now()
      where enabled and failing_since < now() - (? * interval '1 millisecond')`, [AUTO_DISABLE_AFTER_MS], 'run',
  );
  return { idempotencyKeysDeleted: (deleted as any).affectedRows, webhooksDisabled: (disabled as any).affectedRows };
}
