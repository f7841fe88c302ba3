import { expect } from 'chai';
import { feedSettled } from '../support/change-feed';
import { call, createPublishedForm, createTenant, fieldInput as field, startTestApp, type TestApp, type TestTenant } from '../support/harness';
import { pgBouncerBinary, startPgBouncer, type RunningPgBouncer } from '../support/pgbouncer';

/** The service behind a real PgBouncer 1.18 in transaction pooling mode (DB_PREPARED_STATEMENTS=false). */
describe('through PgBouncer in transaction pooling mode', function () {
  this.timeout(60_000);
  let bouncer: RunningPgBouncer;
  let t: TestApp;
  let tenant: TestTenant;
  let form: any;

  before(async function () {
    if (!pgBouncerBinary()) {
      if (process.env.CI) throw new Error('pgbouncer is not installed: .ci/run installs it');
      this.skip();
    }
    bouncer = await startPgBouncer(process.env.DATABASE_URL!);
    t = await startTestApp({ DATABASE_URL: bouncer.url, DB_PREPARED_STATEMENTS: 'false', DB_POOL_MAX: '10' });
    tenant = await createTenant(t.app);
    form = await createPublishedForm(t.url, tenant.key, [
      field('fld_name', 'text', 'Name', { required: true, order: 0 }),
      field('fld_email', 'email', 'Email', { order: 1 }),
    ]);
  });
  after(async () => {
    await t?.close();
    await bouncer?.stop();
  });

  const submit = (formId: string, body: unknown, key = tenant.key, headers: Record<string, string> = {}) =>
    call(t.url, 'POST', `/v1/forms/${formId}/submissions`, { key, body, headers });

  it('stores concurrent submissions, each readable right after its 201', async () => {
    const answers = await Promise.all(Array.from({ length: 40 }, (_, i) => submit(form.id, { data: { fld_name: `n${i}` } })));
    expect(answers.map((a) => a.status)).to.deep.equal(new Array(40).fill(201));
    const reads = await Promise.all(answers.map((a) => call(t.url, 'GET', `/v1/submissions/${a.body.submission.id}`, { key: tenant.key })));
    expect(reads.map((r) => r.status)).to.deep.equal(new Array(40).fill(200));
    expect(new Set(reads.map((r) => r.body.submission.rawData.fld_name)).size).to.equal(40);
  });

  it('never exceeds the monthly quota under concurrency', async () => {
    const limited = await createTenant(t.app, { monthlyQuota: 25 });
    const limitedForm = await createPublishedForm(t.url, limited.key, [field('fld_name', 'text', 'Name')]);
    const answers = await Promise.all(Array.from({ length: 40 }, (_, i) => submit(limitedForm.id, { data: { fld_name: `q${i}` } }, limited.key)));
    const statuses = answers.map((a) => a.status);
    expect(statuses.filter((s) => s === 201)).to.have.length(25);
    expect(statuses.filter((s) => s === 402)).to.have.length(15);
    const usage = await t.app.orm.em.fork().getConnection().execute(
      'select used from usage_counters where organization_id = ?', [limited.organizationId]);
    expect(usage[0].used).to.equal(25);
  });

  it('replays an Idempotency-Key and refuses it with another body', async () => {
    const headers = { 'Idempotency-Key': `pgb-${Date.now()}` };
    const attempts = await Promise.all(Array.from({ length: 6 }, () => submit(form.id, { data: { fld_name: 'same' } }, tenant.key, headers)));
    const ids = new Set(attempts.filter((a) => a.status === 201).map((a) => a.body.submission.id));
    expect(ids.size).to.equal(1);
    const again = await submit(form.id, { data: { fld_name: 'same' } }, tenant.key, headers);
    expect(again.status).to.equal(201);
    expect(again.body.submission.id).to.equal([...ids][0]);
    const other = await submit(form.id, { data: { fld_name: 'other' } }, tenant.key, headers);
    expect(other.status).to.equal(422);
    expect(other.body.error).to.equal('idempotency_key_reused');
  });

  it('validates against a replaced structure at once', async () => {
    const replaced = await call(t.url, 'PUT', `/v1/forms/${form.id}/structure`, {
      key: tenant.key,
      body: { pages: [], fields: [field('fld_name', 'text', 'Name', { required: true }), field('fld_age', 'number', 'Age', { required: true, order: 1 })] },
    });
    expect(replaced.status).to.equal(200);
    const missing = await submit(form.id, { data: { fld_name: 'a' } });
    expect(missing.status).to.equal(400);
    expect(missing.body.error).to.equal('missing_required_fields');
    const ok = await submit(form.id, { data: { fld_name: 'a', fld_age: 30 } });
    expect(ok.status).to.equal(201);
  });

  it('stores batches, follows the change feed and streams an export through it', async () => {
    const bulkForm = await createPublishedForm(t.url, tenant.key, [field('fld_name', 'text', 'Name', { required: true })]);
    const batches = await Promise.all(Array.from({ length: 4 }, (_, b) => call(t.url, 'POST', `/v1/forms/${bulkForm.id}/submissions/batch`, {
      key: tenant.key, body: { submissions: Array.from({ length: 50 }, (_, i) => ({ data: { fld_name: `b${b}-${i}` } })) },
    })));
    const ids = batches.flatMap((b) => b.body.results.map((r: any) => r.submission.id));
    expect(ids).to.have.length(200);
    await feedSettled();
    const feed = await call(t.url, 'GET', `/v1/submissions/changes?formId=${bulkForm.id}&limit=1000`, { key: tenant.key });
    expect(feed.body.changes.map((c: any) => c.submissionId).sort()).to.deep.equal([...ids].sort());
    const exported = await call(t.url, 'GET', `/v1/forms/${bulkForm.id}/submissions/export?format=ndjson`, { key: tenant.key });
    expect(exported.status).to.equal(200);
    expect(exported.text.trim().split('\n').map((line) => JSON.parse(line).id).sort()).to.deep.equal([...ids].sort());
  });

  it('(why the setting exists) named prepared statements fail through transaction pooling', async () => {
    const prepared = await startTestApp({ DATABASE_URL: bouncer.url, DB_PREPARED_STATEMENTS: 'true', DB_POOL_MAX: '10' });
    try {
      // Batches, each its own storing statement, so that many run at once on different connections
      // (single posts share one group's statement at a time, which may keep finding its server connection).
      const answers = await Promise.all(Array.from({ length: 60 }, (_, i) =>
        call(prepared.url, 'POST', `/v1/forms/${form.id}/submissions/batch`, {
          key: tenant.key, body: { submissions: [{ data: { fld_name: `p${i}`, fld_age: 1 } }, { data: { fld_name: `q${i}`, fld_age: 2 } }] },
        })));
      expect(answers.filter((a) => a.status >= 500).length).to.be.greaterThan(0);
    } finally {
      await prepared.close();
    }
  });
});
