import type { Orm } from '../../db/orm';
import { preparedQuery } from '../../db/prepared';
import type { Logger } from '../../lib/logger';
import { metrics } from '../../lib/metrics';
import { TickBatch } from '../../lib/tick-batch';
import { insertSubmission, PLAN_QUOTAS_JSON, type InsertOutcome, type SubmissionRow } from './store';

/** The most submissions one statement stores; more wait for the next. */
export const MAX_GROUP = 64;

/**
 * The single submissions of concurrent requests, stored together (group commit): those that reach
 * storing in the same turn of the event loop share one call of store_submissions
 * (Migration20261123005000_store_submissions_group), so one round trip, one transaction and one WAL
 * flush, with each submission still decided on its own and answered only once the call committed.
 * A submission the group could not settle alone goes on by itself through insertSubmission: the
 * quota counted none for it (the free slots held fewer, the month is unsplit or full), or it might
 * fail a unique key (a payment intent, an idempotency key not claimed beforehand), which would undo
 * its neighbours. If the group's call fails, each submission is tried alone, so one cannot fail
 * another.
 */
export class SubmissionWriter {
  private readonly batch = new TickBatch<SubmissionRow, Settled>((rows) => this.storeTogether(rows));

  constructor(private readonly orm: Orm, private readonly logger: Logger) {}

  async store(row: SubmissionRow): Promise<InsertOutcome> {
    if (!groupable(row)) return insertSubmission(this.orm, row);
    const settled = await this.batch.call(row);
    if ('error' in settled) throw settled.error;
    return settled.outcome;
  }

  private async storeTogether(rows: SubmissionRow[]): Promise<Settled[]> {
    const settled: Array<Promise<Settled>> = [];
    for (let start = 0; start < rows.length; start += MAX_GROUP) {
      const group = rows.slice(start, start + MAX_GROUP);
      metrics.submissionGroupSize.observe(group.length);
      if (group.length === 1) settled.push(this.storeAlone(group[0]));
      else settled.push(...(await this.storeGroup(group)));
    }
    return Promise.all(settled);
  }

  private async storeGroup(rows: SubmissionRow[]): Promise<Array<Promise<Settled>>> {
    let answers: GroupAnswer[];
    try {
      answers = await preparedQuery<GroupAnswer>(this.orm.em, 'store_submissions', STORE_SUBMISSIONS_SQL,
        [JSON.stringify(rows.map(groupItem)), PLAN_QUOTAS_JSON]);
    } catch (err) {
      this.logger.warn({ err: (err as Error).message, submissions: rows.length }, 'storing submissions together failed: storing each alone');
      return rows.map((row) => this.storeAlone(row));
    }
    return rows.map((row, i) => {
      const outcome = groupOutcome(row, answers[i]);
      return outcome ? Promise.resolve({ outcome }) : this.storeAlone(row);
    });
  }

  private storeAlone(row: SubmissionRow): Promise<Settled> {
    return insertSubmission(this.orm, row).then((outcome) => ({ outcome }), (error: unknown) => ({ error }));
  }
}

type Settled = { outcome: InsertOutcome } | { error: unknown };

interface GroupAnswer {
  seq: number;
  form_ok: number;
  idem_held: number;
  listeners_ok: number;
  webhooks: number;
  quota_ok: number;
}

const STORE_SUBMISSIONS_SQL = 'select * from store_submissions($1::jsonb, $2::jsonb)';

/** Whether a row can share a statement: nothing in it can fail a unique key and undo the others. */
export function groupable(row: SubmissionRow): boolean {
  return row.paymentIntentId === null && (row.idempotency === null || !!row.idempotency.claimToken);
}

function groupItem(row: SubmissionRow, seq: number) {
  return {
    seq, org: row.organizationId, form: row.formId, form_updated: row.formUpdatedAt.toISOString(), month: row.month,
    id: row.id, data: row.data, email: row.submitterEmail, name: row.submitterName, source: row.source,
    created: row.createdAt.toISOString(), idem_key: row.idempotency?.key ?? null,
    idem_body: row.idempotency?.responseBody ?? null, idem_token: row.idempotency?.claimToken ?? null,
    event_id: row.fanout?.event?.id ?? null, event: row.fanout?.event?.payload ?? null,
    dlv_ids: row.fanout?.deliveryIds ?? null, syncs: row.fanout?.syncs.length ? row.fanout.syncs : null,
  };
}

/**
 * What the group decided for a row, as insertSubmission would answer it; null when the quota
 * counted it not: the row is then stored alone, which splits or waits for the slots before refusing.
 */
export function groupOutcome(row: SubmissionRow, answer: GroupAnswer): InsertOutcome | null {
  if (!answer.form_ok) return { kind: 'form_changed' };
  if (!answer.idem_held) return { kind: 'idempotency_lost' };
  if (!answer.listeners_ok) return { kind: 'listeners_unknown', webhooks: answer.webhooks };
  if (!answer.quota_ok) return null;
  return {
    kind: 'created',
    deliveryIds: (row.fanout?.deliveryIds ?? []).slice(0, answer.webhooks),
    syncIds: (row.fanout?.syncs ?? []).map((sync) => sync.id),
    webhooks: answer.webhooks,
  };
}
