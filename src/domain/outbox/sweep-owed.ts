import { requeueDelivery } from '../webhooks/jobs';
import { repairSideRows } from '../webhooks/store';
import type { OutboxDeps } from './relay';
import type { Em } from '../../db/orm';
import { findOverdueDeliveries, findOverdueSyncs, OWED_BATCH, type OwedCursor, type OwedRow } from './store';

export interface SweepReport {
  deliveriesQueued: number;
  syncsQueued: number;
}

/**
 * The database decides what is still owed: a pending delivery or sync whose next attempt is overdue
 * by more than `graceMs` is queued again under its own job id, unless a live job holds that id or,
 * for a delivery not attempted yet, its storing group's job is live and will attempt it. So
 * an emptied Redis, a job that stalled for good, or an enqueue lost after a commit all end in an
 * attempt, with the same delivery id. Bounded per run (OWED_PAGES_PER_RUN pages), oldest first, paging
 * past what it could not queue. A held delivery or sync (throttled, paused) carries the time it will
 * be tried as its next attempt time, so it is not overdue and the sweeps never look at it; an
 * overdue row whose job is still delayed (its hold released: a pause lifted, a rate changed) has its
 * job brought forward: the row is the truth, and the attempt checks the rate and the pause again.
 */
export async function sweepOwed(deps: OutboxDeps, graceMs = deps.config.owedSweepIntervalMs): Promise<SweepReport> {
  return sweep(deps, graceMs, false);
}

/** How long a new delivery or sync may wait for its first job before the relay's run queues it. */
export const UNQUEUED_GRACE_MS = 5_000;

/**
 * A new submission's deliveries and syncs have no outbox row: its storing statement writes them and
 * the API queues their jobs after commit. When that enqueue is lost (Redis down, the process died),
 * the outbox relay's run (every 5 s) queues the ones never attempted and due for more than 5 s, so
 * they recover as fast as outbox rows do, not only at the slower sweep of everything owed.
 */
export async function sweepUnqueued(deps: OutboxDeps): Promise<SweepReport> {
  return sweep(deps, UNQUEUED_GRACE_MS, true);
}

/** Pages of OWED_BATCH rows one run of a sweep looks at, at most, per table (bounded work per run). */
export const OWED_PAGES_PER_RUN = 20;

/**
 * Where each sweep of this process stopped when it reached OWED_PAGES_PER_RUN, so its next run goes
 * on from there (and wraps to the oldest once it reaches the end) rather than reading the same
 * oldest rows again: a backlog larger than a run is walked through, never stood behind.
 */
const cursors = new Map<string, OwedCursor | null>();

type FindOverdue = (em: Em, graceMs: number, neverAttempted: boolean, after: OwedCursor | null) => Promise<OwedRow[]>;

/**
 * One kind's overdue rows, page after page (keyset: each page starts after the last row of the one
 * before), each queued unless a live job holds it. Rows it could not queue (live or held jobs) are
 * passed by, so another organization's lost enqueue behind thousands of them is still reached in
 * this run. A row that disagrees with its delivery is repaired instead (`repair`). Answers how
 * many were queued.
 */
async function sweepTable(
  em: Em, kind: 'deliveries' | 'syncs', find: FindOverdue, graceMs: number, neverAttempted: boolean,
  queue: (row: OwedRow) => Promise<'queued' | 'live'>, repair: (ids: string[]) => Promise<unknown> = async () => undefined,
): Promise<number> {
  const key = `${kind}:${neverAttempted ? 'unqueued' : 'owed'}`;
  let after = cursors.get(key) ?? null;
  // A run that goes on from where the last one stopped wraps to the oldest once, at the end.
  let mayWrap = after !== null;
  let queued = 0;
  for (let page = 0; page < OWED_PAGES_PER_RUN; page++) {
    const rows = await find(em, graceMs, neverAttempted, after);
    const disagreeing = rows.filter((row) => !row.agrees).map((row) => row.id);
    if (disagreeing.length) await repair(disagreeing);
    for (const row of rows) {
      if (row.agrees && (await queue(row)) === 'queued') queued++;
    }
    if (rows.length === OWED_BATCH) {
      const last = rows[rows.length - 1];
      after = { at: last.at, id: last.id };
      continue;
    }
    after = null;
    if (!mayWrap) break;
    mayWrap = false;
  }
  cursors.set(key, after);
  return queued;
}

async function sweep(deps: OutboxDeps, graceMs: number, neverAttempted: boolean): Promise<SweepReport> {
  const em = deps.orm.em.fork();
  const deliveriesQueued = await sweepTable(em, 'deliveries', findOverdueDeliveries, graceMs, neverAttempted,
    ({ id, job_group: group }) => requeueDelivery(deps.producer, { id, jobGroup: group }, { promoteDelayed: true }),
    (ids) => repairSideRows(em, ids));
  const syncsQueued = await sweepTable(em, 'syncs', findOverdueSyncs, graceMs, neverAttempted,
    ({ id }) => deps.producer.requeue('crm', 'sync', { syncId: id }, { promoteDelayed: true }));
  return { deliveriesQueued, syncsQueued };
}
