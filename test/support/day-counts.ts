import { expect } from 'chai';
import { call, type TestApp, type TestTenant } from './harness';

/**
 * The day counts, summed over their slots, against count(*) by day; the month rows against their
 * days' slot 0 (each day at 0 or more); and the API's totals (the list's `pagination.total`,
 * analytics' `submissions`) against count(*). Answers the total.
 */
export async function expectDayCountsExact(t: TestApp, tenant: TestTenant, formId: string): Promise<number> {
  const byRows = await t.query(
    `select to_char(created_at at time zone 'UTC', 'YYYY-MM-DD') as day, count(*)::int as n from submissions
      where form_id = ? group by 1 order by 1`, [formId]);
  const byCounts = await t.query(
    `select to_char(day, 'YYYY-MM-DD') as day, sum(count)::int as n from submission_day_counts
      where form_id = ? group by day having sum(count) <> 0 order by 1`, [formId]);
  expect(byCounts).to.deep.equal(byRows);
  await expectMonthCountsExact(t, formId);
  const total = byRows.reduce((sum: number, d: any) => sum + d.n, 0);
  const list = await call(t.url, 'GET', `/v1/forms/${formId}/submissions?limit=1`, { key: tenant.key });
  expect(list.body.pagination.total).to.equal(total);
  const analytics = await call(t.url, 'GET', `/v1/forms/${formId}/analytics`, { key: tenant.key });
  expect(analytics.body.submissions).to.equal(total);
  return total;
}

/** The form's month rows against the sum of their days' slot 0, each day at 0 or more (months at 0 either way left out). */
export async function expectMonthCountsExact(t: TestApp, formId: string): Promise<void> {
  const bySlotZero = await t.query(
    `select to_char(day, 'YYYY-MM') as month, sum(greatest(count, 0))::int as n from submission_day_counts
      where form_id = ? and slot = 0 group by 1 having sum(greatest(count, 0)) <> 0 order by 1`, [formId]);
  const byMonths = await t.query(
    `select to_char(month, 'YYYY-MM') as month, count::int as n from submission_month_counts
      where form_id = ? and count <> 0 order by 1`, [formId]);
  expect(byMonths, 'month rows').to.deep.equal(bySlotZero);
}
