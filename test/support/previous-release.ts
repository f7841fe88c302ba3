// The previous release's statements that write slot 0 of the day counts without knowing the month
// rows (Migration20261128000400_submission_month_counts: its trigger follows them during the
// rollout). Fixed text of that release, so the tests write as it writes while this one runs.

/** The previous release's fold (its FOLD_DAY_COUNTS_SQL; `?`: the most form-days a run folds). */
export const PREVIOUS_FOLD_SQL = `with picked as (
       select day, form_id from submission_day_counts
        where day < (now() at time zone 'UTC')::date - 2 and slot <> 0
        group by day, form_id order by day, form_id limit ?
     ), locked as materialized (
       select c.organization_id, c.form_id, c.day, c.slot, c.count from submission_day_counts c join picked using (form_id, day)
        where c.slot <> 0
        order by c.form_id, c.day, c.slot
          for update of c
     ), gone as (
       delete from submission_day_counts c using locked l
        where c.form_id = l.form_id and c.day = l.day and c.slot = l.slot
     ), folded as (
       insert into submission_day_counts as c (organization_id, form_id, day, slot, count)
       select organization_id, form_id, day, 0, sum(count) from locked group by organization_id, form_id, day order by form_id, day
       on conflict (form_id, day, slot) do update set count = c.count + excluded.count
       returning 1
     )
     select count(*)::int as folded from folded`;

/**
 * A storing or deleting statement of this release as the previous release ran it: its slot was the
 * connection's pid modulo 16, slot 0 on one connection in 16.
 */
export function asPreviousRelease(sql: string): string {
  const slot = /1 \+ pg_backend_pid\(\) % 15/g;
  if (!slot.test(sql)) throw new Error('no slot of this release in the statement');
  return sql.replace(slot, 'pg_backend_pid() % 16');
}
