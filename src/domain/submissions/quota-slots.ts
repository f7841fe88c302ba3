import { PLAN_LIMITS, PLANS } from '../../../config/plans';
import type { Em } from '../../db/orm';
import { splitAllowances } from '../quotas/quota';

/**
 * Each plan's monthly submissions (config/plans.ts), passed to the storing statement as an
 * argument rather than written into its text: the quotas stay this process's configuration, and a
 * release changing PLAN_LIMITS needs no migration.
 */
export const PLAN_QUOTAS_JSON = JSON.stringify(Object.fromEntries(PLANS.map((p) => [p, PLAN_LIMITS[p].monthlySubmissions])));

/** SQL: the monthly quota of organization `o`, with `planQuotas` the jsonb expression of PLAN_QUOTAS_JSON. */
export function organizationQuotaSql(planQuotas: string): string {
  return `coalesce(o.monthly_quota, (${planQuotas} ->> o.plan)::int)`;
}

/**
 * Why slots: one counter row per organization and month would be locked by every submission of
 * the organization from its update until its commit (a WAL flush), so one organization could
 * never store more than one submission per commit time, whatever the number of API processes.
 * The month's quota is split instead into QUOTA_SLOTS rows, each with its share of it
 * (`allowance`, split by splitAllowances, adding up to the quota exactly): a submission counts
 * itself in one slot with room, under that slot's row lock alone, so submissions on different
 * connections seldom wait on each other, and the month's total never passes the quota because no
 * slot passes its allowance (a check constraint besides). The storing statement takes, for each
 * organization and month of its items, the first slot with room nobody holds, starting from the
 * connection's own (by backend pid; SKIP LOCKED, so it never waits there), and counts in it as many
 * items as it has room for. When that leaves items uncounted although the month has room, a second
 * statement waits its turn on the slots in ascending order (`decisive`), as many as it has items,
 * so an item is refused only when every slot is really full. Slots are locked in ascending order
 * whenever a statement waits on them (the decisive statement, splitQuotaSlots), which keeps them
 * free of deadlocks; a decisive statement holds the items of one organization and month only.
 *
 * `split_quota` is the quota the allowances were split for: a statement uses a slot only while it
 * equals the organization's quota as the statement sees it (a split rewrites all of a month's slots
 * in one statement, so a snapshot sees them all split for the same quota). A month without slots,
 * or a quota changed since the split (a plan change, an admin's --monthly-quota), makes the caller
 * split the month afresh (splitQuotaSlots) and try again: a lowered quota never lets a statement
 * that saw it count beyond it.
 */
export const QUOTA_SLOTS = 16;

/** Where this connection starts looking for a slot with room. */
export const OWN_SLOT_ORDER = `(s.slot - pg_backend_pid() % ${QUOTA_SLOTS} + ${QUOTA_SLOTS}) % ${QUOTA_SLOTS}`;

/**
 * Splits the organization's month into QUOTA_SLOTS slots for its current quota (splitAllowances),
 * creating the ones missing; does nothing when they are split for it already. The slots are locked
 * in ascending order and the quota read once they are held, so what a slot has used cannot change
 * under the split, and a quota changed meanwhile is seen by the next statement, which splits again.
 */
export async function splitQuotaSlots(em: Em, organizationId: string, month: string): Promise<void> {
  await em.transactional(async (tx) => {
    await tx.execute(
      `insert into usage_counter_slots (organization_id, month, slot, used, allowance, split_quota)
       select ?, ?, g, 0, 0, null from generate_series(0, ${QUOTA_SLOTS - 1}) g
       on conflict do nothing`,
      [organizationId, month],
    );
    const slots: Array<{ slot: number; used: number; split_quota: number | null }> = await tx.execute(
      'select slot, used, split_quota from usage_counter_slots where organization_id = ? and month = ? order by slot for update',
      [organizationId, month],
    );
    const [org] = await tx.execute(
      `select ${organizationQuotaSql('?::jsonb')} as quota from organizations o where o.id = ?`, [PLAN_QUOTAS_JSON, organizationId],
    );
    if (!org) return;
    if (slots.every((s) => s.split_quota === org.quota)) return;
    const allowances = splitAllowances(org.quota, slots.map((s) => s.used));
    await tx.execute(
      `update usage_counter_slots u set allowance = x.allowance, split_quota = ?
         from jsonb_to_recordset(?::jsonb) as x(slot int, allowance int)
        where u.organization_id = ? and u.month = ? and u.slot = x.slot`,
      [org.quota, JSON.stringify(slots.map((s, i) => ({ slot: s.slot, allowance: allowances[i] }))), organizationId, month],
    );
  });
}
