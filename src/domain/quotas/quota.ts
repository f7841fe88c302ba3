import { PLAN_LIMITS, type Plan } from '../../../config/plans';

/** The quota month is the calendar month in UTC. */
export function quotaMonth(at: Date): string {
  return at.toISOString().slice(0, 7);
}

export function effectiveQuota(plan: Plan, override: number | null): number {
  return override ?? PLAN_LIMITS[plan].monthlySubmissions;
}
