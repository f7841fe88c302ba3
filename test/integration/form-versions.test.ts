import { expect } from 'chai';
import { BACKFILL_FORM_VERSIONS_SQL } from '../../src/db/migrations/Migration20261127000600_form_versions';
import { BACKFILL_FORM_VERSION_COLUMNS_SQL } from '../../src/db/migrations/Migration20261127000601_form_version_columns';
import { FORM_CHANGED_NOTICE, formChangedNotice } from '../../src/public/browser/values';
import { replaceStructure } from '../../src/domain/forms/form-service';
import { normalizeStructure } from '../../src/domain/forms/structure';
import { feedSettled } from '../support/change-feed';
import { call, createKey, createPublishedForm, createTenant, fieldInput, seed, startTestApp, type TestApp, type TestTenant } from '../support/harness';

// Form versions (README "Form versions"): versions kept per structure replacement, submissions
// naming the version they answered, 409 form_changed for answers to an older version, and the
// export's columns across versions.

const V1 = [
  fieldInput('fld_name', 'text', 'Full name', { required: true, order: 0 }),
  fieldInput('fld_email', 'email', 'Email', { order: 1 }),
  fieldInput('fld_topic', 'text', 'Topic', { order: 2 }),
];
/** Version 2: "Topic" relabelled "Department". */
const V2 = [V1[0], V1[1], { ...V1[2], label: 'Department' }];
/** Version 3: "Email" removed. */
const V3 = [V1[0], { ...V1[2], label: 'Department', order: 1 }];
/** Version 4: a new required field. */
const V4 = [...V3, fieldInput('fld_phone', 'phone', 'Phone', { required: true, order: 2 })];

describe('form versions', () => {
  let t: TestApp;
  let tenant: TestTenant;
  let other: TestTenant;

  before(async () => {
    t = await startTestApp();
    tenant = await createTenant(t.app);
    other = await createTenant(t.app);
  });
  after(async () => t.close());

  const replace = (formId: string, fields: unknown[]) =>
    call(t.url, 'PUT', `/v1/forms/${formId}/structure`, { key: tenant.key, body: { pages: [], fields } });
  const submit = (formId: string, data: Record<string, unknown>) =>
    call(t.url, 'POST', `/v1/forms/${formId}/submissions`, { key: tenant.key, body: { data } });
  /** A replacement made by another process: this one's form cache is not told. */
  const replaceElsewhere = async (formId: string, fields: unknown[]) => {
    const { structure } = normalizeStructure({ pages: [], fields }, (prefix) => `${prefix}_x`);
    expect(await replaceStructure(t.app.orm.em.fork(), tenant.organizationId, formId, structure!, undefined, t.app.encryptionKey)).to.not.equal(null);
  };
  const publicPost = (formId: string, body: Record<string, unknown>, path = '') =>
    call(t.url, 'POST', `/public/forms/${formId}${path}`, { body });

  it('numbers versions from 1, +1 per structure replacement, and keeps each one unchanged', async () => {
    const form = await createPublishedForm(t.url, tenant.key, V1);
    expect(form.version).to.equal(1);
    const second = await replace(form.id, V2);
    expect(second.status).to.equal(200);
    expect(second.body.form.version).to.equal(2);
    // A metadata change is no new version.
    const renamed = await call(t.url, 'PUT', `/v1/forms/${form.id}`, { key: tenant.key, body: { title: 'Renamed' } });
    expect(renamed.body.form.version).to.equal(2);
    expect((await replace(form.id, V3)).body.form.version).to.equal(3);
    expect((await call(t.url, 'GET', `/v1/forms/${form.id}`, { key: tenant.key })).body.form.version).to.equal(3);

    const list = await call(t.url, 'GET', `/v1/forms/${form.id}/versions`, { key: tenant.key });
    expect(list.status).to.equal(200);
    expect(list.body.versions.map((v: any) => [v.version, v.fieldCount])).to.deep.equal([[3, 2], [2, 3], [1, 3]]);
    expect(list.body.versions[0].createdAt).to.be.a('string');
    expect(list.body.pagination).to.deep.equal({ limit: 50, offset: 0, total: 3 });
    const paged = await call(t.url, 'GET', `/v1/forms/${form.id}/versions?limit=1&offset=1`, { key: tenant.key });
    expect(paged.body.versions.map((v: any) => v.version)).to.deep.equal([2]);
    expect(paged.body.pagination).to.deep.equal({ limit: 1, offset: 1, total: 3 });

    const first = await call(t.url, 'GET', `/v1/forms/${form.id}/versions/1`, { key: tenant.key });
    expect(first.status).to.equal(200);
    expect(first.body.version.version).to.equal(1);
    expect(first.body.version.fields.map((f: any) => f.label)).to.deep.equal(['Full name', 'Email', 'Topic']);
    expect(first.body.version.pages).to.deep.equal([]);
    const secondKept = await call(t.url, 'GET', `/v1/forms/${form.id}/versions/2`, { key: tenant.key });
    expect(secondKept.body.version.fields.map((f: any) => f.label)).to.deep.equal(['Full name', 'Email', 'Department']);
  });

  it('answers 404 for another organization\'s form or an unknown version, 400 for a bad one, 403 without forms:read', async () => {
    const form = await createPublishedForm(t.url, tenant.key, V1);
    expect((await call(t.url, 'GET', `/v1/forms/${form.id}/versions`, { key: other.key })).status).to.equal(404);
    expect((await call(t.url, 'GET', `/v1/forms/${form.id}/versions/1`, { key: other.key })).status).to.equal(404);
    const unknown = await call(t.url, 'GET', `/v1/forms/${form.id}/versions/2`, { key: tenant.key });
    expect(unknown.status).to.equal(404);
    expect(unknown.body.error).to.equal('not_found');
    for (const bad of ['0', 'abc', '1.5', '-1', '99999999999']) {
      const res = await call(t.url, 'GET', `/v1/forms/${form.id}/versions/${bad}`, { key: tenant.key });
      expect(res.status, bad).to.equal(400);
      expect(res.body.error, bad).to.equal('validation_error');
    }
    expect((await call(t.url, 'GET', `/v1/forms/${form.id}/versions?limit=0`, { key: tenant.key })).status).to.equal(400);
    const writeOnly = await createKey(t.app, tenant.organizationId, ['submissions:write']);
    expect((await call(t.url, 'GET', `/v1/forms/${form.id}/versions`, { key: writeOnly })).status).to.equal(403);
  });

  it('gives concurrent replacements consecutive versions, each kept', async () => {
    const form = await createPublishedForm(t.url, tenant.key, V1);
    const answers = await Promise.all([1, 2, 3, 4, 5].map((n) =>
      replace(form.id, [fieldInput('fld_n', 'text', `Label ${n}`)])));
    expect(answers.map((a) => a.status), JSON.stringify(answers.map((a) => a.body))).to.deep.equal([200, 200, 200, 200, 200]);
    expect(answers.map((a) => a.body.form.version).sort()).to.deep.equal([2, 3, 4, 5, 6]);
    const list = await call(t.url, 'GET', `/v1/forms/${form.id}/versions`, { key: tenant.key });
    expect(list.body.versions.map((v: any) => v.version)).to.deep.equal([6, 5, 4, 3, 2, 1]);
    // Each version holds the structure its replacement answered with.
    for (const answer of answers) {
      const kept = await call(t.url, 'GET', `/v1/forms/${form.id}/versions/${answer.body.form.version}`, { key: tenant.key });
      expect(kept.body.version.fields[0].label).to.equal(answer.body.form.fields[0].label);
    }
  });

  it('keeps what the previous release wrote: a form without versions and a structure replaced without one', async () => {
    const form = await createPublishedForm(t.url, tenant.key, V1);
    // The previous release creates forms without a version row (the column's default, 1).
    await seed(t.app.orm, 'delete from form_versions where form_id = ?', [form.id]);
    expect((await call(t.url, 'GET', `/v1/forms/${form.id}/versions`, { key: tenant.key })).body.versions.map((v: any) => v.version))
      .to.deep.equal([1]);
    // ... and replaces structures without one: a label changed and updated_at moved, the version not.
    await seed(t.app.orm, `update form_fields set label = 'Subject' where form_id = ? and field_id = 'fld_topic'`, [form.id]);
    await seed(t.app.orm, `update forms set updated_at = date_trunc('milliseconds', now()) where id = ?`, [form.id]);
    t.app.forgetForm(form.id);
    const detail = await call(t.url, 'GET', `/v1/forms/${form.id}`, { key: tenant.key });
    expect(detail.body.form.version).to.equal(2);
    const kept = await call(t.url, 'GET', `/v1/forms/${form.id}/versions/2`, { key: tenant.key });
    expect(kept.body.version.fields.map((f: any) => f.label)).to.deep.equal(['Full name', 'Email', 'Subject']);
    expect((await call(t.url, 'GET', `/v1/forms/${form.id}/versions/1`, { key: tenant.key })).body.version.fields[2].label).to.equal('Topic');
    // A submission made now names the recorded version.
    const sub = await submit(form.id, { fld_name: 'Ann' });
    expect(sub.body.submission.formVersion).to.equal(2);
  });

  it('keeps a structure the previous release replaced once, however many readers find it unrecorded at once', async () => {
    const form = await createPublishedForm(t.url, tenant.key, V1);
    await seed(t.app.orm, `update form_fields set label = 'Subject' where form_id = ? and field_id = 'fld_topic'`, [form.id]);
    await seed(t.app.orm, `update forms set updated_at = date_trunc('milliseconds', now()) where id = ?`, [form.id]);
    t.app.forgetForm(form.id);
    const reads = await Promise.all([
      ...[1, 2, 3, 4].map(() => call(t.url, 'GET', `/v1/forms/${form.id}`, { key: tenant.key })),
      ...[1, 2, 3].map(() => call(t.url, 'GET', `/v1/forms/${form.id}/versions`, { key: tenant.key })),
      submit(form.id, { fld_name: 'Ann' }),
      // ... and a replacement by this release at the same time: its own version comes after.
      replace(form.id, V2),
    ]);
    expect(reads.map((r) => r.status)).to.not.include(500);
    const list = await call(t.url, 'GET', `/v1/forms/${form.id}/versions`, { key: tenant.key });
    expect(list.body.versions.map((v: any) => v.version)).to.deep.equal([3, 2, 1]);
    const labels = await Promise.all([1, 2, 3].map(async (n) =>
      (await call(t.url, 'GET', `/v1/forms/${form.id}/versions/${n}`, { key: tenant.key })).body.version.fields[2].label));
    expect(labels).to.deep.equal(['Topic', 'Subject', 'Department']);
  });

  it('the migration\'s backfill writes versions equal to the structure they were taken from (no spurious next version)', async () => {
    const form = await createPublishedForm(t.url, tenant.key, [
      ...V1, fieldInput('fld_pick', 'select', 'Pick', { order: 3, config: { options: [{ label: 'A', value: 'a' }] }, prefillParam: 'pick' }),
    ], { pages: [{ id: 'p1', title: 'Only', order: 0 }] });
    await seed(t.app.orm, 'delete from form_versions where form_id = ?', [form.id]);
    await seed(t.app.orm, BACKFILL_FORM_VERSIONS_SQL);
    t.app.forgetForm(form.id);
    expect((await call(t.url, 'GET', `/v1/forms/${form.id}`, { key: tenant.key })).body.form.version).to.equal(1);
    const list = await call(t.url, 'GET', `/v1/forms/${form.id}/versions`, { key: tenant.key });
    expect(list.body.versions.map((v: any) => v.version)).to.deep.equal([1]);
  });

  it('records the version on the created response, the detail, the list, the change feed and the webhook payload', async () => {
    const hook = await call(t.url, 'POST', '/v1/webhooks', { key: tenant.key, body: { name: 'v', url: 'http://127.0.0.1:9/h', events: ['submission.created'] } });
    expect(hook.status).to.equal(201);
    const form = await createPublishedForm(t.url, tenant.key, V1);
    const first = await submit(form.id, { fld_name: 'Ann', fld_topic: 'Sales' });
    expect(first.status).to.equal(201);
    expect(first.body.submission.formVersion).to.equal(1);
    await replace(form.id, V2);
    const second = await submit(form.id, { fld_name: 'Bob', fld_topic: 'Support' });
    expect(second.body.submission.formVersion).to.equal(2);
    // A batch stores through the same statement.
    const batch = await call(t.url, 'POST', `/v1/forms/${form.id}/submissions/batch`, { key: tenant.key, body: { submissions: [{ data: { fld_name: 'Cy' } }] } });
    expect(batch.body.results[0].submission.formVersion).to.equal(2);

    const detail = await call(t.url, 'GET', `/v1/submissions/${first.body.submission.id}`, { key: tenant.key });
    expect(detail.body.submission.formVersion).to.equal(1);
    // `data` keeps the current labels; the version says which questions were seen.
    expect(detail.body.submission.data).to.deep.equal({ 'Full name': 'Ann', Department: 'Sales' });
    const list = await call(t.url, 'GET', `/v1/forms/${form.id}/submissions`, { key: tenant.key });
    expect(list.body.submissions.map((s: any) => s.formVersion)).to.deep.equal([2, 2, 1]);
    await feedSettled();
    const feed = await call(t.url, 'GET', `/v1/submissions/changes?formId=${form.id}`, { key: tenant.key });
    expect(feed.body.changes.map((c: any) => c.submission.formVersion)).to.deep.equal([1, 2, 2]);

    const [row] = await t.app.orm.em.fork().getConnection().execute(
      `select payload from webhook_deliveries where event_id = ?`, [`evt_${first.body.submission.id.slice(4)}`]);
    const payload = typeof row.payload === 'string' ? JSON.parse(row.payload) : row.payload;
    expect(payload.data.submission.formVersion).to.equal(1);

    // A row stored without a version (the previous release) reads null.
    await seed(t.app.orm, 'update submissions set form_version = null where id = ?', [second.body.submission.id]);
    expect((await call(t.url, 'GET', `/v1/submissions/${second.body.submission.id}`, { key: tenant.key })).body.submission.formVersion).to.equal(null);
  });

  it('public runtime: stores answers to an older version the current one accepts, answers 409 form_changed otherwise', async () => {
    const form = await createPublishedForm(t.url, tenant.key, V1);
    const loaded = await call(t.url, 'GET', `/public/forms/${form.id}`);
    expect(loaded.body.version).to.equal(1);
    await replace(form.id, V4.map((f, i) => ({ ...f, order: i }))); // version 2: Email gone, Phone required
    const current = await call(t.url, 'GET', `/public/forms/${form.id}`);
    expect(current.body.version).to.equal(2);

    const v1Answers = { fld_name: 'Ann', fld_email: 'ann@example.com', fld_topic: 'Sales' };
    for (const path of ['', '/check']) {
      const changed = await publicPost(form.id, { values: v1Answers, formVersion: 1 }, path);
      expect(changed.status, path).to.equal(409);
      expect(changed.body).to.include({ success: false, error: 'form_changed' });
      expect(changed.body.message).to.be.a('string');
      expect(changed.body.form.version).to.equal(2);
      expect(changed.body.form.fields.map((f: any) => f.id)).to.deep.equal(['fld_name', 'fld_topic', 'fld_phone']);
      expect(changed.body.form).to.not.have.property('organizationId');
    }
    // The same answers said to answer the current version are its own 422.
    expect((await publicPost(form.id, { values: v1Answers, formVersion: 2 })).status).to.equal(422);
    // Answers the current version accepts are stored under it, whatever version the page had.
    const accepted = await publicPost(form.id, { values: { fld_name: 'Ann', fld_topic: 'Sales', fld_phone: '+1 555 0100' }, formVersion: 1 });
    expect(accepted.status).to.equal(200);
    const stored = await call(t.url, 'GET', `/v1/submissions/${accepted.body.submissionId}`, { key: tenant.key });
    expect(stored.body.submission.formVersion).to.equal(2);
    // Without formVersion (an integrator's own page of before), refusals are as they were.
    expect((await publicPost(form.id, { values: v1Answers })).status).to.equal(422);
    for (const bad of [0, -1, 1.5, '1', null]) {
      const res = await publicPost(form.id, { values: v1Answers, formVersion: bad });
      expect(res.status, String(bad)).to.equal(400);
      expect(res.body.error).to.equal('invalid_data');
    }
  });

  it('replays an answer kept before versions were recorded with formVersion null (single and batch)', async () => {
    const form = await createPublishedForm(t.url, tenant.key, V1);
    const headers = { 'Idempotency-Key': 'before-versions-1' };
    const body = { data: { fld_name: 'Ann' } };
    const first = await call(t.url, 'POST', `/v1/forms/${form.id}/submissions`, { key: tenant.key, body, headers });
    expect(first.status).to.equal(201);
    const batchHeaders = { 'Idempotency-Key': 'before-versions-2' };
    const batchBody = { submissions: [{ data: { fld_name: 'Bob' } }] };
    expect((await call(t.url, 'POST', `/v1/forms/${form.id}/submissions/batch`, { key: tenant.key, body: batchBody, headers: batchHeaders })).status)
      .to.be.oneOf([200, 201, 207]);
    // As the previous release kept them: no formVersion in the answer.
    await seed(t.app.orm, `update idempotency_keys set response_body = response_body #- '{submission,formVersion}'
                            where organization_id = ? and key = ?`, [tenant.organizationId, 'before-versions-1']);
    await seed(t.app.orm, `update idempotency_keys set response_body = jsonb_set(response_body, '{results,0}',
                                   (response_body #> '{results,0}') #- '{submission,formVersion}')
                            where organization_id = ? and key = ?`, [tenant.organizationId, 'before-versions-2']);
    const again = await call(t.url, 'POST', `/v1/forms/${form.id}/submissions`, { key: tenant.key, body, headers });
    expect(again.status).to.equal(201);
    expect(again.body.submission.id).to.equal(first.body.submission.id);
    expect(again.body.submission).to.have.property('formVersion', null);
    const batchAgain = await call(t.url, 'POST', `/v1/forms/${form.id}/submissions/batch`, { key: tenant.key, body: batchBody, headers: batchHeaders });
    expect(batchAgain.body.results[0].submission).to.have.property('formVersion', null);
  });

  it('answers form_changed with the form as stored, not an older one this process still caches', async () => {
    const form = await createPublishedForm(t.url, tenant.key, V1);
    expect((await call(t.url, 'GET', `/public/forms/${form.id}`)).body.version).to.equal(1); // cached now
    // Another process publishes version 2 (a new required field); this one hears nothing of it.
    await replaceElsewhere(form.id, V4.map((f, i) => ({ ...f, order: i })));
    // A page loaded from that other process answers version 2.
    const answers = { fld_name: 'Ann', fld_topic: 'Sales', fld_phone: '+1 555 0100' };
    const stored = await publicPost(form.id, { values: answers, formVersion: 2 });
    expect(stored.status, stored.text).to.equal(200);
    const detail = await call(t.url, 'GET', `/v1/submissions/${stored.body.submissionId}`, { key: tenant.key });
    expect(detail.body.submission.formVersion).to.equal(2);
    // A page still at version 1 is shown version 2, not the cached version 1 (on /check too).
    await call(t.url, 'GET', `/public/forms/${form.id}`);
    await replaceElsewhere(form.id, V3);
    for (const path of ['', '/check']) {
      const changed = await publicPost(form.id, { values: answers, formVersion: 2 }, path);
      expect(changed.status, path).to.equal(409);
      expect(changed.body.form.version, path).to.equal(3);
    }
  });

  it('answers form_changed with the current form in the language the page was shown in', async () => {
    const created = await call(t.url, 'POST', '/v1/forms', {
      key: tenant.key,
      body: { title: 'Lang', status: 'published', pages: [], fields: V1, translations: { fr: { fields: { fld_name: { label: 'Nom complet' } } } } },
    });
    expect(created.status, created.text).to.equal(201);
    const formId = created.body.form.id;
    expect((await replace(formId, V4.map((f, i) => ({ ...f, order: i })))).status).to.equal(200);
    const changed = await publicPost(formId, { values: { fld_name: 'Ann', fld_email: 'a@example.com' }, formVersion: 1, language: 'fr' });
    expect(changed.status).to.equal(409);
    expect(changed.body.form.fields[0].label).to.equal('Nom complet');
  });

  it('exports one column per field any version had, headed by its newest label, with formVersion; ?version=n filters', async () => {
    const form = await createPublishedForm(t.url, tenant.key, V1);
    await submit(form.id, { fld_name: 'Ann', fld_email: 'ann@example.com', fld_topic: 'Sales' });
    await replace(form.id, V2);
    await submit(form.id, { fld_name: 'Bob', fld_email: 'bob@example.com', fld_topic: 'Support' });
    await replace(form.id, V3);
    await submit(form.id, { fld_name: 'Cy', fld_topic: 'Billing' });
    await replace(form.id, V4);
    await submit(form.id, { fld_name: 'Di', fld_topic: 'Legal', fld_phone: '+1 555 0100' });

    const csv = await call(t.url, 'GET', `/v1/forms/${form.id}/submissions/export?format=csv`, { key: tenant.key });
    expect(csv.status).to.equal(200);
    const lines = csv.text.trim().split('\r\n');
    expect(lines[0]).to.equal('id,createdAt,submitterEmail,submitterName,formVersion,Full name,Department,Phone,Email');
    const cells = lines.slice(1).map((line) => line.split(',').slice(4));
    expect(cells).to.deep.equal([
      ['1', 'Ann', 'Sales', '', 'ann@example.com'],
      ['2', 'Bob', 'Support', '', 'bob@example.com'],
      ['3', 'Cy', 'Billing', '', ''],
      ['4', 'Di', 'Legal', "'+1 555 0100", ''],
    ]);
    const only2 = await call(t.url, 'GET', `/v1/forms/${form.id}/submissions/export?format=csv&version=2`, { key: tenant.key });
    expect(only2.text.trim().split('\r\n').slice(1).map((l) => l.split(',')[4])).to.deep.equal(['2']);
    const nd = await call(t.url, 'GET', `/v1/forms/${form.id}/submissions/export?format=ndjson&version=3`, { key: tenant.key });
    expect(nd.text.trim().split('\n').map((l) => JSON.parse(l).formVersion)).to.deep.equal([3]);
    const unknown = await call(t.url, 'GET', `/v1/forms/${form.id}/submissions/export?format=csv&version=5`, { key: tenant.key });
    expect(unknown.status).to.equal(404);
    expect(unknown.body.error).to.equal('not_found');
    for (const bad of ['0', 'x', '1.5']) {
      expect((await call(t.url, 'GET', `/v1/forms/${form.id}/submissions/export?format=csv&version=${bad}`, { key: tenant.key })).status).to.equal(400);
    }
  });
  it('keeps the export\'s columns with each version, one row per field id (the backfill reads the same from the kept versions)', async () => {
    const form = await createPublishedForm(t.url, tenant.key, V1);
    for (const fields of [V2, V3, V4]) expect((await replace(form.id, fields)).status).to.equal(200);
    const columns = async () => (await t.app.orm.em.fork().getConnection().execute(
      `select field_id, label, version, position from form_version_columns where form_id = ? order by field_id`, [form.id]))
      .map((r: any) => [r.field_id, r.label, r.version, r.position]);
    const kept = await columns();
    expect(kept).to.deep.equal([
      ['fld_email', 'Email', 2, 2], ['fld_name', 'Full name', 4, 1], ['fld_phone', 'Phone', 4, 3], ['fld_topic', 'Department', 4, 2],
    ]);
    await seed(t.app.orm, 'delete from form_version_columns where form_id = ?', [form.id]);
    await seed(t.app.orm, BACKFILL_FORM_VERSION_COLUMNS_SQL);
    expect(await columns()).to.deep.equal(kept);
  });

  it('takes a form through three versions (a relabel; a removed field and a new required one), a submission under each', async () => {
    const log = (label: string, value: unknown) => console.log(`      ${label}: ${typeof value === 'string' ? value : JSON.stringify(value)}`);
    const hook = await call(t.url, 'POST', '/v1/webhooks', { key: tenant.key, body: { name: 'demo', url: 'http://127.0.0.1:9/demo', events: ['submission.created'] } });
    const form = await createPublishedForm(t.url, tenant.key, V1);
    const pageAtV1 = (await call(t.url, 'GET', `/public/forms/${form.id}`)).body;
    const ids: string[] = [];
    ids.push((await submit(form.id, { fld_name: 'Ann', fld_email: 'ann@example.com', fld_topic: 'Sales' })).body.submission.id);
    expect((await replace(form.id, V2)).body.form.version).to.equal(2); // "Topic" relabelled "Department"
    ids.push((await submit(form.id, { fld_name: 'Bob', fld_email: 'bob@example.com', fld_topic: 'Support' })).body.submission.id);
    expect((await replace(form.id, V4)).body.form.version).to.equal(3); // "Email" removed, "Phone" added, required
    ids.push((await submit(form.id, { fld_name: 'Cy', fld_topic: 'Billing', fld_phone: '+1 555 0100' })).body.submission.id);

    const events = new Map<string, any>();
    for (const row of await t.app.orm.em.fork().getConnection().execute(
      `select payload from webhook_deliveries where webhook_id = ?`, [hook.body.webhook.id])) {
      const payload = typeof row.payload === 'string' ? JSON.parse(row.payload) : row.payload;
      events.set(payload.data.submission.id, payload.data.submission);
    }
    for (const [i, id] of ids.entries()) {
      const { submission } = (await call(t.url, 'GET', `/v1/submissions/${id}`, { key: tenant.key })).body;
      log(`submission ${i + 1} detail`, { formVersion: submission.formVersion, data: submission.data, rawData: submission.rawData });
      const event = events.get(id);
      log(`submission ${i + 1} webhook`, { formVersion: event.formVersion, data: event.data, rawData: event.rawData });
      expect(submission.formVersion).to.equal(i + 1);
      expect(event.formVersion).to.equal(i + 1);
    }
    const csv = await call(t.url, 'GET', `/v1/forms/${form.id}/submissions/export?format=csv`, { key: tenant.key });
    console.log(`      export (CSV):\n${csv.text.trim().split('\r\n').map((l) => `        ${l}`).join('\n')}`);
    expect(csv.text.split('\r\n')[0]).to.equal('id,createdAt,submitterEmail,submitterName,formVersion,Full name,Department,Phone,Email');

    // The respondent whose page loaded version 1 sends its answers after version 3 is out.
    const late = await publicPost(form.id, { values: { fld_name: 'Dee', fld_email: 'dee@example.com', fld_topic: 'Legal' }, formVersion: 1 });
    expect(late.status).to.equal(409);
    log('respondent at version 1 gets', `${late.status} ${JSON.stringify({ error: late.body.error, message: late.body.message, form: { version: late.body.form.version, fields: late.body.form.fields.map((f: any) => `${f.id} "${f.label}"${f.required ? ' (required)' : ''}` ) } })}`);
    const notice = formChangedNotice(pageAtV1.fields, late.body.form.fields);
    log('and the hosted page tells them', notice);
    expect(notice.startsWith(FORM_CHANGED_NOTICE.intro)).to.equal(true);
    log('keeping the answers to', Object.keys({ fld_name: 1, fld_email: 1, fld_topic: 1 }).filter((id) => late.body.form.fields.some((f: any) => f.id === id)));
  });
});
