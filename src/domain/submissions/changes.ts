import type { Em } from '../../db/orm';

export type ChangeType = 'submission.created' | 'submission.deleted';

/**
 * A CTE named `name` recording one change per row of `source`, a select yielding
 * `organization_id, form_id, submission_id, occurred_at, seq`, inside the writer's own statement;
 * the positions of one statement follow `seq`. Each row also keeps the writer's transaction id
 * (the column's default, pg_current_xact_id()), by which readers order the feed and know which
 * changes are final (readChanges in change-feed.ts): writers take no lock for the feed, so those of
 * one organization commit side by side.
 */
export function recordChangesSql(name: string, type: ChangeType, source: string): string {
  return `${name} as (
  insert into submission_changes (organization_id, form_id, submission_id, type, occurred_at)
  select s.organization_id, s.form_id, s.submission_id, '${type}', s.occurred_at
    from (${source}) s
   order by s.seq
  returning position
)`;
}

/** A place in the feed: after the change of transaction `xid` at `position` (decimal strings). */
export interface FeedPosition {
  xid: string;
  position: string;
}

/** An opaque feed position: base64url of `c2:<xid>:<position>`. */
export function encodeCursor(at: FeedPosition): string {
  return Buffer.from(`c2:${at.xid}:${at.position}`, 'utf8').toString('base64url');
}

const DECIMAL = '(0|[1-9][0-9]{0,19})';
const CURSOR_TEXT = new RegExp(`^(?:c2:${DECIMAL}:${DECIMAL}|c1:${DECIMAL})$`);
const MAX_XID = 18_446_744_073_709_551_615n;
const MAX_POSITION = 9_223_372_036_854_775_807n;

/**
 * The place a cursor names, or null when it is not one this service issued. A `c1:<position>`
 * cursor, issued before changes kept their transaction id, names the same place as before: the
 * changes written since the upgrade all have a higher transaction id than the ones before it (0).
 */
export function decodeCursor(cursor: string): FeedPosition | null {
  if (!/^[A-Za-z0-9_-]{1,80}$/.test(cursor)) return null;
  const text = Buffer.from(cursor, 'base64url').toString('utf8');
  const match = CURSOR_TEXT.exec(text);
  if (!match) return null;
  const at = match[3] !== undefined ? { xid: '0', position: match[3] } : { xid: match[1], position: match[2] };
  if (BigInt(at.xid) > MAX_XID || BigInt(at.position) > MAX_POSITION) return null;
  return Buffer.from(text, 'utf8').toString('base64url') === cursor ? at : null;
}

export const START_POSITION: FeedPosition = { xid: '0', position: '0' };

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
