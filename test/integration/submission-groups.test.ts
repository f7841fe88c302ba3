import { expect } from 'chai';
import { Client } from 'pg';
import { createdFanout } from '../../src/domain/submissions/fanout';
import { claimIdempotencyKey } from '../../src/domain/submissions/idempotency-records';
import {
  claimsNothing, STORE_PLAIN_SUBMISSIONS_SQL, STORE_SUBMISSIONS_SQL, storeSubmissionsValues, storingStatement, type InsertOutcome, type ItemAnswer, type SubmissionRow,
} from '../../src/domain/submissions/storing-statement';
import { MAX_GROUP } from '../../src/domain/submissions/submission-writer';
import { quotaMonth } from '../../src/domain/quotas/quota';
import { newId } from '../../src/lib/ids';
import { metrics } from '../../src/lib/metrics';
import { call, createPublishedForm, createTenant, fieldInput as field, startTestApp, type TestApp, type TestTenant } from '../support/harness';

/** Single submissions of concurrent requests stored together (SubmissionWriter, STORE_SUBMISSIONS_SQL). */
describe('submissions stored together', () => {
  let t: TestApp;
  const month = quotaMonth(new Date());

  before(async () => {
    t = await startTestApp();
  });
  after(async () => t.close());

  const query = (sql: string, params: unknown[] = []) => t.query(sql, params);
  const count = async (sql: string, params: unknown[]) => (await query(sql, params))[0].n as number;

  async function tenantWithForm(monthlyQuota: number | null = null) {
    const tenant = await createTenant(t.app, { monthlyQuota });
    const form = await createPublishedForm(t.url, tenant.key, [field('fld_name', 'text', 'Name')]);
    return { tenant, form: (await t.app.formCache.get(form.id, true))! };
  }

  function rowFor(tenant: TestTenant, form: { id: string; updatedAt: Date }, name: string): SubmissionRow {
    const createdAt = new Date();
    return {
      id: newId('sub'), organizationId: tenant.organizationId, formId: form.id, formUpdatedAt: form.updatedAt, month,
      data: { fld_name: name }, submitterEmail: null, submitterName: null, source: 'api', createdAt, claims: [],
      idempotency: null,
    };
  }

  /** Stores the rows in one turn of the event loop; answers their outcomes and how many statements stored them together. */
  async function storeTogether(rows: SubmissionRow[]): Promise<{ outcomes: InsertOutcome[]; groups: number }> {
    const before = (await metrics.submissionGroupSize.get()).values.find((v) => v.metricName?.endsWith('_count'))?.value ?? 0;
    const outcomes = await Promise.all(rows.map((row) => t.app.submissionWriter.store(row)));
    const after = (await metrics.submissionGroupSize.get()).values.find((v) => v.metricName?.endsWith('_count'))?.value ?? 0;
    return { outcomes, groups: after - before };
  }

  it('stores the submissions of several organizations and forms in one statement, each with its change', async () => {
    const a = await tenantWithForm();
    const b = await tenantWithForm();
    // A month's first submission splits its quota slots, alone.
    for (const { tenant, form } of [a, b]) expect((await t.app.submissionWriter.store(rowFor(tenant, form, 'first'))).kind).to.equal('created');
    const rows = [rowFor(a.tenant, a.form, 'a1'), rowFor(b.tenant, b.form, 'b1'), rowFor(a.tenant, a.form, 'a2'), rowFor(b.tenant, b.form, 'b2')];
    const { outcomes, groups } = await storeTogether(rows);
    expect(groups).to.equal(1);
    expect(outcomes.map((o) => o.kind)).to.deep.equal(['created', 'created', 'created', 'created']);
    for (const { tenant } of [a, b]) {
      expect(await count('select count(*)::int as n from submissions where organization_id = ?', [tenant.organizationId])).to.equal(3);
      expect(await count('select used as n from usage_counters where organization_id = ? and month = ?', [tenant.organizationId, month])).to.equal(3);
    }
    // One transaction stored them, and their changes follow the order the rows came in.
    const changes = await query(
      'select submission_id, xid::text from submission_changes where submission_id in (?, ?, ?, ?) order by xid, position',
      rows.map((r) => r.id),
    );
    expect(changes.map((c: any) => c.submission_id)).to.deep.equal(rows.map((r) => r.id));
    expect(new Set(changes.map((c: any) => c.xid)).size).to.equal(1);
  });

  it('stores more than MAX_GROUP at once in statements of at most MAX_GROUP, side by side', async () => {
    const { tenant, form } = await tenantWithForm();
    expect((await t.app.submissionWriter.store(rowFor(tenant, form, 'first'))).kind).to.equal('created');
    const rows = Array.from({ length: 2 * MAX_GROUP + 3 }, (_, i) => rowFor(tenant, form, `m${i}`));
    const { outcomes, groups } = await storeTogether(rows);
    expect(groups).to.equal(3);
    expect(outcomes.every((o) => o.kind === 'created')).to.equal(true);
    expect(await count('select count(*)::int as n from submissions where organization_id = ?', [tenant.organizationId])).to.equal(rows.length + 1);
    const perTransaction = await query(
      'select count(*)::int as n from submission_changes where organization_id = ? group by xid order by n desc', [tenant.organizationId]);
    expect(perTransaction[0].n).to.be.at.most(MAX_GROUP);
  });

  it('answers each submission on its own: a changed form, a lost idempotency claim and unknown listeners store nothing of theirs', async () => {
    const { tenant, form } = await tenantWithForm();
    const other = await tenantWithForm();
    const hooked = await tenantWithForm();
    const hook = await call(t.url, 'POST', '/v1/webhooks', {
      key: hooked.tenant.key, body: { name: 'hook', url: 'http://127.0.0.1:9/hook', events: ['submission.created'] },
    });
    expect(hook.status, hook.text).to.equal(201);

    const ok = rowFor(tenant, form, 'ok');
    const stale = rowFor(tenant, { id: form.id, updatedAt: new Date(form.updatedAt.getTime() - 1000) }, 'stale');
    const lost = rowFor(other.tenant, other.form, 'lost');
    lost.idempotency = { key: 'k-lost', requestHash: 'h', responseBody: { submission: { id: lost.id } }, claimToken: 'not-the-token' };
    const claimed = rowFor(other.tenant, other.form, 'claimed');
    const claim = await claimIdempotencyKey(t.app.orm.em.fork(), other.tenant.organizationId, 'k-held', 'h2');
    expect(claim.kind).to.equal('claimed');
    claimed.idempotency = { key: 'k-held', requestHash: 'h2', responseBody: { submission: { id: claimed.id } }, claimToken: (claim as any).token };
    const unheard = rowFor(hooked.tenant, hooked.form, 'no deliveries brought'); // its webhook is not known to it
    const heard = rowFor(hooked.tenant, hooked.form, 'a delivery brought');
    heard.fanout = createdFanout(hooked.form, heard, 1);
    const syncId = newId('crm');
    heard.fanout.syncs = [{ id: syncId, index: 0, integrationId: 'int_1', provider: 'hubspot' }];

    const { outcomes, groups } = await storeTogether([ok, stale, lost, claimed, unheard, heard]);
    expect(groups).to.equal(1);
    expect(outcomes.map((o) => o.kind)).to.deep.equal(['created', 'form_changed', 'idempotency_lost', 'created', 'listeners_unknown', 'created']);
    expect(outcomes[4]).to.deep.include({ webhooks: 1 });
    expect(outcomes[5]).to.deep.include({ deliveryIds: heard.fanout.deliveryIds, syncIds: [syncId], webhooks: 1 });

    const storedIds = (await query('select id from submissions where organization_id in (?, ?, ?)',
      [tenant.organizationId, other.tenant.organizationId, hooked.tenant.organizationId])).map((r: any) => r.id);
    expect(storedIds).to.have.members([ok.id, claimed.id, heard.id]);
    const [answer] = await query('select response_status, response_body, claim_token from idempotency_keys where organization_id = ? and key = ?',
      [other.tenant.organizationId, 'k-held']);
    expect(answer).to.deep.include({ response_status: 201, claim_token: null });
    expect(answer.response_body).to.deep.equal({ submission: { id: claimed.id } });
    const [delivery] = await query('select id, status, event_id from webhook_deliveries where organization_id = ?', [hooked.tenant.organizationId]);
    expect(delivery).to.deep.include({ id: heard.fanout.deliveryIds[0], status: 'pending', event_id: heard.fanout.event!.id });
    const [sync] = await query('select id, status, submission_id, integration_id from crm_syncs where organization_id = ?', [hooked.tenant.organizationId]);
    expect(sync).to.deep.equal({ id: syncId, status: 'pending', submission_id: heard.id, integration_id: 'int_1' });
    // Only the stored ones were counted.
    expect(await count('select coalesce(sum(used), 0)::int as n from usage_counters where organization_id in (?, ?, ?) and month = ?',
      [tenant.organizationId, other.tenant.organizationId, hooked.tenant.organizationId, month])).to.equal(3);
  });

  it('counts its items in the slots with room it can lock, settles the rest, and never passes the quota', async () => {
    const { tenant, form } = await tenantWithForm(20); // 16 slots: four of 2, twelve of 1
    // The month's slots split first, by a submission stored alone.
    expect((await t.app.submissionWriter.store(rowFor(tenant, form, 'first'))).kind).to.equal('created');
    const { outcomes, groups } = await storeTogether(Array.from({ length: 30 }, (_, i) => rowFor(tenant, form, `n${i}`)));
    expect(groups).to.equal(1);
    expect(outcomes.filter((o) => o.kind === 'created')).to.have.length(19);
    expect(outcomes.filter((o) => o.kind === 'quota_exceeded')).to.have.length(11);
    expect(await count('select count(*)::int as n from submissions where organization_id = ?', [tenant.organizationId])).to.equal(20);
    expect(await count('select used as n from usage_counters where organization_id = ? and month = ?', [tenant.organizationId, month])).to.equal(20);
    const perTransaction = await query(
      'select count(*)::int as n from submission_changes where organization_id = ? group by xid order by n desc', [tenant.organizationId]);
    // The group's statement counted its items in as many slots with room as it could lock, more than one slot's allowance.
    expect(perTransaction[0].n).to.be.above(2);
    expect(perTransaction.reduce((sum: number, row: any) => sum + row.n, 0)).to.equal(20);
  });

  it('stores each alone when the statement fails, so one submission cannot fail its neighbours', async () => {
    const { tenant, form } = await tenantWithForm();
    const taken = rowFor(tenant, form, 'taken');
    expect((await t.app.submissionWriter.store(taken)).kind).to.equal('created');
    const again = { ...rowFor(tenant, form, 'same id'), id: taken.id, createdAt: taken.createdAt };
    const rows = [rowFor(tenant, form, 'x'), again, rowFor(tenant, form, 'y')];
    const settled = await Promise.allSettled(rows.map((row) => t.app.submissionWriter.store(row)));
    expect(settled.map((s) => s.status)).to.deep.equal(['fulfilled', 'rejected', 'fulfilled']);
    expect(settled.filter((s) => s.status === 'fulfilled').map((s: any) => s.value.kind)).to.deep.equal(['created', 'created']);
    expect(await count('select count(*)::int as n from submissions where organization_id = ?', [tenant.organizationId])).to.equal(3);
    expect(await count('select used as n from usage_counters where organization_id = ? and month = ?', [tenant.organizationId, month])).to.equal(3);
  });

  it('stores rows that claim nothing the same through the plain statement as through the full one', async () => {
    const a = await tenantWithForm();
    const b = await tenantWithForm();
    const hooked = await tenantWithForm();
    const nearlyFull = await tenantWithForm(20); // 16 slots: four of 2, twelve of 1
    const unsplit = await tenantWithForm(); // its month's slots not split yet
    for (const { tenant, form } of [a, b, hooked, nearlyFull]) {
      expect((await t.app.submissionWriter.store(rowFor(tenant, form, 'first'))).kind).to.equal('created');
    }
    const hook = await call(t.url, 'POST', '/v1/webhooks', {
      key: hooked.tenant.key, body: { name: 'hook', url: 'http://127.0.0.1:9/hook', events: ['submission.created'] },
    });
    expect(hook.status, hook.text).to.equal(201);
    // Room for two left, in two slots: a statement that does not wait for the slots counts in one of them only.
    await query('update usage_counter_slots set used = allowance where organization_id = ? and month = ?', [nearlyFull.tenant.organizationId, month]);
    await query('update usage_counter_slots set used = allowance - 1 where organization_id = ? and month = ? and slot in (3, 9)',
      [nearlyFull.tenant.organizationId, month]);

    const stale = rowFor(a.tenant, { id: a.form.id, updatedAt: new Date(a.form.updatedAt.getTime() - 1000) }, 'stale');
    const unheard = rowFor(hooked.tenant, hooked.form, 'no deliveries brought');
    const heard = rowFor(hooked.tenant, hooked.form, 'a delivery brought');
    heard.fanout = createdFanout(hooked.form, heard, 1);
    heard.fanout.syncs = [{ id: newId('crm'), index: 0, integrationId: 'int_1', provider: 'hubspot' }];
    const synced = rowFor(b.tenant, b.form, 'a sync only');
    synced.fanout = { event: null, deliveryIds: [], syncs: [{ id: newId('crm'), index: 0, integrationId: 'int_2', provider: 'hubspot' }] };
    const held = rowFor(b.tenant, b.form, 'its claimed key');
    const claim = await claimIdempotencyKey(t.app.orm.em.fork(), b.tenant.organizationId, 'k-plain', 'h');
    held.idempotency = { key: 'k-plain', requestHash: 'h', responseBody: { submission: { id: held.id } }, claimToken: (claim as any).token };
    const lost = rowFor(b.tenant, b.form, 'lost');
    lost.idempotency = { key: 'k-plain-lost', requestHash: 'h', responseBody: {}, claimToken: 'not-the-token' };
    const mixed = [
      rowFor(a.tenant, a.form, 'a1'), rowFor(b.tenant, b.form, 'b1'), stale, unheard, heard, synced, held, lost,
      rowFor(unsplit.tenant, unsplit.form, 'u1'), rowFor(a.tenant, a.form, 'a2'),
      ...Array.from({ length: 3 }, (_, i) => rowFor(nearlyFull.tenant, nearlyFull.form, `q${i}`)),
    ];
    const quota = Array.from({ length: 3 }, (_, i) => rowFor(nearlyFull.tenant, nearlyFull.form, `d${i}`));
    const groups: Array<{ rows: SubmissionRow[]; decisive: boolean }> = [
      { rows: mixed, decisive: false }, { rows: quota, decisive: false }, { rows: quota, decisive: true }, { rows: [mixed[0]], decisive: false },
    ];
    const orgs = [a, b, hooked, nearlyFull, unsplit].map((x) => x.tenant.organizationId);

    const client = new Client({ connectionString: process.env.DATABASE_URL });
    await client.connect();
    try {
      /** The statement's answers and what it wrote, in a transaction rolled back. */
      const run = async (text: string, rows: SubmissionRow[], decisive: boolean, claims: boolean) => {
        await client.query('begin');
        try {
          const answers: ItemAnswer[] = (await client.query(text, storeSubmissionsValues(rows, { decisive, claims }))).rows;
          const written = async (sql: string) => (await client.query(sql, [orgs])).rows;
          return {
            answers,
            submissions: await written('select id, organization_id, form_id, data from submissions where organization_id = any($1) order by id'),
            slots: await written('select organization_id, slot, used from usage_counter_slots where organization_id = any($1) order by organization_id, slot'),
            deliveries: await written('select id, webhook_id, event_id, payload from webhook_deliveries where organization_id = any($1) order by id'),
            syncs: await written('select id, submission_id, integration_id from crm_syncs where organization_id = any($1) order by id'),
            changes: await written('select submission_id from submission_changes where organization_id = any($1) order by position'),
            keys: await written('select organization_id, key, response_status, response_body, claim_token from idempotency_keys where organization_id = any($1) order by key'),
          };
        } finally {
          await client.query('rollback');
        }
      };
      const seen: ItemAnswer[] = [];
      for (const { rows, decisive } of groups) {
        expect(claimsNothing(rows)).to.equal(true);
        expect(storingStatement(rows, { decisive }).name).to.equal('store_submissions_plain');
        const full = await run(STORE_SUBMISSIONS_SQL, rows, decisive, true);
        const plain = await run(STORE_PLAIN_SUBMISSIONS_SQL, rows, decisive, false);
        expect(plain, `${rows.length} rows, decisive ${decisive}`).to.deep.equal(full);
        seen.push(...full.answers);
      }
      // The groups went through every answer the plain statement gives.
      expect(seen.some((x) => x.stored && x.webhooks === 1)).to.equal(true);
      expect(seen.some((x) => !x.form_ok)).to.equal(true);
      expect(seen.some((x) => !x.idem_held)).to.equal(true);
      expect(seen.some((x) => !x.listeners_ok)).to.equal(true);
      expect(seen.some((x) => !x.quota_ok && x.slots_ready === false)).to.equal(true);
      expect(seen.some((x) => !x.quota_ok && x.slots_ready && x.slots_room === 1)).to.equal(true);
      expect(seen.some((x) => !x.quota_ok && x.slots_ready && x.slots_room === 0)).to.equal(true);
    } finally {
      await client.end();
    }
    // A row with a claim, or with an idempotency record of its own (a batch item's), takes the full statement.
    const paid = { ...rowFor(a.tenant, a.form, 'paid'), claims: [{ kind: 'payment' as const, id: 'pi_1' }] };
    const batchItem = { ...rowFor(a.tenant, a.form, 'item'), idempotency: { key: 'k:0', requestHash: 'h', responseBody: {} } };
    for (const rows of [[paid], [batchItem], [mixed[0], batchItem]]) {
      expect(claimsNothing(rows)).to.equal(false);
      expect(storingStatement(rows)).to.deep.include({ name: 'store_submissions', text: STORE_SUBMISSIONS_SQL });
    }
  });

  it('answers concurrent requests of one organization through the API, all stored and counted', async () => {
    const { tenant, form } = await tenantWithForm();
    const answers = await Promise.all(Array.from({ length: 40 }, (_, i) =>
      call(t.url, 'POST', `/v1/forms/${form.id}/submissions`, { key: tenant.key, body: { data: { fld_name: `c${i}` } } })));
    expect(answers.map((a) => a.status)).to.deep.equal(Array(40).fill(201));
    const ids = answers.map((a) => a.body.submission.id);
    expect(new Set(ids).size).to.equal(40);
    const stored = await query('select id from submissions where organization_id = ?', [tenant.organizationId]);
    expect(stored.map((r: any) => r.id)).to.have.members(ids);
    expect(await count('select used as n from usage_counters where organization_id = ? and month = ?', [tenant.organizationId, month])).to.equal(40);
  });
});
