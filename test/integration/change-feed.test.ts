import { expect } from 'chai';
import { Client } from 'pg';
import { decodeCursor, encodeCursor, purgeSubmissionChanges } from '../../src/domain/submissions/changes';
import { DELETE_SUBMISSION_SQL } from '../../src/domain/submissions/deletion';
import { splitQuotaSlots } from '../../src/domain/submissions/quota-slots';
import { STORE_SUBMISSIONS_SQL, storeSubmissionsValues, type SubmissionRow } from '../../src/domain/submissions/storing-statement';
import { quotaMonth } from '../../src/domain/quotas/quota';
import { newId } from '../../src/lib/ids';
import { feedSettled } from '../support/change-feed';
import {
  call, createKey, createPublishedForm, createTenant, fieldInput as field, startTestApp, type TestApp, type TestTenant,
} from '../support/harness';

/** knex-style `?` placeholders as PostgreSQL's `$n`, to run a store's statement on a bare client. */
const positional = (sql: string) => { let n = 0; return sql.replace(/\?/g, () => `$${++n}`); };
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Connections of their own that store as the service's do (which run with JIT off, see src/db/orm.ts). */
const SERVICE_LIKE_CONNECTION = { connectionString: process.env.DATABASE_URL, options: '-c jit=off' };

describe('change feed (GET /v1/submissions/changes)', () => {
  let t: TestApp;
  let tenant: TestTenant;
  let form: any;

  before(async () => {
    t = await startTestApp();
    tenant = await createTenant(t.app);
    form = await createPublishedForm(t.url, tenant.key, [
      field('fld_name', 'text', 'Name', { order: 0 }),
      field('fld_secret', 'name', 'Secret', { order: 1, config: { sensitive: true } }),
    ]);
    // The tests below also store submissions with the bare statement, which counts only in split slots.
    await splitQuotaSlots(t.app.orm.em.fork(), tenant.organizationId, quotaMonth(new Date()));
  });
  after(async () => t.close());

  const feed = (query: string, key = tenant.key) => call(t.url, 'GET', `/v1/submissions/changes${query}`, { key });
  const submit = async (body: unknown, formId = form.id, key = tenant.key) => {
    const res = await call(t.url, 'POST', `/v1/forms/${formId}/submissions`, { key, body });
    expect(res.status, res.text).to.equal(201);
    return res.body.submission;
  };

  /** Every change after `cursor`, following nextCursor page by page. */
  async function drain(cursor: string | null, query = '', key = tenant.key, limit = 1000) {
    const changes: any[] = [];
    for (;;) {
      const res = await feed(`?limit=${limit}${cursor ? `&after=${cursor}` : ''}${query}`, key);
      expect(res.status, res.text).to.equal(200);
      changes.push(...res.body.changes);
      cursor = res.body.nextCursor;
      if (!res.body.hasMore) return { changes, cursor: cursor! };
    }
  }

  it('lists creations and deletions in order, pages with nextCursor, and answers the same cursor when nothing is new', async () => {
    const own = await createTenant(t.app);
    const ownForm = await createPublishedForm(t.url, own.key, [field('fld_name', 'text', 'Name', { order: 0 })]);
    const a = await submit({ data: { fld_name: 'A' }, submitterEmail: 'a@example.com' }, ownForm.id, own.key);
    const b = await submit({ data: { fld_name: 'B' } }, ownForm.id, own.key);
    const c = await submit({ data: { fld_name: 'C' } }, ownForm.id, own.key);
    expect((await call(t.url, 'DELETE', `/v1/submissions/${b.id}`, { key: own.key })).status).to.equal(204);
    await feedSettled();

    const first = await feed('?limit=2', own.key);
    expect(first.status).to.equal(200);
    expect(first.body.hasMore).to.equal(true);
    expect(first.body.changes).to.have.length(2);
    const [created] = first.body.changes;
    expect(created).to.deep.equal({
      type: 'submission.created', submissionId: a.id, formId: ownForm.id, occurredAt: a.createdAt,
      submission: { id: a.id, submitterEmail: 'a@example.com', submitterName: null, createdAt: a.createdAt, formVersion: 1, data: { fld_name: 'A' } },
    });
    // b was deleted since: its creation is still listed, without the submission.
    expect(first.body.changes[1]).to.include({ type: 'submission.created', submissionId: b.id, submission: null });

    const second = await feed(`?limit=2&after=${first.body.nextCursor}`, own.key);
    expect(second.body.changes.map((ch: any) => [ch.type, ch.submissionId])).to.deep.equal([
      ['submission.created', c.id], ['submission.deleted', b.id],
    ]);
    expect(second.body.changes[1].submission).to.equal(null);
    expect(second.body.changes[1].formId).to.equal(ownForm.id);
    expect(second.body.hasMore).to.equal(false);

    const empty = await feed(`?after=${second.body.nextCursor}`, own.key);
    expect(empty.body).to.deep.equal({ changes: [], nextCursor: second.body.nextCursor, hasMore: false });

    const d = await submit({ data: { fld_name: 'D' } }, ownForm.id, own.key);
    await feedSettled();
    const next = await feed(`?after=${second.body.nextCursor}`, own.key);
    expect(next.body.changes.map((ch: any) => ch.submissionId)).to.deep.equal([d.id]);
    expect(next.body.nextCursor).to.not.equal(second.body.nextCursor);
  });

  it('shows sensitive values as Redacted', async () => {
    const { cursor } = await drain(null);
    await submit({ data: { fld_name: 'Ada', fld_secret: { format: 'full', fullName: 'Ada Lovelace' } } });
    await feedSettled();
    const { changes } = await drain(cursor);
    expect(changes).to.have.length(1);
    expect(changes[0].submission.data).to.deep.equal({ fld_name: 'Ada', fld_secret: 'Redacted' });
  });

  it('filters by formId; another organization\'s form is 404 and its changes never show', async () => {
    const other = await createTenant(t.app);
    const otherForm = await createPublishedForm(t.url, other.key, [field('fld_name', 'text', 'Name', { order: 0 })]);
    const secondForm = await createPublishedForm(t.url, tenant.key, [field('fld_name', 'text', 'Name', { order: 0 })]);
    const { cursor } = await drain(null);
    const mine = await submit({ data: { fld_name: 'mine' } }, secondForm.id);
    await submit({ data: { fld_name: 'first form' } });
    await submit({ data: { fld_name: 'theirs' } }, otherForm.id, other.key);
    await feedSettled();

    const filtered = await drain(cursor, `&formId=${secondForm.id}`);
    expect(filtered.changes.map((ch: any) => ch.submissionId)).to.deep.equal([mine.id]);
    const all = await drain(cursor);
    expect(all.changes).to.have.length(2);
    expect(all.changes.every((ch: any) => ch.formId !== otherForm.id)).to.equal(true);

    expect((await feed(`?formId=${otherForm.id}`)).status).to.equal(404);
    expect((await feed('?formId=form_doesNotExist')).body.error).to.equal('not_found');
  });

  it('refuses malformed cursors and out-of-bounds limits with 400 validation_error; needs submissions:read', async () => {
    for (const query of ['?after=garbage', '?after=%3D%3D', `?after=${Buffer.from('c1:-1').toString('base64url')}`,
      `?after=${Buffer.from('c1:01').toString('base64url')}`, `?after=${Buffer.from('c1:99999999999999999999').toString('base64url')}`,
      '?limit=0', '?limit=1001', '?limit=abc']) {
      const res = await feed(query);
      expect(res.status, query).to.equal(400);
      expect(res.body.error, query).to.equal('validation_error');
    }
    expect(decodeCursor(encodeCursor({ xid: '7', position: '42' }))).to.deep.equal({ xid: '7', position: '42' });
    const formsOnly = await createKey(t.app, tenant.organizationId, ['forms:read']);
    const forbidden = await feed('', formsOnly);
    expect(forbidden.status).to.equal(403);
    expect(forbidden.headers.get('x-ratelimit-limit')).to.be.a('string');
    const readOnly = await createKey(t.app, tenant.organizationId, ['submissions:read']);
    expect((await feed('', readOnly)).status).to.equal(200);
  });

  /** A submission row of the tenant's form, for statements run on a bare client. */
  async function submissionRow(): Promise<SubmissionRow> {
    const cached = (await t.app.formCache.get(form.id, true))!;
    const createdAt = new Date();
    return {
      id: newId('sub'), organizationId: tenant.organizationId, formId: form.id, formUpdatedAt: cached.updatedAt,
      month: quotaMonth(createdAt), data: { fld_name: 'x' }, submitterEmail: null, submitterName: null, source: 'api',
      createdAt, claims: [], idempotency: null,
    };
  }

  it('a transaction that wrote earlier and commits later holds back the later ones (which commit meanwhile) and is listed first, never skipped', async () => {
    await feedSettled();
    const { cursor } = await drain(null);
    const early = new Client(SERVICE_LIKE_CONNECTION);
    const late = new Client(SERVICE_LIKE_CONNECTION);
    await Promise.all([early.connect(), late.connect()]);
    try {
      const earlyRow = await submissionRow();
      const lateRow = await submissionRow();
      await early.query('begin');
      await early.query(STORE_SUBMISSIONS_SQL, storeSubmissionsValues([earlyRow]));
      // Writers of one organization no longer wait for each other: the later one commits first.
      const [stored] = (await late.query(STORE_SUBMISSIONS_SQL, storeSubmissionsValues([lateRow]))).rows;
      expect(stored.quota_ok).to.equal(1);
      expect((await drain(cursor)).changes, 'the committed later change waits for the earlier transaction').to.deep.equal([]);
      await early.query('commit');
      await feedSettled();
      const { changes } = await drain(cursor);
      expect(changes.map((ch: any) => ch.submissionId)).to.deep.equal([earlyRow.id, lateRow.id]);
    } finally {
      await Promise.all([early.end(), late.end()]);
    }
  });

  it('is only held back, never broken, by a long-open transaction elsewhere; a rolled-back writer leaves no change', async () => {
    await feedSettled();
    const { cursor } = await drain(null);
    const unrelated = new Client(SERVICE_LIKE_CONNECTION);
    const doomed = new Client(SERVICE_LIKE_CONNECTION);
    await Promise.all([unrelated.connect(), doomed.connect()]);
    try {
      await unrelated.query('begin');
      await unrelated.query('select pg_current_xact_id()'); // as any transaction that wrote
      const doomedRow = await submissionRow();
      await doomed.query('begin');
      await doomed.query(STORE_SUBMISSIONS_SQL, storeSubmissionsValues([doomedRow]));
      const a = await submit({ data: { fld_name: 'while held back' } });
      const held = await feed(`?after=${cursor}`);
      expect(held.body).to.deep.equal({ changes: [], nextCursor: cursor, hasMore: false });
      await doomed.query('rollback');
      expect((await drain(cursor)).changes, 'still held back by the unrelated transaction').to.deep.equal([]);
      await unrelated.query('commit');
      await feedSettled();
      const { changes, cursor: after } = await drain(cursor);
      expect(changes.map((ch: any) => ch.submissionId)).to.deep.equal([a.id]);
      const b = await submit({ data: { fld_name: 'after' } });
      await feedSettled();
      expect((await drain(after)).changes.map((ch: any) => ch.submissionId)).to.deep.equal([b.id]);
    } finally {
      await Promise.all([unrelated.end(), doomed.end()]);
    }
  });

  it('continues a c1 cursor (issued before changes kept their transaction id) exactly where it was', async () => {
    const own = await createTenant(t.app);
    const ownForm = await createPublishedForm(t.url, own.key, [field('fld_name', 'text', 'Name', { order: 0 })]);
    const before = [];
    for (const name of ['a', 'b', 'c']) before.push(await submit({ data: { fld_name: name } }, ownForm.id, own.key));
    // As the upgrade left them: the rows written before it have transaction id 0.
    const em = t.app.orm.em.fork();
    await em.getConnection().execute(`update submission_changes set xid = '0' where organization_id = ?`, [own.organizationId]);
    const [{ position }] = await em.getConnection().execute(
      'select position::text as position from submission_changes where submission_id = ?', [before[0].id]);
    const after = await submit({ data: { fld_name: 'd' } }, ownForm.id, own.key);
    await feedSettled();
    const c1 = Buffer.from(`c1:${position}`).toString('base64url');
    const { changes } = await drain(c1, '', own.key, 1);
    expect(changes.map((ch: any) => ch.submissionId)).to.deep.equal([before[1].id, before[2].id, after.id]);
  });

  it('is exact under concurrent writers and deleters: every committed change once, in each writer\'s commit order', async function () {
    this.timeout(40_000);
    await feedSettled();
    const start = (await drain(null)).cursor;
    const cached = (await t.app.formCache.get(form.id, true))!;
    const WRITERS = 6;
    const RUN_MS = 4_000;
    /** What each writer committed, in its commit order. */
    const committed: string[][] = Array.from({ length: WRITERS }, () => []);
    const live: string[] = [];
    let writing = true;

    async function writer(w: number): Promise<void> {
      const client = new Client(SERVICE_LIKE_CONNECTION);
      await client.connect();
      try {
        for (let i = 0; Date.now() < deadline; i++) {
          const deleting = w % 3 === 2 && live.length > 0 && i % 2 === 0;
          const rollback = i % 7 === 3;
          const holdMs = [0, 0, 1, 5, 20][(i + w) % 5];
          await client.query('begin');
          let change: string | null = null;
          let victim: string | null = null;
          if (deleting) {
            victim = live.splice(Math.floor(Math.random() * live.length), 1)[0];
            const { rowCount } = await client.query(positional(DELETE_SUBMISSION_SQL), [victim, tenant.organizationId]);
            if (rowCount) change = `deleted ${victim}`;
          } else {
            const createdAt = new Date();
            const id = newId('sub');
            await client.query(STORE_SUBMISSIONS_SQL, storeSubmissionsValues([{
              id, organizationId: tenant.organizationId, formId: form.id, formUpdatedAt: cached.updatedAt,
              month: quotaMonth(createdAt), data: { fld_name: `w${w} #${i}` }, submitterEmail: null, submitterName: null,
              source: 'api', createdAt, claims: [], idempotency: null,
            }]));
            change = `created ${id}`;
          }
          if (holdMs) await client.query('select pg_sleep($1)', [holdMs / 1000]);
          await client.query(rollback ? 'rollback' : 'commit');
          if (change && !rollback) committed[w].push(change);
          if (rollback && victim) live.push(victim);
          if (!rollback && !deleting) live.push(change!.slice('created '.length));
        }
      } finally {
        await client.end();
      }
    }

    const seen: string[] = [];
    async function reader(): Promise<void> {
      let cursor = start;
      for (;;) {
        const stillWriting = writing;
        if (!stillWriting) await feedSettled();
        const page = await drain(cursor, '', tenant.key, 7);
        seen.push(...page.changes.map((ch: any) => `${ch.type.slice('submission.'.length)} ${ch.submissionId}`));
        cursor = page.cursor;
        if (!stillWriting) return;
        await sleep(5);
      }
    }

    const deadline = Date.now() + RUN_MS;
    const reading = reader();
    await Promise.all(Array.from({ length: WRITERS }, (_, w) => writer(w)));
    writing = false;
    await reading;

    const all = committed.flat();
    expect(new Set(seen).size, 'no change twice').to.equal(seen.length);
    expect([...seen].sort()).to.deep.equal([...all].sort());
    for (const own of committed) expect(seen.filter((c) => own.includes(c)), 'one writer\'s commit order').to.deep.equal(own);
    for (const change of seen.filter((c) => c.startsWith('deleted'))) {
      expect(seen.indexOf(`created ${change.slice('deleted '.length)}`)).to.be.lessThan(seen.indexOf(change));
    }
    expect(all.filter((c) => c.startsWith('deleted')).length, 'some deletions ran').to.be.greaterThan(5);
    expect(all.length, 'enough changes to mean something').to.be.greaterThan(100);
  });

  it('keeps changes for the retention period, then purges them', async () => {
    const em = t.app.orm.em.fork();
    const sub = await submit({ data: { fld_name: 'old' } });
    await em.getConnection().execute(
      `update submission_changes set occurred_at = now() - interval '31 days' where submission_id = ?`, [sub.id]);
    expect(await purgeSubmissionChanges(em, 40)).to.equal(0);
    expect(await purgeSubmissionChanges(em)).to.equal(1);
    const [left] = await em.getConnection().execute('select count(*)::int as n from submission_changes where submission_id = ?', [sub.id]);
    expect(left.n).to.equal(0);
  });
});
