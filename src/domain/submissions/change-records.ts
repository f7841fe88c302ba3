import type { Em } from '../../db/orm';

/** The change feed's rows: written inside the writers' own statements, and purged. The feed's reads are in read-store.ts. */

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

/** Deletes at most `limit` changes older than `retentionDays`; answers how many. */
export async function deleteChangesOlderThan(em: Em, retentionDays: number, limit: number): Promise<number> {
  const result = await em.getConnection().execute(
    `delete from submission_changes where ctid = any(array(
       select ctid from submission_changes where occurred_at < now() - (? * interval '1 day') limit ${limit}))`,
    [retentionDays], 'run',
  );
  return (result as any).affectedRows as number;
}
