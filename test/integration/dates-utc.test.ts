import { expect } from 'chai';
import { call, createPublishedForm, createTenant, fieldInput, startTestApp, type TestApp, type TestTenant } from '../support/harness';
import { startEntry, type StartedEntry } from '../support/processes';

/**
 * A date-time without an offset in a query is UTC, whatever the server's time zone: the API run
 * under TZ=America/New_York (UTC-4/-5) lists the same rows for the same URL as this process.
 */
describe('date-times without an offset are UTC (an API under TZ=America/New_York)', function () {
  this.timeout(60_000);
  let t: TestApp;
  let newYork: StartedEntry;
  let tenant: TestTenant;
  let formId = '';
  /** `YYYY-MM-DDTHH:MM:SS`, no offset, `hours` from now. */
  const noOffset = (hours: number) => new Date(Date.now() + hours * 3_600_000).toISOString().slice(0, 19);
  const listed = async (url: string, query: string) => {
    const res = await call(url, 'GET', `/v1/forms/${formId}/submissions?${query}`, { key: tenant.key });
    expect(res.status, res.text).to.equal(200);
    return (res.body.submissions as Array<{ id: string }>).map((s) => s.id).sort();
  };

  before(async () => {
    t = await startTestApp();
    [newYork, tenant] = await Promise.all([startEntry('src/api.js', { TZ: 'America/New_York' }), createTenant(t.app)]);
    formId = (await createPublishedForm(t.url, tenant.key, [fieldInput('fld_name', 'text', 'Name')])).id;
    for (const name of ['a', 'b', 'c']) {
      const res = await call(t.url, 'POST', `/v1/forms/${formId}/submissions`, { key: tenant.key, body: { data: { fld_name: name } } });
      expect(res.status, res.text).to.equal(201);
    }
  });

  after(async () => {
    await newYork?.proc.stop();
    await t?.close();
  });

  for (const [label, query, expected] of [
    ['startDate an hour ago lists all three', () => `startDate=${noOffset(-1)}`, 3],
    ['startDate in an hour lists none', () => `startDate=${noOffset(1)}`, 0],
    ['endDate an hour ago lists none', () => `endDate=${noOffset(-1)}`, 0],
    ['a window around now lists all three', () => `startDate=${noOffset(-1)}&endDate=${noOffset(1)}`, 3],
  ] as Array<[string, () => string, number]>) {
    it(`${label}, on both servers`, async () => {
      const q = query();
      const [here, there] = await Promise.all([listed(t.url, q), listed(newYork.url, q)]);
      expect(here, `this process, ${q}`).to.have.length(expected);
      expect(there, `the API under TZ=America/New_York, ${q}`).to.deep.equal(here);
    });
  }

  it('the export reads its window the same way', async () => {
    const q = `format=ndjson&startDate=${noOffset(-1)}&endDate=${noOffset(1)}`;
    const lines = async (url: string) => {
      const res = await call(url, 'GET', `/v1/forms/${formId}/submissions/export?${q}`, { key: tenant.key });
      expect(res.status, res.text).to.equal(200);
      return res.text.split('\n').filter(Boolean).length;
    };
    const [here, there] = await Promise.all([lines(t.url), lines(newYork.url)]);
    expect(here).to.equal(3);
    expect(there).to.equal(3);
  });

  it('takes the widest window PostgreSQL can hold, years 0001 to 9999, in the list and the export', async () => {
    const q = 'startDate=0001-01-01&endDate=9999-12-31';
    const list = await call(t.url, 'GET', `/v1/forms/${formId}/submissions?${q}`, { key: tenant.key });
    expect(list.status, list.text).to.equal(200);
    expect(list.body.submissions).to.have.length(3);
    const res = await call(t.url, 'GET', `/v1/forms/${formId}/submissions/export?format=ndjson&${q}`, { key: tenant.key });
    expect(res.status, res.text).to.equal(200);
    expect(res.text.split('\n').filter(Boolean)).to.have.length(3);
  });

  it('lists from a start in December 9999 (no month after it) or in years 0-99 as from any other: none, all', async () => {
    for (const [q, n] of [['startDate=9999-12-15', 0], ['startDate=9999-11-15&endDate=9999-12-31', 0], ['startDate=0050-01-15', 3],
      ['startDate=0099-12-15&endDate=9999-12-31T23:59:59Z', 3], ['endDate=0001-01-15', 0]] as const) {
      const list = await call(t.url, 'GET', `/v1/forms/${formId}/submissions?${q}`, { key: tenant.key });
      expect(list.status, `${q}: ${list.text}`).to.equal(200);
      expect(list.body.submissions, q).to.have.length(n);
      expect(list.body.pagination.total, q).to.equal(n);
    }
  });

  it('refuses what is not an ISO 8601 date or date-time with 400 validation_error', async () => {
    for (const bad of ['2026-02-30T08:00:00', 'yesterday', '2026-11-01 08:00', '0000-01-01', '0001-01-01T00:00:00+05:00', '9999-12-31T23:00:00-05:00']) {
      const res = await call(newYork.url, 'GET', `/v1/forms/${formId}/submissions?startDate=${encodeURIComponent(bad)}`, { key: tenant.key });
      expect(res.status, bad).to.equal(400);
      expect(res.body.error, bad).to.equal('validation_error');
    }
  });
});
