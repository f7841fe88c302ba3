export const PLANS = ['free', 'pro', 'business', 'enterprise'] as const;
export type Plan = (typeof PLANS)[number];

interface PlanLimits {
  requestsPerMinute: number;
  monthlySubmissions: number;
}

export const PLAN_LIMITS: Readonly<Record<Plan, PlanLimits>> = Object.freeze({
  free: { requestsPerMinute: 10, monthlySubmissions: 100 },
  pro: { requestsPerMinute: 100, monthlySubmissions: 10_000 },
  business: { requestsPerMinute: 500, monthlySubmissions: 100_000 },
  enterprise: { requestsPerMinute: 2_000, monthlySubmissions: 1_000_000 },
});

export function isPlan(value: unknown): value is Plan {
  return typeof value === 'string' && (PLANS as readonly string[]).includes(value);
}
