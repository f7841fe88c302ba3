import type { Em } from '../../db/orm';

export type ChangeType = 'submission.created' | 'submission.deleted';

/** Namespace of the per-organization feed lock among PostgreSQL advisory locks. */
const FEED_LOCK_CLASS = 15_001;

/**
 * Two CTEs (`<name>_lock`, `<name>`) recording one change per row of `source`, a select yielding
 * `organization_id, form_id, submission_id, occurred_at, seq`, inside the writer's own statement.
 *
 * Why the lock: a reader must never see a change while one with a lower position of the same
 * organization can still commit. Each writer takes its organization's transaction-scoped feed lock
 * before drawing positions and keeps it until commit, so within an organization positions are
 * drawn and committed one transaction after the other: a reader that sees position p sees every
 * lower position of that organization that will ever commit. The positions of one statement
 * follow `seq`.
 */
export function recordChangesSql(name: string, type: ChangeType, source: string): string {
  return `${name}_lock as (
  select count(pg_advisory_xact_lock(${FEED_LOCK_CLASS}, hashtext(l.organization_id))) as locked
    from (select distinct organization_id from (${source}) s) l
), ${name} as (
  insert into submission_changes (organization_id, form_id, submission_id, type, occurred_at)
  select s.organization_id, s.form_id, s.submission_id, '${type}', s.occurred_at
    from (${source}) s, ${name}_lock
   order by s.seq
  returning position
)`;
}

/** An opaque feed position: base64url of `c1:<position>`. */
export function encodeCursor(position: string): string {
  return Buffer.from(`c1:${position}`, 'utf8').toString('base64url');
}

const CURSOR_TEXT = /^c1:(0|[1-9][0-9]{0,18})$/;
const MAX_POSITION = 9_223_372_036_854_775_807n;

/** The position a cursor names, or null when it is not one this service issued. */
export function decodeCursor(cursor: string): string | null {
  if (!/^[A-Za-z0-9_-]{1,40}$/.test(cursor)) return null;
  const text = Buffer.from(cursor, 'base64url').toString('utf8');
  const match = CURSOR_TEXT.exec(text);
  if (!match || BigInt(match[1]) > MAX_POSITION) return null;
  return encodeCursor(match[1]) === cursor ? match[1] : null;
}

export const START_POSITION = '0';

export const DEFAULT_CHANGE_RETENTION_DAYS = 30;
const PURGE_CHUNK = 10_000;

/** Removes changes older than the retention period, in chunks so no statement runs long. */
export async function purgeSubmissionChanges(em: Em, retentionDays = DEFAULT_CHANGE_RETENTION_DAYS): Promise<number> {
  let total = 0;
  for (;;) {
    const result = await em.getConnection().execute(
      `delete from submission_changes where ctid = any(array(
         select ctid from submission_changes where occurred_at < now() - (? * interval '1 day') limit ${PURGE_CHUNK}))`,
      [retentionDays], 'run',
    );
    const deleted = (result as any).affectedRows as number;
    total += deleted;
    if (deleted < PURGE_CHUNK) return total;
  }
}
