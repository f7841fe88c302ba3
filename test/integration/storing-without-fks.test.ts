import { expect } from 'chai';
import { Client } from 'pg';
import { loadConfig } from '../../config';
import { prepareDatabase } from '../../src/app';
import { Migration20261129000300_storing_without_foreign_keys as StoringWithoutForeignKeys } from '../../src/db/migrations/Migration20261129000300_storing_without_foreign_keys';
import { walkDayCounts, type FormDrift } from '../../src/domain/maintenance/day-count-repair';
import { runMaintenance } from '../../src/domain/maintenance/maintenance';
import { quotaMonth } from '../../src/domain/quotas/quota';
import { storingStatement, type SubmissionRow } from '../../src/domain/submissions/storing-statement';
import { newTimeOrderedId } from '../../src/lib/ids';
import { dropDatabase, sideDatabaseUrl } from '../support/databases';
import { call, createPublishedForm, createTenant, fieldInput, startTestApp, type TestApp, type TestTenant } from '../support/harness';

/**
 * The storing statement's inserts check no organization or form by foreign key
 * (Migration20261129000300_storing_without_foreign_keys, src/README.md "Submissions without foreign
 * keys"): a form or organization deleted by hand still takes every row its foreign keys took, the
 * statement's plan fires no foreign-key trigger on those tables, a row a storing statement commits
 * while its form or organization is deleted by hand is found and deleted, and the migration takes
 * its locks in the order the storing statement does. A database of its own: the tests put the
 * foreign keys back (the migration's `down`), in transactions rolled back and, in the last one, for good.
 */
describe('submissions without foreign keys', function () {
  this.timeout(120_000);
  const databaseUrl = sideDatabaseUrl('fks');
  let t: TestApp;
  const clients: Client[] = [];

  before(async () => {
    await prepareDatabase(loadConfig({ ...process.env, DATABASE_URL: databaseUrl }));
    t = await startTestApp({ DATABASE_URL: databaseUrl });
  });
  after(async () => {
    await Promise.all(clients.map((c) => c.end().catch(() => {})));
    await t?.close();
    await dropDatabase(databaseUrl);
  });

  async function client(): Promise<Client> {
    const c = new Client({ connectionString: databaseUrl });
    await c.connect();
    clients.push(c);
    return c;
  }

  /** The migration's statements, one string a transaction. */
  async function migrationSql(direction: 'up' | 'down'): Promise<string[]> {
    const migration = new StoringWithoutForeignKeys(t.app.orm.em.getDriver(), t.app.orm.config);
    await migration[direction]();
    return migration.getQueries().map(String);
  }

  /** Rows of every table (partitions within their table), by table. */
  async function tableRows(c: Client): Promise<Record<string, number>> {
    const { rows: tables } = await c.query(`select c.relname from pg_class c join pg_namespace n on n.oid = c.relnamespace
       where n.nspname = 'public' and c.relkind in ('r', 'p') and not c.relispartition order by c.relname`);
    const counts: Record<string, number> = {};
    for (const { relname } of tables) counts[relname] = (await c.query(`select count(*)::int as n from "${relname}"`)).rows[0].n;
    return counts;
  }

  /** `run` in a transaction on the schema as it was, with the foreign keys (the migration's `down`), rolled back. */
  async function withForeignKeys<T>(run: (c: Client) => Promise<T>): Promise<T> {
    const c = await client();
    await c.query('begin');
    try {
      for (const sql of await migrationSql('down')) await c.query(sql);
      return await run(c);
    } finally {
      await c.query('rollback');
    }
  }

  /**
   * An organization with what its API writes: two forms, a webhook of one form and one of all its
   * forms (pending deliveries and their owed rows: no worker runs), submissions single, idempotent
   * and batched, a deleted one (its change and outbox rows).
   */
  async function busyTenant(): Promise<{ tenant: TestTenant; formIds: [string, string] }> {
    const tenant = await createTenant(t.app);
    const forms = [
      await createPublishedForm(t.url, tenant.key, [fieldInput('fld_n', 'text', 'N')]),
      await createPublishedForm(t.url, tenant.key, [fieldInput('fld_n', 'text', 'N')]),
    ];
    for (const formId of [forms[0].id, null]) {
      const hook = await call(t.url, 'POST', '/v1/webhooks', {
        key: tenant.key, body: { name: 'hook', url: 'http://127.0.0.1:9/hook', events: ['submission.created'], ...(formId ? { formId } : {}) },
      });
      expect(hook.status, hook.text).to.equal(201);
    }
    const ids: string[] = [];
    for (const form of forms) {
      for (let i = 0; i < 3; i++) {
        const res = await call(t.url, 'POST', `/v1/forms/${form.id}/submissions`, {
          key: tenant.key, body: { data: { fld_n: `n${i}` } }, headers: i === 0 ? { 'Idempotency-Key': `single-${form.id}` } : {},
        });
        expect(res.status, res.text).to.equal(201);
        ids.push(res.body.submission.id);
      }
      const batch = await call(t.url, 'POST', `/v1/forms/${form.id}/submissions/batch`, {
        key: tenant.key, body: { submissions: [{ data: { fld_n: 'b1' } }, { data: { fld_n: 'b2' } }] }, headers: { 'Idempotency-Key': `batch-${form.id}` },
      });
      expect(batch.status, batch.text).to.equal(200);
    }
    const deleted = await call(t.url, 'DELETE', `/v1/submissions/${ids[1]}`, { key: tenant.key });
    expect(deleted.status, deleted.text).to.equal(204);
    return { tenant, formIds: [forms[0].id, forms[1].id] };
  }

  for (const parent of ['forms', 'organizations'] as const) {
    it(`a row of ${parent} deleted by hand takes with it the rows of every table its foreign keys took`, async () => {
      const { tenant, formIds } = await busyTenant();
      await busyTenant(); // a bystander, whose rows stay
      const id = parent === 'forms' ? formIds[0] : tenant.organizationId;
      const c = await client();
      const before = await tableRows(c);
      const withKeys = await withForeignKeys(async (k) => {
        await k.query(`delete from ${parent} where id = $1`, [id]);
        return tableRows(k);
      });
      await c.query(`delete from ${parent} where id = $1`, [id]);
      const after = await tableRows(c);
      expect(after).to.deep.equal(withKeys);
      // what the foreign keys took before, and so the triggers now
      const took = Object.keys(before).filter((table) => after[table] < before[table]);
      expect(took).to.include.members([parent, 'submissions', 'webhooks', 'webhook_deliveries', 'webhook_delivery_owed']);
      expect(took.includes('submission_changes'), 'change records go with their organization only').to.equal(parent === 'organizations');
      // the form's 3 single and 2 batched submissions less the one deleted (and the other form's 5)
      expect(before.submissions - after.submissions).to.equal(parent === 'forms' ? 4 : 9);
    });
  }

  for (const parent of ['forms', 'organizations'] as const) {
    it(`truncate ${parent} cascade takes with it the rows of every table its foreign keys took`, async () => {
      await busyTenant();
      const c = await client();
      const withKeys = await withForeignKeys(async (k) => {
        await k.query(`truncate ${parent} cascade`);
        return tableRows(k);
      });
      await c.query('begin');
      try {
        await c.query(`truncate ${parent} cascade`);
        const after = await tableRows(c);
        expect(after).to.deep.equal(withKeys);
        expect(after.submissions).to.equal(0);
        expect(after.submission_changes > 0, 'change records go with their organizations only').to.equal(parent === 'forms');
      } finally {
        await c.query('rollback');
      }
    });
  }

  /** Items of the forms (round-robin) as the group commit sends them: a published form's cached `updatedAt`. */
  async function rowsFor(tenant: TestTenant, formIds: string[], n: number, idempotent = false): Promise<SubmissionRow[]> {
    const forms = await Promise.all(formIds.map(async (id) => (await t.app.formCache.get(id, true))!));
    return Array.from({ length: n }, (_, i): SubmissionRow => {
      const form = forms[i % forms.length];
      const createdAt = new Date();
      return {
        id: newTimeOrderedId('sub', createdAt), organizationId: tenant.organizationId, formId: form.id, formUpdatedAt: form.updatedAt,
        month: quotaMonth(createdAt), data: { fld_n: String(i) }, submitterEmail: null, submitterName: null, source: 'api',
        createdAt, claims: [], idempotency: idempotent ? { key: `plan-${createdAt.getTime()}-${i}`, requestHash: 'h', responseBody: {} } : null,
      };
    });
  }

  /** A tenant with forms nobody listens to, and its month's quota slots split (by a first submission through the API). */
  async function quietTenant(forms = 2): Promise<{ tenant: TestTenant; formIds: string[] }> {
    const tenant = await createTenant(t.app);
    const formIds: string[] = [];
    for (let i = 0; i < forms; i++) formIds.push((await createPublishedForm(t.url, tenant.key, [fieldInput('fld_n', 'text', 'N')])).id);
    const first = await call(t.url, 'POST', `/v1/forms/${formIds[0]}/submissions`, { key: tenant.key, body: { data: { fld_n: 'first' } } });
    expect(first.status, first.text).to.equal(201);
    return { tenant, formIds };
  }

  /** The `Trigger for constraint …` lines of EXPLAIN ANALYZE of the storing statement of `rows`, rolled back. */
  async function constraintTriggers(c: Client, rows: SubmissionRow[]): Promise<string[]> {
    const { text, values } = storingStatement(rows);
    await c.query('savepoint plan');
    try {
      const plan = await c.query({ text: `explain (analyze, costs off, timing off) ${text}`, values });
      const lines = plan.rows.map((row) => row['QUERY PLAN'] as string);
      return [...new Set(lines.flatMap((line) => /^Trigger for constraint (\S+)/.exec(line)?.[1] ?? []))].sort();
    } finally {
      await c.query('rollback to savepoint plan');
    }
  }

  it('the storing statement (and a batch\'s, with its idempotency records) fires no foreign-key trigger on submissions or change records', async () => {
    const { tenant, formIds } = await quietTenant();
    const c = await client();
    await c.query('begin');
    try {
      expect(await constraintTriggers(c, await rowsFor(tenant, formIds, 16))).to.deep.equal([]);
      // a batch's items insert their idempotency records: the organization's key stays checked there
      expect(await constraintTriggers(c, await rowsFor(tenant, formIds, 16, true))).to.deep.equal(['idempotency_keys_organization_id_fkey']);
    } finally {
      await c.query('rollback');
    }
    // the same statements on the schema as it was (which locks the forms the rows are read from): the checks this migration removed
    const [plain, idempotent] = [await rowsFor(tenant, formIds, 16), await rowsFor(tenant, formIds, 16, true)];
    const before = await withForeignKeys(async (k) => [await constraintTriggers(k, plain), await constraintTriggers(k, idempotent)]);
    const removed = ['submission_changes_organization_id_fkey', 'submissions_form_id_fkey1', 'submissions_organization_id_fkey1'];
    expect(before).to.deep.equal([removed, ['idempotency_keys_organization_id_fkey', ...removed].sort()]);
  });

  it('the storing statement (either variant) stores no item under a form of another organization or a form that does not exist', async () => {
    const own = await quietTenant(1);
    const other = await quietTenant(1);
    const otherForm = (await t.app.formCache.get(other.formIds[0], true))!;
    for (const idempotent of [false, true]) {
      const [valid, crossTenant, missing] = await rowsFor(own.tenant, own.formIds, 3, idempotent);
      // an item of this organization naming the other's form (its current `updatedAt`), and one naming a form that never was
      const rows = [valid, { ...crossTenant, formId: otherForm.id, formUpdatedAt: otherForm.updatedAt }, { ...missing, formId: 'frm_never_was' }];
      const answers = (await (await client()).query({ ...storingStatement(rows) })).rows.map((a) => [a.form_ok, a.stored]);
      expect(answers, `idempotent: ${idempotent}`).to.deep.equal([[1, 1], [0, 0], [0, 0]]);
      const stored = await t.query('select id from submissions where id in (?, ?, ?) order by id', rows.map((r) => r.id));
      expect(stored.map((r: { id: string }) => r.id)).to.deep.equal([valid.id]);
    }
  });

  it('the checks the storing statement still fires: of webhooks, which the API deletes, and of its claims\' and idempotency records\' organization', async () => {
    const { tenant, formIds } = await quietTenant();
    const hook = await call(t.url, 'POST', '/v1/webhooks', {
      key: tenant.key, body: { name: 'hook', url: 'http://127.0.0.1:9/hook', events: ['submission.created'] },
    });
    expect(hook.status, hook.text).to.equal(201);
    const rows = (await rowsFor(tenant, formIds, 4, true)).map((row): SubmissionRow => ({
      ...row,
      claims: [{ kind: 'payment', id: `pi_${row.id}` }, { kind: 'upload', id: `upl_${row.id}` }],
      fanout: { event: { id: `evt_${row.id}`, payload: '{}' }, deliveryIds: [`dlv_${row.id}`], syncs: [] },
    }));
    const c = await client();
    await c.query('begin');
    try {
      expect(await constraintTriggers(c, rows)).to.deep.equal([
        'idempotency_keys_organization_id_fkey', 'payment_claims_organization_id_fkey', 'upload_claims_organization_id_fkey',
        'webhook_deliveries_webhook_id_fkey', 'webhook_delivery_owed_webhook_id_fkey',
      ]);
    } finally {
      await c.query('rollback');
    }
  });

  /** The storing statement of `rows` run in a transaction left open on `c`: every row stored. */
  async function storeUncommitted(c: Client, rows: SubmissionRow[]): Promise<void> {
    const { text, values } = storingStatement(rows);
    await c.query('begin');
    const answers = await c.query({ text, values });
    expect(answers.rows.map((a) => a.stored)).to.deep.equal(rows.map(() => 1));
  }

  const submissionsOf = async (formId: string) => (await t.query('select count(*)::int as n from submissions where form_id = ?', [formId]))[0].n;
  const dayCountOf = async (formId: string) =>
    (await t.query('select coalesce(sum(count), 0)::int as n from submission_day_counts where form_id = ?', [formId]))[0].n;

  /**
   * A storing statement of `n` rows of a form left uncommitted while the operator deletes the form
   * by hand, then committed: the delete waits for none of its locks (a foreign key's check held one)
   * and its trigger does not see them. Answers the form.
   */
  async function storeWhileTheFormIsDeleted(n: number): Promise<string> {
    const { tenant, formIds: [formId] } = await quietTenant(1);
    const storing = await client();
    await storeUncommitted(storing, await rowsFor(tenant, [formId], n));
    const operator = await client();
    await operator.query("set lock_timeout = '2s'");
    await operator.query('delete from forms where id = $1', [formId]);
    await storing.query('commit');
    expect(await submissionsOf(formId), 'committed after the delete trigger looked').to.equal(n);
    return formId;
  }

  it('a submission committed while its form is deleted by hand outlives the delete: counts repair deletes it and counts nothing', async () => {
    const formId = await storeWhileTheFormIsDeleted(2);
    const found: FormDrift[] = [];
    await walkDayCounts(t.app.orm.em.fork(), { repair: true, formId }, (d) => found.push(d));
    expect(await submissionsOf(formId)).to.equal(0);
    expect(await dayCountOf(formId)).to.equal(0);
    // the first submission and the two stored meanwhile were counted; no row is left
    expect(found.filter((d) => 'day' in d).map((d) => [d.counted, d.stored])).to.deep.equal([[0, 3]]);
    const again: FormDrift[] = [];
    await walkDayCounts(t.app.orm.em.fork(), { repair: false, formId }, (d) => again.push(d));
    expect(again).to.deep.equal([]);
  });

  it('a submission committed while its form is deleted by hand outlives the delete: the hourly maintenance deletes it', async () => {
    const formId = await storeWhileTheFormIsDeleted(3);
    const report = await runMaintenance(t.app.orm.em.fork());
    expect(report.dayCountsRepairFailed).to.equal(null);
    expect(report.orphanSubmissionsDeleted).to.equal(3);
    expect(await submissionsOf(formId)).to.equal(0);
    expect(await dayCountOf(formId)).to.equal(0);
  });

  it('the rows of a form deleted through the API (marked deleted, not gone) stay: neither the hourly maintenance nor counts repair deletes them', async () => {
    const { tenant, formIds: [formId] } = await quietTenant(1);
    const second = await call(t.url, 'POST', `/v1/forms/${formId}/submissions`, { key: tenant.key, body: { data: { fld_n: 'second' } } });
    expect(second.status, second.text).to.equal(201);
    const deleted = await call(t.url, 'DELETE', `/v1/forms/${formId}`, { key: tenant.key });
    expect(deleted.status, deleted.text).to.equal(204);
    expect((await t.query('select deleted_at is not null as marked from forms where id = ?', [formId]))[0].marked).to.equal(true);
    await runMaintenance(t.app.orm.em.fork());
    await walkDayCounts(t.app.orm.em.fork(), { repair: true, formId }, () => {});
    expect(await submissionsOf(formId)).to.equal(2);
  });

  it('an organization deleted by hand while a storing statement of it runs waits for its quota slot, and takes its rows', async () => {
    const { tenant, formIds: [formId] } = await quietTenant(1);
    const storing = await client();
    await storeUncommitted(storing, await rowsFor(tenant, [formId], 3));
    const operator = await client();
    const operatorPid = (await operator.query('select pg_backend_pid() as pid')).rows[0].pid as number;
    await operator.query("set lock_timeout = '10s'");
    const deleting = operator.query('delete from organizations where id = $1', [tenant.organizationId])
      .then((res) => res.rowCount, (err: Error) => err.message);
    await waitsOnALock(await client(), operatorPid);
    await storing.query('commit');
    expect(await deleting).to.equal(1);
    expect(await submissionsOf(formId)).to.equal(0);
    expect((await t.query('select count(*)::int as n from submission_changes where organization_id = ?', [tenant.organizationId]))[0].n).to.equal(0);
  });

  /** Until the backend `pid` waits on a lock (`c`: a connection outside any transaction, whose view of the activity is current). */
  async function waitsOnALock(c: Client, pid: number): Promise<void> {
    for (let i = 0; i < 500; i++) {
      const { rows } = await c.query(`select 1 from pg_stat_activity where pid = $1 and wait_event_type = 'Lock'`, [pid]);
      if (rows.length) return;
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    throw new Error(`backend ${pid} never waited on a lock`);
  }

  it('the migration locks each parent before its children: a storing statement queued behind it is no deadlock\'s victim', async () => {
    const { tenant, formIds } = await quietTenant();
    const [holder, migrator, storer, observer] = [await client(), await client(), await client(), await client()];
    const pidOf = async (c: Client) => (await c.query('select pg_backend_pid() as pid')).rows[0].pid as number;
    const [migratorPid, storerPid] = [await pidOf(migrator), await pidOf(storer)];
    // the schema before the migration
    for (const sql of await migrationSql('down')) await migrator.query(sql);
    // the storing connection as the service's: its named statement planned and run a few times
    for (let i = 0; i < 6; i++) await storer.query({ ...storingStatement(await rowsFor(tenant, formIds, 2)) });
    await migrator.query("set lock_timeout = '20s'");
    for (const step of await migrationSql('up')) {
      const rows = await rowsFor(tenant, formIds, 2);
      // a long read of the children: the step waits for it, and the storing statement behind the step
      await holder.query('begin; select count(*) from submissions; select count(*) from submission_changes');
      const migrating = migrator.query(step);
      await waitsOnALock(observer, migratorPid);
      const storing = storer.query({ ...storingStatement(rows) })
        .then((res) => res.rows.map((a) => a.stored), (err: Error) => err.message);
      await waitsOnALock(observer, storerPid);
      await holder.query('commit');
      await migrating;
      expect(await storing).to.deep.equal([1, 1]);
    }
    const { rows: keys } = await holder.query(`select conname from pg_constraint
      where contype = 'f' and conrelid in ('submissions'::regclass, 'submission_changes'::regclass)`);
    expect(keys).to.deep.equal([]);
  });
});
