import { expect } from 'chai';
import { Client } from 'pg';
import { updateOrganization } from '../../src/domain/auth/admin';
import { quotaMonth } from '../../src/domain/quotas/quota';
import { QUOTA_SLOTS, splitQuotaSlots } from '../../src/domain/submissions/quota-slots';
import { STORE_SUBMISSIONS_SQL, storeSubmissionsValues, type SubmissionRow } from '../../src/domain/submissions/storing-statement';
import { afterUncounted, storeSubmissions, type Settled } from '../../src/domain/submissions/submission-writer';
import { ensureDatabase, initOrm, type Orm } from '../../src/db/orm';
import { newId } from '../../src/lib/ids';
import { dropDatabase, sideDatabaseUrl } from '../support/databases';
import { call, createPublishedForm, createTenant, fieldInput as field, startTestApp, type TestApp, type TestTenant } from '../support/harness';

/** The outcome of a submission stored alone. */
const outcomeOf = ([settled]: Settled[]): string => ('error' in settled ? 'error' : settled.outcome.kind);

/** The monthly quota split into slots (QUOTA_SLOTS in src/domain/submissions/quota-slots.ts). */
describe('monthly quota in slots', () => {
  let t: TestApp;
  const month = quotaMonth(new Date());

  before(async () => {
    t = await startTestApp();
  });
  after(async () => t.close());

  const query = (sql: string, params: unknown[] = []) => t.query(sql, params);
  const slotsOf = async (organizationId: string) => query(
    'select slot, used, allowance, split_quota from usage_counter_slots where organization_id = ? and month = ? order by slot',
    [organizationId, month],
  ) as Promise<Array<{ slot: number; used: number; allowance: number; split_quota: number | null }>>;
  const stored = async (organizationId: string) =>
    (await query('select count(*)::int as n from submissions where organization_id = ?', [organizationId]))[0].n as number;
  const single = (tenant: TestTenant, formId: string, name: string) =>
    call(t.url, 'POST', `/v1/forms/${formId}/submissions`, { key: tenant.key, body: { data: { fld_name: name } } });
  const batch = (tenant: TestTenant, formId: string, names: string[]) =>
    call(t.url, 'POST', `/v1/forms/${formId}/submissions/batch`, {
      key: tenant.key, body: { submissions: names.map((name) => ({ data: { fld_name: name } })) },
    });

  async function tenantWithForm(monthlyQuota: number) {
    const tenant = await createTenant(t.app, { monthlyQuota });
    const form = await createPublishedForm(t.url, tenant.key, [field('fld_name', 'text', 'Name')]);
    return { tenant, form };
  }

  /** Singles and batches of 1 to 7 at once; answers how many submissions each status covers. */
  async function storm(tenant: TestTenant, formId: string, singles: number, batches: number, tag: string) {
    const sizes = Array.from({ length: batches }, (_, b) => 1 + (b % 7));
    const [singleAnswers, batchAnswers] = await Promise.all([
      Promise.all(Array.from({ length: singles }, (_, i) => single(tenant, formId, `${tag}-s${i}`))),
      Promise.all(sizes.map((size, b) => batch(tenant, formId, Array.from({ length: size }, (_, i) => `${tag}-b${b}-${i}`)))),
    ]);
    const statuses = [
      ...singleAnswers.map((a) => a.status),
      ...batchAnswers.flatMap((a) => {
        expect(a.status, a.text).to.equal(200);
        return a.body.results.map((r: any) => r.status);
      }),
    ];
    expect(statuses.every((s) => s === 201 || s === 402), statuses.join(',')).to.equal(true);
    return { created: statuses.filter((s) => s === 201).length, refused: statuses.filter((s) => s === 402).length };
  }

  async function expectSlotsSound(organizationId: string, quota: number) {
    const slots = await slotsOf(organizationId);
    expect(slots).to.have.length(QUOTA_SLOTS);
    for (const s of slots) expect(s.used).to.be.at.most(s.allowance);
    const used = slots.reduce((sum, s) => sum + s.used, 0);
    expect(slots.reduce((sum, s) => sum + s.allowance, 0)).to.equal(Math.max(quota, used));
    const [usage] = await query('select used from usage_counters where organization_id = ? and month = ?', [organizationId, month]);
    expect(usage.used).to.equal(used);
    return used;
  }

  it('stores exactly the quota, never more, under concurrent singles and batches across connections', async () => {
    for (const quota of [0, 5, 37]) { // none, fewer than the slots, and several per slot with a remainder
      const { tenant, form } = await tenantWithForm(quota);
      const { created, refused } = await storm(tenant, form.id, 60, 12, `q${quota}`);
      expect(created).to.equal(quota);
      expect(refused).to.equal(60 + 43 - quota); // the batches hold 1+2+…+7 and 1+…+5
      expect(await stored(tenant.organizationId)).to.equal(quota);
      expect(await expectSlotsSound(tenant.organizationId, quota)).to.equal(quota);
    }
  });

  it('follows a quota lowered or raised mid-month: never past the new quota, nor past what was used when lowered below it', async () => {
    const { tenant, form } = await tenantWithForm(100);
    expect((await storm(tenant, form.id, 20, 0, 'first')).created).to.equal(20);

    await updateOrganization(t.app.orm.em.fork(), tenant.organizationId, { monthlyQuota: 25 });
    expect((await storm(tenant, form.id, 20, 6, 'lowered')).created).to.equal(5);
    expect(await expectSlotsSound(tenant.organizationId, 25)).to.equal(25);

    await updateOrganization(t.app.orm.em.fork(), tenant.organizationId, { monthlyQuota: 10 });
    expect((await storm(tenant, form.id, 10, 3, 'below')).created).to.equal(0);
    expect(await expectSlotsSound(tenant.organizationId, 10)).to.equal(25);

    await updateOrganization(t.app.orm.em.fork(), tenant.organizationId, { monthlyQuota: 40 });
    expect((await storm(tenant, form.id, 20, 6, 'raised')).created).to.equal(15);
    expect(await expectSlotsSound(tenant.organizationId, 40)).to.equal(40);

    await updateOrganization(t.app.orm.em.fork(), tenant.organizationId, { monthlyQuota: null, plan: 'free' }); // the plan's 100
    expect((await storm(tenant, form.id, 70, 0, 'plan')).created).to.equal(60);
    expect(await stored(tenant.organizationId)).to.equal(100);
  });

  describe('on one connection', () => {
    let tenant: TestTenant;
    let form: any;
    let client: Client;
    let own: number;

    beforeEach(async () => {
      ({ tenant, form } = await tenantWithForm(40));
      await splitQuotaSlots(t.app.orm.em.fork(), tenant.organizationId, month);
      client = new Client({ connectionString: process.env.DATABASE_URL });
      await client.connect();
      own = (await client.query('select pg_backend_pid() as pid')).rows[0].pid % QUOTA_SLOTS;
    });
    afterEach(async () => client.end());

    async function row(): Promise<SubmissionRow> {
      const cached = (await t.app.formCache.get(form.id, true))!;
      const createdAt = new Date();
      return {
        id: newId('sub'), organizationId: tenant.organizationId, formId: form.id, formUpdatedAt: cached.updatedAt, month,
        data: { fld_name: 'x' }, submitterEmail: null, submitterName: null, source: 'api', createdAt, claims: [], idempotency: null,
      };
    }
    const insert = async (decisive = false) =>
      (await client.query(STORE_SUBMISSIONS_SQL, storeSubmissionsValues([await row()], { decisive }))).rows[0];
    const usedBySlot = async () => (await slotsOf(tenant.organizationId)).map((s) => s.used);

    it('counts in its own slot while it has room, then in the next slot with room', async () => {
      expect((await insert()).quota_ok).to.equal(1);
      expect((await usedBySlot())[own]).to.equal(1);
      // Its own slot full (as if other submissions had filled it): the statement goes on to the next one.
      await query('update usage_counter_slots set used = allowance where organization_id = ? and month = ? and slot = ?',
        [tenant.organizationId, month, own]);
      const before = await usedBySlot();
      expect((await insert()).quota_ok).to.equal(1);
      const after = await usedBySlot();
      const next = (own + 1) % QUOTA_SLOTS;
      expect(after[next]).to.equal(before[next] + 1);
      expect(after.reduce((a, b) => a + b, 0)).to.equal(before.reduce((a, b) => a + b, 0) + 1);
    });

    it('never waits on slots others hold; when all with room are held it waits for them in turn (decisive), and is counted once they commit', async () => {
      const holder = new Client({ connectionString: process.env.DATABASE_URL });
      await holder.connect();
      try {
        await holder.query('begin');
        await holder.query('select 1 from usage_counter_slots where organization_id = $1 for update', [tenant.organizationId]);
        const fast = await insert();
        expect(fast.quota_ok).to.equal(0);
        expect(afterUncounted(fast, false, 0)).to.equal('decisive');
        const waiting = insert(true);
        await holder.query('commit');
        expect((await waiting).quota_ok).to.equal(1);
      } finally {
        await holder.end();
      }
    });

    it('refuses at once, without a second statement, when the slots it sees have no room', async () => {
      await query('update usage_counter_slots set used = allowance where organization_id = ? and month = ?', [tenant.organizationId, month]);
      const full = await insert();
      expect(full.quota_ok).to.equal(0);
      expect(afterUncounted(full, false, 0)).to.equal('refuse');
    });

    it('takes the plans\' quotas from the calling process (config/plans.ts), not from the database', async () => {
      await updateOrganization(t.app.orm.em.fork(), tenant.organizationId, { monthlyQuota: null, plan: 'free' });
      await splitQuotaSlots(t.app.orm.em.fork(), tenant.organizationId, month);
      expect((await insert()).quota_ok).to.equal(1);
      const values = storeSubmissionsValues([await row()]);
      values[1] = JSON.stringify({ free: 3, pro: 3, business: 3, enterprise: 3 });
      const other = (await client.query(STORE_SUBMISSIONS_SQL, values)).rows[0];
      expect(other).to.include({ form_ok: 1, quota_ok: 0, slots_ready: false });
    });

    it('stores nothing and counts nothing for a form changed since it was validated', async () => {
      const before = await usedBySlot();
      const stale = { ...(await row()), formUpdatedAt: new Date(0) };
      const answer = (await client.query(STORE_SUBMISSIONS_SQL, storeSubmissionsValues([stale]))).rows[0];
      expect(answer).to.include({ form_ok: 0, quota_ok: 0, claimed: 0, idem: 0 });
      expect(await usedBySlot()).to.deep.equal(before);
      expect(await stored(tenant.organizationId)).to.equal(0);
    });

    it('counts nothing in slots split for another quota: the caller splits them afresh', async () => {
      await updateOrganization(t.app.orm.em.fork(), tenant.organizationId, { monthlyQuota: 3 });
      const stale = await insert();
      expect(stale.quota_ok).to.equal(0);
      expect(afterUncounted(stale, false, 0)).to.equal('split');
      const outcomes = await Promise.all(Array.from({ length: 6 }, async () => outcomeOf(await storeSubmissions(t.app.orm, [await row()]))));
      expect(outcomes.filter((k) => k === 'created')).to.have.length(3);
      expect(outcomes.filter((k) => k === 'quota_exceeded')).to.have.length(3);
    });
  });
});

/** Counters of the single-row era keep counting, within the quota, once split into slots. */
describe('migration Migration20261123001000_counter_slots', () => {
  const databaseUrl = sideDatabaseUrl('slotmig');
  let orm: Orm;
  const month = quotaMonth(new Date());

  before(async () => {
    await ensureDatabase(databaseUrl);
    orm = await initOrm(databaseUrl, 4);
    await orm.getMigrator().up({ to: 'Migration20261123000500_partitions' });
    const conn = orm.em.getConnection();
    await conn.execute(`insert into organizations (id, name, plan, monthly_quota) values ('org_m', 'm', 'enterprise', 10)`);
    await conn.execute(`insert into forms (id, organization_id, title, status, updated_at) values ('form_m', 'org_m', 'M', 'published', '2026-11-01T00:00:00Z')`);
    await conn.execute(`insert into usage_counters (organization_id, month, used) values ('org_m', ?, 8), ('org_m', '2020-01', 3)`, [month]);
    await conn.execute(`insert into submission_changes (organization_id, form_id, submission_id, type) values ('org_m', 'form_m', 'sub_old', 'submission.created')`);
    await orm.getMigrator().up();
  });
  after(async () => {
    await orm?.close();
    await dropDatabase(databaseUrl);
  });

  it('keeps each month\'s total, full until split, and the changes written before it first in the feed (transaction 0)', async () => {
    const conn = orm.em.getConnection();
    expect(await conn.execute('select month, used from usage_counters order by month')).to.deep.equal([
      { month: '2020-01', used: 3 }, { month, used: 8 },
    ]);
    expect(await conn.execute('select slot, used, allowance, split_quota from usage_counter_slots where month = ?', [month]))
      .to.deep.equal([{ slot: 0, used: 8, allowance: 8, split_quota: null }]);
    expect(await conn.execute(`select xid::text from submission_changes where submission_id = 'sub_old'`)).to.deep.equal([{ xid: '0' }]);
  });

  it('splits the month on the first submission after it and stores only what the quota leaves', async () => {
    const [form] = await orm.em.getConnection().execute(`select updated_at from forms where id = 'form_m'`);
    const outcomes = await Promise.all(Array.from({ length: 5 }, () => {
      const createdAt = new Date();
      return storeSubmissions(orm, [{
        id: newId('sub'), organizationId: 'org_m', formId: 'form_m', formUpdatedAt: new Date(form.updated_at), month, data: {},
        submitterEmail: null, submitterName: null, source: 'api', createdAt, claims: [], idempotency: null,
      }]).then(outcomeOf);
    }));
    expect(outcomes.filter((o) => o === 'created')).to.have.length(2);
    expect(outcomes.filter((o) => o === 'quota_exceeded')).to.have.length(3);
    const [usage] = await orm.em.getConnection().execute('select used from usage_counters where organization_id = ? and month = ?', ['org_m', month]);
    expect(usage.used).to.equal(10);
    const slots = await orm.em.getConnection().execute('select count(*)::int as n, sum(allowance)::int as allowance from usage_counter_slots where month = ?', [month]);
    expect(slots).to.deep.equal([{ n: QUOTA_SLOTS, allowance: 10 }]);
  });
});
