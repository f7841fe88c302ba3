import { PLAN_LIMITS, type Plan } from '../../../config/plans';

/** The quota month is the calendar month in UTC. */
export function quotaMonth(at: Date): string {
  return quotaMonthOfIso(at.toISOString());
}

/** The same from the time's ISO form (`toISOString`), for a caller that has it already: one conversion a submission less. */
export function quotaMonthOfIso(iso: string): string {
  return iso.slice(0, 7);
}

export function effectiveQuota(plan: Plan, override: number | null): number {
  return override ?? PLAN_LIMITS[plan].monthlySubmissions;
}

/**
 * The allowances of a month's counter slots (see QUOTA_SLOTS in submissions/quota-slots.ts) for `quota`,
 * given what each slot has used: every slot keeps what it used, and what the quota leaves beyond
 * the month's total is spread evenly, the remainder to the lowest slots. So the allowances add up
 * to the quota exactly, or to what is already used when a lowered quota is below it (no slot has
 * room then), and a submission counted under its slot's allowance never takes the month over.
 */
export function splitAllowances(quota: number, used: number[]): number[] {
  const room = Math.max(0, quota - used.reduce((sum, n) => sum + n, 0));
  const share = Math.floor(room / used.length);
  const extra = room % used.length;
  return used.map((n, slot) => n + share + (slot < extra ? 1 : 0));
}
