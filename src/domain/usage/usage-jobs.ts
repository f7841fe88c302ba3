import type { AppContext } from '../../app';
import type { Em } from '../../db/orm';
import { jobIds } from '../../queues/catalogue';
import { IDEMPOTENCY_TTL_HOURS, SUBMISSION_CREATED_TOPIC, SUBMISSION_DELETED_TOPIC } from '../submissions/store';
import { AUTO_DISABLE_AFTER_MS, maxAttempts } from '../webhooks/policy';

const RELAY_BATCH = 500;
/** A row the relay handed over is looked at again after this, doubling each time up to the cap. */
const RELAY_BACKOFF_FIRST_SECONDS = 10;
const RELAY_BACKOFF_MAX_SECONDS = 1800;

interface RelayRow {
  id: string;
  topic: OutboxTopic;
  submission_id: string;
  relay_attempts: number;
}

/** The fan-out job of each outbox topic; its id derives from the submission. */
const FANOUT_OF_TOPIC = {
  [SUBMISSION_CREATED_TOPIC]: { name: 'fanout', jobId: jobIds.fanout },
  [SUBMISSION_DELETED_TOPIC]: { name: 'fanout-deletion', jobId: jobIds.fanoutDeletion },
} as const;
type OutboxTopic = keyof typeof FANOUT_OF_TOPIC;

/**
 * Hands outbox rows that never reached the queue (Redis was down or forgot, or the process died
 * between commit and enqueue) to the fan-out. Rows stay unprocessed until the fan-out marks them;
 * each relay of a row pushes its next relay time back (doubling), so rows whose fan-out keeps
 * failing never hold back newer ones. A row's first relay adds its job in bulk (a job id derived
 * from the submission makes a double add harmless); later ones re-queue it one by one, which also
 * replaces a fan-out that used up its attempts. `skip locked` lets several relays run at once.
 */
export async function relayOutbox(app: AppContext): Promise<number> {
  return app.orm.em.fork().transactional(async (tx) => {
    const rows: RelayRow[] = await tx.execute(
      `select id::text as id, topic, payload->>'submissionId' as submission_id, relay_attempts from outbox
        where processed_at is null and topic in (?, ?) and next_relay_at <= now()
        order by next_relay_at limit ${RELAY_BATCH} for update skip locked`,
      [SUBMISSION_CREATED_TOPIC, SUBMISSION_DELETED_TOPIC],
    );
    if (rows.length === 0) return 0;
    const jobOf = (row: RelayRow) => ({
      name: FANOUT_OF_TOPIC[row.topic].name,
      data: { submissionId: row.submission_id, outboxId: row.id },
      opts: { jobId: FANOUT_OF_TOPIC[row.topic].jobId(row.submission_id) },
    });
    await app.producer.addBulk('submissions', rows.filter((row) => row.relay_attempts === 0).map(jobOf));
    for (const row of rows.filter((r) => r.relay_attempts > 0)) {
      const { name, data, opts } = jobOf(row);
      await app.producer.requeue('submissions', name, data, opts);
    }
    await tx.execute(
      `update outbox set relay_attempts = relay_attempts + 1,
              next_relay_at = now() + least(${RELAY_BACKOFF_FIRST_SECONDS} * power(2, least(relay_attempts, 20)), ${RELAY_BACKOFF_MAX_SECONDS}) * interval '1 second'
        where id = any(string_to_array(?, ',')::bigint[])`,
      [rows.map((row) => row.id).join(',')],
    );
    return rows.length;
  });
}

const SWEEP_BATCH = 500;

export interface SweepReport {
  deliveriesQueued: number;
  syncsQueued: number;
}

/**
 * The database decides what is still owed: a pending delivery or sync whose next attempt is overdue
 * by more than `graceMs` is queued again under its own job id, unless a live job holds that id. So
 * an emptied Redis, a job that stalled for good, or an enqueue lost after a commit all end in an
 * attempt, with the same delivery id. Bounded per run, oldest first.
 */
export async function sweepOwed(app: AppContext, graceMs = app.config.owedSweepIntervalMs): Promise<SweepReport> {
  const em = app.orm.em.fork();
  const attempts = maxAttempts(app.config.webhookRetryDelaysMs);
  const overdue = (table: string) => em.execute<Array<{ id: string }>>(
    `select id from ${table} where status = 'pending' and next_attempt_at < now() - (? * interval '1 millisecond')
      order by next_attempt_at limit ${SWEEP_BATCH}`,
    [graceMs],
  );
  let deliveriesQueued = 0;
  for (const { id } of await overdue('webhook_deliveries')) {
    const outcome = await app.producer.requeue('webhooks', 'deliver', { deliveryId: id }, { jobId: jobIds.deliver(id), attempts });
    if (outcome === 'queued') deliveriesQueued++;
  }
  let syncsQueued = 0;
  for (const { id } of await overdue('crm_syncs')) {
    const outcome = await app.producer.requeue('crm', 'sync', { syncId: id }, { jobId: jobIds.crmSync(id), attempts });
    if (outcome === 'queued') syncsQueued++;
  }
  return { deliveriesQueued, syncsQueued };
}

const ROLLUP_STATE_KEY = 'usage_rollup_from';
/** Submissions commit a little after their created_at, so each run also looks this far behind the last one. */
const ROLLUP_OVERLAP = `interval '5 minutes'`;

const RECOUNT = (formFilter: string) => `
  insert into usage_rollups as r (organization_id, form_id, month, submissions, updated_at)
  select organization_id, form_id, to_char(created_at at time zone 'UTC', 'YYYY-MM'), count(*), now()
    from submissions
   where created_at >= date_trunc('month', now() at time zone 'UTC') at time zone 'UTC' - interval '1 month' ${formFilter}
   group by 1, 2, 3
  on conflict (organization_id, form_id, month)
  do update set submissions = excluded.submissions, updated_at = now()
   where r.submissions <> excluded.submissions`;

/**
 * Submissions per organization, form and UTC month (this month and the last). A run recounts only
 * the forms that received submissions since the previous run, found through the created_at index
 * and counted through the per-form index, so its cost follows recent traffic rather than the size
 * of the table. `full` recounts every form (the first run, and the hourly maintenance, which also
 * brings deletions in). Runs of several workers take turns on the state row.
 */
export async function rollupUsage(em: Em, opts: { full?: boolean } = {}): Promise<void> {
  await em.transactional(async (tx) => {
    await tx.execute(`insert into system_settings (key, value) values (?, '') on conflict (key) do nothing`, [ROLLUP_STATE_KEY]);
    const [state] = await tx.execute('select value from system_settings where key = ? for update', [ROLLUP_STATE_KEY]);
    if (opts.full || !state.value) {
      await tx.execute(RECOUNT(''));
    } else {
      await tx.execute(RECOUNT(`and form_id in (
        select distinct form_id from submissions where created_at >= ?::timestamptz - ${ROLLUP_OVERLAP})`), [state.value]);
    }
    await tx.execute('update system_settings set value = now()::text where key = ?', [ROLLUP_STATE_KEY]);
  });
}

export interface MaintenanceReport {
  idempotencyKeysDeleted: number;
  webhooksDisabled: number;
  outboxRowsDeleted: number;
  deliveriesDeleted: number;
  crmSyncsDeleted: number;
}

const RETENTION_BATCH = 2_000;
/** Batches per table and run: a large backlog is worked off over several hourly runs. */
const RETENTION_MAX_BATCHES = 25;

/** Deletes in small batches (each well inside the statement timeout) until none is left or the cap is hit. */
async function deleteInBatches(em: Em, table: string, idColumn: string, where: string, params: unknown[]): Promise<number> {
  let total = 0;
  for (let i = 0; i < RETENTION_MAX_BATCHES; i++) {
    const result = await em.execute(
      `delete from ${table} where ${idColumn} in (select ${idColumn} from ${table} where ${where} limit ${RETENTION_BATCH})`, params, 'run',
    );
    const deleted = (result as any).affectedRows as number;
    total += deleted;
    if (deleted < RETENTION_BATCH) break;
  }
  return total;
}

/**
 * Expired idempotency records go; webhooks failing for more than 5 days are disabled; the usage
 * roll-up is recounted in full (deleted submissions leave it); past the
 * retention period, processed outbox rows, ended deliveries (their attempts go with them) and ended
 * CRM syncs are removed. Pending ones stay whatever their age: they are still owed.
 */
export async function runMaintenance(em: Em, opts: { retentionDays: number } = { retentionDays: 30 }): Promise<MaintenanceReport> {
  const deleted = await em.execute(
    `delete from idempotency_keys where created_at < now() - interval '${IDEMPOTENCY_TTL_HOURS} hours'`, [], 'run',
  );
  const disabled = await em.execute(
    `update webhooks set enabled = false, updated_at = now()
      where enabled and failing_since < now() - (? * interval '1 millisecond')`, [AUTO_DISABLE_AFTER_MS], 'run',
  );
  await rollupUsage(em, { full: true });
  const days = [opts.retentionDays];
  const cutoff = `now() - (? * interval '1 day')`;
  return {
    idempotencyKeysDeleted: (deleted as any).affectedRows,
    webhooksDisabled: (disabled as any).affectedRows,
    outboxRowsDeleted: await deleteInBatches(em, 'outbox', 'id', `processed_at < ${cutoff}`, days),
    deliveriesDeleted: await deleteInBatches(em, 'webhook_deliveries', 'id', `status <> 'pending' and updated_at < ${cutoff}`, days),
    crmSyncsDeleted: await deleteInBatches(em, 'crm_syncs', 'id', `status <> 'pending' and updated_at < ${cutoff}`, days),
  };
}
