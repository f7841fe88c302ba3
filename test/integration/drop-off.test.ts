import { expect } from 'chai';
import { recordAnalyticsEvent } from '../../src/domain/forms/analytics';
import { call, createPublishedForm, createTenant, fieldInput, startTestApp, type TestApp, type TestTenant } from '../support/harness';

/**
 * Drop-off: the hosted page's events (POST /public/forms/{id}/events, `view`, `start`, `page`)
 * counted per form, UTC day and page, and reported by GET /v1/forms/{id}/analytics, per day and in
 * total. Kept as counters: no row per event, no answer, no address.
 */
describe('drop-off: page events and the analytics that report them', function () {
  this.timeout(30_000);
  const RATE = 40;
  let t: TestApp;
  let tenant: TestTenant;
  let formId = '';
  let token = '';
  const today = () => new Date().toISOString().slice(0, 10);
  const event = (body: unknown, id = formId) => call(t.url, 'POST', `/public/forms/${id}/events`, { body });
  const analytics = async (query = '') => {
    const res = await call(t.url, 'GET', `/v1/forms/${formId}/analytics${query}`, { key: tenant.key });
    expect(res.status, res.text).to.equal(200);
    return res.body;
  };

  before(async () => {
    t = await startTestApp({ PUBLIC_RATE_LIMIT_GET: String(RATE) });
    tenant = await createTenant(t.app);
    formId = (await createPublishedForm(t.url, tenant.key, [
      fieldInput('fld_name', 'text', 'Name', { pageId: 'pg_one' }),
      fieldInput('fld_more', 'text', 'More', { pageId: 'pg_two' }),
    ], { pages: [{ id: 'pg_one', title: 'One', order: 0 }, { id: 'pg_two', title: 'Two', order: 1 }] })).id;
    token = (await call(t.url, 'GET', `/public/forms/${formId}`)).body.telemetry.analyticsToken;
  });

  after(async () => t?.close());

  it('counts views, starts and pages reached (204 each), per day and in total', async () => {
    // Three visitors open the form, two start, both reach page one and one reaches page two.
    for (const body of [
      { token, type: 'view' }, { token, type: 'view' }, { token, type: 'view' },
      { token, type: 'page', page: 'pg_one' }, { token, type: 'page', page: 'pg_one' }, { token, type: 'start' }, { token, type: 'start' },
      { token, type: 'page', page: 'pg_two' },
    ]) {
      const res = await event(body);
      expect(res.status, JSON.stringify(body)).to.equal(204);
    }
    const body = await analytics();
    expect(body).to.deep.include({ views: 3, starts: 2, completions: 0, reached: { pg_one: 2, pg_two: 1 } });
    expect(body.days).to.deep.equal([{ day: today(), views: 3, starts: 2, completions: 0, reached: { pg_one: 2, pg_two: 1 } }]);
  });

  it('keeps one counter row per form, day and page, holding nothing but the count', async () => {
    const rows = await t.query('select * from form_analytics_pages where form_id = ? order by page_id', [formId]);
    expect(rows.map((r: Record<string, unknown>) => Object.keys(r).sort())).to.deep.equal([['day', 'form_id', 'page_id', 'reached'], ['day', 'form_id', 'page_id', 'reached']]);
    expect(rows.map((r: { page_id: string; reached: number }) => [r.page_id, r.reached])).to.deep.equal([['pg_one', 2], ['pg_two', 1]]);
  });

  it('reports past days within ?days= and counts every day in the total', async () => {
    const tenDaysAgo = new Date(Date.now() - 10 * 86_400_000);
    await recordAnalyticsEvent(t.app.orm.em.fork(), formId, 'view', { at: tenDaysAgo });
    await recordAnalyticsEvent(t.app.orm.em.fork(), formId, 'page', { at: tenDaysAgo, pageId: 'pg_one' });
    const recent = await analytics('?days=5');
    expect(recent.days.map((d: { day: string }) => d.day)).to.deep.equal([today()]);
    expect(recent).to.deep.include({ views: 4, reached: { pg_one: 3, pg_two: 1 } });
    const month = await analytics('?days=30');
    expect(month.days[0]).to.deep.equal({ day: tenDaysAgo.toISOString().slice(0, 10), views: 1, starts: 0, completions: 0, reached: { pg_one: 1 } });
    expect(month.days).to.have.length(2);
    for (const bad of ['?days=0', '?days=367', '?days=x']) {
      const res = await call(t.url, 'GET', `/v1/forms/${formId}/analytics${bad}`, { key: tenant.key });
      expect(res.status, bad).to.equal(400);
      expect(res.body.error, bad).to.equal('validation_error');
    }
  });

  it('refuses a page the form does not have, a page without its type, and anything beyond the event (answers) with 400', async () => {
    for (const body of [
      { token, type: 'page' }, { token, type: 'page', page: 'pg_nope' }, { token, type: 'page', page: 7 },
      { token, type: 'view', page: 'pg_one' }, { token, type: 'start', values: { fld_name: 'Ada' } }, { token, type: 'bounce' },
    ]) {
      const res = await event(body);
      expect(res.status, JSON.stringify(body)).to.equal(400);
      expect(res.body, JSON.stringify(body)).to.include({ success: false, error: 'invalid_data' });
    }
    expect((await analytics()).reached).to.deep.equal({ pg_one: 3, pg_two: 1 });
  });

  it('counts a burst of concurrent events exactly, merged into the same counter rows', async () => {
    const burst = (await createPublishedForm(t.url, tenant.key, [
      fieldInput('fld_a', 'text', 'A', { pageId: 'pg_a' }), fieldInput('fld_b', 'text', 'B', { pageId: 'pg_b' }),
    ], { pages: [{ id: 'pg_a', title: 'A', order: 0 }, { id: 'pg_b', title: 'B', order: 1 }] })).id;
    const burstToken = (await call(t.url, 'GET', `/public/forms/${burst}`)).body.telemetry.analyticsToken;
    const bodies = [
      ...Array.from({ length: 14 }, () => ({ token: burstToken, type: 'view' })),
      ...Array.from({ length: 9 }, () => ({ token: burstToken, type: 'start' })),
      ...Array.from({ length: 11 }, () => ({ token: burstToken, type: 'page', page: 'pg_b' })),
      { token: burstToken, type: 'complete' },
    ];
    const answers = await Promise.all(bodies.map((body) => event(body, burst)));
    expect(answers.map((res) => res.status)).to.deep.equal(bodies.map(() => 204));
    const res = await call(t.url, 'GET', `/v1/forms/${burst}/analytics`, { key: tenant.key });
    expect(res.body).to.deep.include({ views: 14, starts: 9, completions: 1, reached: { pg_b: 11 } });
    expect(await t.query('select count(*)::int as n from form_analytics_daily where form_id = ?', [burst])).to.deep.equal([{ n: 1 }]);
  });

  it('names unknown properties briefly: a long key sent is not echoed back whole', async () => {
    const res = await event({ token, type: 'view', ['k'.repeat(100_000)]: 1 });
    expect(res.status).to.equal(400);
    expect(res.body).to.include({ error: 'invalid_data' });
    expect(res.text.length).to.be.below(500);
  });

  it('answers 404 for a form that does not exist', async () => {
    const res = await event({ token, type: 'page', page: 'pg_one' }, 'form_doesNotExist');
    expect(res.status).to.equal(404);
  });

  it('is rate-limited per client like the rest of the public runtime (429)', async () => {
    let limited = null as null | { status: number; headers: Headers };
    for (let i = 0; i < RATE + 2 && !limited; i++) {
      const res = await event({ token, type: 'page', page: 'pg_two' });
      if (res.status === 429) limited = res;
      else expect(res.status).to.equal(204);
    }
    expect(limited, 'never rate limited').to.not.equal(null);
    expect(Number(limited!.headers.get('retry-after'))).to.be.greaterThan(0);
  });
});
