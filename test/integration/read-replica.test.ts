import { expect } from 'chai';
import { loadConfig } from '../../config';
import { prepareDatabase } from '../../src/app';
import { call, createPublishedForm, createTenant, fieldInput as field, startTestApp, type TestApp, type TestTenant } from '../support/harness';
import { startPrimaryWithReplica, type PrimaryWithReplica } from '../support/pg-replica';
import { freshQueuePrefix, waitUntil } from '../support/worker-stack';

/** DATABASE_READ_URL against a real streaming replica (pg_basebackup -R) of a primary of the test's own. */
describe('with a read replica (DATABASE_READ_URL)', function () {
  this.timeout(120_000);
  let pg: PrimaryWithReplica;
  let t: TestApp;
  let tenant: TestTenant;
  let form: any;

  before(async () => {
    pg = await startPrimaryWithReplica('formservice_replica');
    await prepareDatabase(loadConfig({ ...process.env, DATABASE_URL: pg.primaryUrl }));
    await pg.caughtUp(); // the tables exist on the replica too
    t = await startTestApp({ DATABASE_URL: pg.primaryUrl, DATABASE_READ_URL: pg.replicaUrl, QUEUE_PREFIX: freshQueuePrefix() });
    tenant = await createTenant(t.app);
    form = await createPublishedForm(t.url, tenant.key, [field('fld_name', 'text', 'Name')]);
  });
  after(async () => {
    await t?.close();
    await pg?.stop();
  });

  const submit = (name: string) =>
    call(t.url, 'POST', `/v1/forms/${form.id}/submissions`, { key: tenant.key, body: { data: { fld_name: name } } });
  const listedIds = async () => {
    const list = await call(t.url, 'GET', `/v1/forms/${form.id}/submissions?limit=100`, { key: tenant.key });
    expect(list.status, list.text).to.equal(200);
    return list.body.submissions.map((s: any) => s.id as string);
  };

  it('serves lists from the replica once it has replayed the commit', async () => {
    const created = await submit('first');
    expect(created.status).to.equal(201);
    await waitUntil('the list shows the submission', async () => (await listedIds()).includes(created.body.submission.id), 10_000);
  });

  it('while the replica lags: a read right after a 201 finds the submission, the list does not yet', async () => {
    await pg.pauseReplay();
    try {
      const created = await submit('while lagging');
      expect(created.status).to.equal(201);
      const read = await call(t.url, 'GET', `/v1/submissions/${created.body.submission.id}`, { key: tenant.key });
      expect(read.status).to.equal(200);
      expect(read.body.submission.rawData).to.deep.equal({ fld_name: 'while lagging' });
      expect(await listedIds()).to.not.include(created.body.submission.id);
      const analytics = await call(t.url, 'GET', `/v1/forms/${form.id}/analytics`, { key: tenant.key });
      expect(analytics.status).to.equal(200);
      await pg.resumeReplay();
      await waitUntil('the replica catches up', async () => (await listedIds()).includes(created.body.submission.id), 10_000);
    } finally {
      await pg.resumeReplay();
    }
  });

  it('serves the change feed and the export from the replica: a change shows once the replica has it', async () => {
    const feedIds = async () => {
      const res = await call(t.url, 'GET', '/v1/submissions/changes?limit=1000', { key: tenant.key });
      expect(res.status, res.text).to.equal(200);
      return res.body.changes.map((c: any) => c.submissionId as string);
    };
    const exported = async () => (await call(t.url, 'GET', `/v1/forms/${form.id}/submissions/export?format=ndjson`, { key: tenant.key })).text;
    await pg.pauseReplay();
    try {
      const created = await submit('feed while lagging');
      expect(created.status).to.equal(201);
      const id = created.body.submission.id;
      expect(await feedIds()).to.not.include(id);
      expect(await exported()).to.not.include(id);
      await pg.resumeReplay();
      await waitUntil('the feed shows the submission', async () => (await feedIds()).includes(id), 10_000);
      expect(await exported()).to.include(id);
    } finally {
      await pg.resumeReplay();
    }
  });
});
