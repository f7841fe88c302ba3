import type { Orm } from '../../db/orm';
import { preparedQuery } from '../../db/prepared';
import { newId } from '../../lib/ids';
import type { Logger } from '../../lib/logger';
import { metrics } from '../../lib/metrics';
import { GroupCommit } from '../../lib/tick-batch';
import { splitQuotaSlots } from './quota-slots';
import {
  CLAIMS_SPLIT, itemOutcome, storingStatement, type InsertOutcome, type ItemAnswer, type SubmissionRow, type Uncounted,
} from './storing-statement';

/**
 * Storing submissions with the storing statement (storing-statement.ts): the loop that settles
 * what one run could not (storeSubmissions) and the group commit of concurrent requests
 * (SubmissionWriter). A lone request is a group of one, the requests that reach storing while a
 * group runs are the next group, a batch is a group.
 */

/** Splitting a month's slots more often than this in a row gives up (the quota keeps changing). */
const MAX_SPLITS = 3;

/**
 * What to do with items the quota counted not, from the slots as their statement saw them: split
 * them for the current quota, wait for them in turn (`decisive`) while they have room, or refuse
 * (the month is at quota; a decisive statement saw every slot with room).
 */
export function afterUncounted(r: { slots_ready: boolean; slots_room: number }, decisive: boolean, splits: number)
  : 'split' | 'decisive' | 'refuse' {
  if (!r.slots_ready) {
    if (splits >= MAX_SPLITS) throw new Error('the quota slots of the month could not be split for a settled quota');
    return 'split';
  }
  return !decisive && r.slots_room > 0 ? 'decisive' : 'refuse';
}

/**
 * Whether an error of a statement storing several items may come from one of them (a unique or
 * other integrity violation, a value PostgreSQL refuses), so that the others could be stored without it.
 */
export function causedByAnItem(err: unknown): boolean {
  const code = String((err as { code?: unknown })?.code ?? '');
  return code.startsWith('23') || code.startsWith('22');
}

/** How an item came out: its outcome, or the error its statement failed with. */
export type Settled = { outcome: InsertOutcome } | { error: unknown };

/** How many times a statement that found an item's claims split (CLAIMS_SPLIT) is run again. */
const MAX_CLAIM_RERUNS = 3;

/**
 * One run of the statement. When it fails for what an item may hold, each item runs alone, so that
 * one cannot fail its neighbours; an item whose own statement fails gets that error.
 */
async function runStatement(run: StoringRun, rows: SubmissionRow[], decisive: boolean)
  : Promise<Array<ItemAnswer | { error: unknown }>> {
  const { orm, logger } = run;
  for (let reruns = 0; ; reruns++) {
    try {
      const { name, text, values } = storingStatement(rows, { decisive, jobGroup: run.jobGroup });
      return await preparedQuery<ItemAnswer>(orm.em, name, text, values);
    } catch (err) {
      if (String((err as Error)?.message).includes(CLAIMS_SPLIT) && reruns < MAX_CLAIM_RERUNS) continue;
      // The database down, slow or out of connections fails them all alike: running each alone
      // would only make every request wait that long again.
      if (rows.length === 1 || !causedByAnItem(err)) return rows.map(() => ({ error: err }));
      logger?.warn({ err: (err as Error).message, submissions: rows.length }, 'storing submissions together failed: storing each alone');
      return Promise.all(rows.map(async (row) => (await runStatement(run, [row], decisive))[0]));
    }
  }
}

/** What every statement of one storeSubmissions call shares. */
interface StoringRun {
  orm: Orm;
  logger: Logger | null;
  /** Written on the deliveries its statements create (CreatedFanout.jobGroup). */
  jobGroup: string | null;
}

/**
 * Stores `rows` (any organizations, forms and months) and answers each as if it had been stored
 * alone: the statement runs once for all of them; the items it left uncounted run again, once their
 * month's slots are split or waiting for them in turn, and deferred items once more. The deliveries
 * they create are written with `jobGroup`, the one job that will hold them (null: each its own).
 */
export async function storeSubmissions(
  orm: Orm, rows: SubmissionRow[], logger: Logger | null = null, jobGroup: string | null = null,
): Promise<Settled[]> {
  return settle({ orm, logger, jobGroup }, rows, false, 0, 0);
}

async function settle(run: StoringRun, rows: SubmissionRow[], decisive: boolean, splits: number, round: number)
  : Promise<Settled[]> {
  if (round > 2 * MAX_SPLITS + 4) throw new Error('the submissions could not be settled: their slots or claims kept changing');
  const answers = await runStatement(run, rows, decisive);
  const settled: Settled[] = new Array(rows.length);
  const again: number[] = [];
  const uncounted = new Map<string, { indexes: number[]; seen: Uncounted }>();
  answers.forEach((answer, i) => {
    if ('error' in answer) {
      settled[i] = answer;
      return;
    }
    const outcome = itemOutcome(rows[i], answer, run.jobGroup);
    if (outcome.kind === 'again') again.push(i);
    else if (outcome.kind === 'uncounted') {
      const month = `${rows[i].organizationId}\n${rows[i].month}`;
      const group = uncounted.get(month) ?? { indexes: [], seen: outcome };
      group.indexes.push(i);
      uncounted.set(month, group);
    } else settled[i] = { outcome };
  });

  const rerun = async (indexes: number[], asDecisive: boolean, splitsNow: number) => {
    const results = await settle(run, indexes.map((i) => rows[i]), asDecisive, splitsNow, round + 1);
    results.forEach((result, k) => { settled[indexes[k]] = result; });
  };
  const next: Array<Promise<void>> = [];
  if (again.length) next.push(rerun(again, decisive, splits));
  for (const { indexes, seen } of uncounted.values()) {
    const step = afterUncounted(seen, decisive, splits);
    if (step === 'refuse') {
      for (const i of indexes) settled[i] = { outcome: { kind: 'quota_exceeded' } };
    } else if (step === 'decisive') {
      next.push(rerun(indexes, true, splits));
    } else {
      const { organizationId, month } = rows[indexes[0]];
      next.push(splitQuotaSlots(run.orm.em.fork(), organizationId, month).then(() => rerun(indexes, false, splits + 1)));
    }
  }
  await Promise.all(next);
  return settled;
}

/** The most submissions one statement of the group commit stores; more go in further statements beside it. */
export const MAX_GROUP = 64;

/**
 * How long one group's statements may run before the next group goes beside them: longer than a
 * statement takes under load (1 to 5 ms), short enough that one waiting on a lock (or a database
 * that stalled) holds the other requests back by little.
 */
export const GROUP_STALL_MS = 25;

/**
 * The submissions of concurrent requests, stored together (group commit): those that reach storing
 * while a group's statement runs wait for it and share the next statement, so one round trip, one
 * transaction and one WAL flush, with each submission still decided on its own and answered only
 * once its statement committed. A lone request goes on the next turn of the event loop. Under load
 * the groups grow with the statement's time rather than the statements multiplying (one org at
 * 5,000/s: 16 submissions per statement instead of 10, a third less PostgreSQL CPU each); a group
 * running past GROUP_STALL_MS stops holding back the next. A batch is stored as one group of its
 * own, in item order. The deliveries a group creates share one job group (CreatedFanout.jobGroup):
 * the webhooks worker gets them as one job rather than one job each.
 */
export class SubmissionWriter {
  private readonly turn = new GroupCommit<SubmissionRow, Settled>((rows) => this.storeTogether(rows), GROUP_STALL_MS);

  constructor(private readonly orm: Orm, private readonly logger: Logger) {}

  /** One submission, in the next group. */
  async store(row: SubmissionRow): Promise<InsertOutcome> {
    const settled = await this.turn.call(row);
    if ('error' in settled) throw settled.error;
    return settled.outcome;
  }

  /** Submissions posted alone, each in the next group. */
  storeEach(rows: SubmissionRow[]): Promise<Settled[]> {
    return Promise.all(rows.map((row) => this.turn.call(row)));
  }

  /** The items of a batch, as one group. */
  storeGroup(rows: SubmissionRow[]): Promise<Settled[]> {
    return storeSubmissions(this.orm, rows, this.logger, newId('grp'));
  }

  /** Statements of at most MAX_GROUP rows each, run side by side. */
  private async storeTogether(rows: SubmissionRow[]): Promise<Settled[]> {
    const jobGroup = newId('grp');
    const groups: Array<Promise<Settled[]>> = [];
    for (let start = 0; start < rows.length; start += MAX_GROUP) {
      const group = rows.slice(start, start + MAX_GROUP);
      metrics.submissionGroupSize.observe(group.length);
      groups.push(storeSubmissions(this.orm, group, this.logger, jobGroup).catch((error: unknown) => group.map(() => ({ error }))));
    }
    return (await Promise.all(groups)).flat();
  }
}
