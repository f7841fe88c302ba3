import type { Plan } from '../../../config/plans';
import type { Em } from '../../db/orm';

// The statements that read an organization's quota standing outside the storing statement (whose
// quota slots are in submissions/store.ts): its plan, override and the month's count.

export interface QuotaStanding {
  plan: Plan;
  monthly_quota: number | null;
  used: number;
}

/** The organization's plan, quota override and submissions counted in `month`; undefined when there is no such organization. */
export async function findQuotaStanding(em: Em, organizationId: string, month: string)
  : Promise<QuotaStanding | undefined> {
  const [row] = await em.getConnection().execute<QuotaStanding[]>(
    `select o.plan, o.monthly_quota,
            coalesce((select used from usage_counters u where u.organization_id = o.id and u.month = ?), 0) as used
       from organizations o where o.id = ?`, [month, organizationId]);
  return row;
}

/** Submissions counted for the organization in `month`; undefined when none was counted. */
export async function findMonthUsed(em: Em, organizationId: string, month: string): Promise<number | undefined> {
  const [row] = await em.getConnection().execute(
    'select used from usage_counters where organization_id = ? and month = ?', [organizationId, month],
  );
  return row?.used;
}
