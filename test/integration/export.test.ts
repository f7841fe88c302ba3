import { expect } from 'chai';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { seal } from '../../src/lib/crypto';
import {
  call, createKey, createPublishedForm, createTenant, seed, fieldInput as field, startTestApp, type TestApp, type TestTenant,
} from '../support/harness';

const ROWS = 100_000;
const BASE_MS = Date.parse('2026-01-01T00:00:00Z');
const PADDING = 'x'.repeat(300);

/** Row i as seeded below, computed independently of the service. */
function expectedRow(i: number) {
  const formula = [`=SUM(A${i})`, `-${i}`, `@x${i}`, `plain${i}`][i % 4];
  return {
    id: `sub_exp${String(i).padStart(6, '0')}`,
    createdAt: new Date(BASE_MS + i * 1000).toISOString(),
    submitterEmail: i % 2 === 0 ? `u${i}@example.com` : null,
    submitterName: i % 10 === 0 ? `+${i}` : `Name ${i}`,
    data: { fld_text: `row ${i} ${PADDING}`, fld_formula: formula, fld_num: i, fld_multi: ['a', 'b'], fld_secret: 'Redacted', fld_quote: `say "hi", ${i}\r\nnext` },
  };
}

const csvCell = (value: string) => (/[",\r\n]/.test(value) ? `"${value.replace(/"/g, '""')}"` : value);
const guarded = (value: string) => (/^[=+\-@\t\r]/.test(value) ? `'${value}` : value);
const csvLine = (cells: Array<string | null>) => `${cells.map((c) => csvCell(guarded(c ?? ''))).join(',')}\r\n`;

function expectedCsvLine(i: number): string {
  const r = expectedRow(i);
  return csvLine([r.id, r.createdAt, r.submitterEmail, r.submitterName, '', r.data.fld_text, r.data.fld_formula,
    String(r.data.fld_num), JSON.stringify(r.data.fld_multi), 'Redacted', r.data.fld_quote]);
}

describe('submission export (GET /v1/forms/{formId}/submissions/export)', () => {
  let t: TestApp;
  let tenant: TestTenant;
  let form: any;

  before(async function () {
    this.timeout(60_000);
    t = await startTestApp();
    tenant = await createTenant(t.app);
    form = await createPublishedForm(t.url, tenant.key, [
      field('fld_text', 'text', 'Text', { order: 0 }),
      field('fld_heading', 'heading', 'Section', { order: 1 }),
      field('fld_formula', 'text', '=Formula', { order: 2 }),
      field('fld_num', 'number', 'Number', { order: 3 }),
      field('fld_multi', 'checkbox', 'Choices', { order: 4, config: { options: [{ label: 'A', value: 'a' }, { label: 'B', value: 'b' }] } }),
      field('fld_secret', 'name', 'Secret', { order: 5, config: { sensitive: true } }),
      field('fld_quote', 'textarea', 'Note, "quoted"', { order: 6 }),
    ]);
    const sealed = seal(JSON.stringify({ format: 'full', fullName: 'Ada' }), t.app.encryptionKey);
    // One statement seeds every row; the API is not what is under test here. Its rows are dated in
    // January 2026, a month the partitions made at start (this month onward) do not cover.
    await t.app.orm.em.fork().getConnection().execute(
      `select ensure_submission_partitions('2026-01-01T00:00:00Z', '2026-01-31T00:00:00Z')`);
    await seed(t.app.orm, `
      insert into submissions (id, organization_id, form_id, data, submitter_email, submitter_name, source, created_at)
      select 'sub_exp' || lpad(i::text, 6, '0'), ?, ?,
             jsonb_build_object('fld_text', 'row ' || i || ' ' || ?::text,
               'fld_formula', case i % 4 when 0 then '=SUM(A' || i || ')' when 1 then '-' || i when 2 then '@x' || i else 'plain' || i end,
               'fld_num', i, 'fld_multi', jsonb_build_array('a', 'b'), 'fld_secret', jsonb_build_object('$sealed', ?::text),
               'fld_quote', 'say "hi", ' || i || E'\\r\\nnext'),
             case when i % 2 = 0 then 'u' || i || '@example.com' end,
             case when i % 10 = 0 then '+' || i else 'Name ' || i end,
             'api', ?::timestamptz + i * interval '1 second'
        from generate_series(1, ${ROWS}) i`,
    [tenant.organizationId, form.id, PADDING, sealed, new Date(BASE_MS).toISOString()]);
  });
  after(async () => t.close());

  const exportUrl = (query: string, formId = form.id) => `${t.url}/v1/forms/${formId}/submissions/export${query}`;
  const get = (query: string, key = tenant.key, formId = form.id) => call(t.url, 'GET', `/v1/forms/${formId}/submissions/export${query}`, { key });

  /** Compares the streamed body with the expected lines as it arrives, holding only the unmatched rest. */
  async function expectStream(res: Response, lines: Iterable<string>, onLine?: (matched: number) => void): Promise<number> {
    const expected = lines[Symbol.iterator]();
    const decoder = new TextDecoder();
    let pending = '';
    let next = expected.next();
    let matched = 0;
    for await (const chunk of res.body as any as AsyncIterable<Uint8Array>) {
      pending += decoder.decode(chunk, { stream: true });
      while (!next.done && pending.length >= next.value.length) {
        if (!pending.startsWith(next.value)) {
          expect(pending.slice(0, next.value.length), `line ${matched}`).to.equal(next.value);
        }
        pending = pending.slice(next.value.length);
        matched++;
        onLine?.(matched);
        next = expected.next();
      }
    }
    expect(next.done, `stream ended after ${matched} lines`).to.equal(true);
    expect(pending, 'nothing after the last line').to.equal('');
    return matched;
  }

  it('streams 100,000 rows as CSV, every one checked, with memory that does not grow with the rows', async function () {
    this.timeout(60_000);
    const started = Date.now();
    // What stays reachable after a full collection early in the stream and late in it: holding the
    // rows between the two would keep tens of MB. Each is the least of three samples, as a socket's
    // buffers in flight (external memory) come and go. (The peak RSS is V8's choice of when to
    // collect: on a slow day it let garbage reach 100 MB.)
    setFlagsFromString('--expose-gc');
    const gc = runInNewContext('gc') as () => void;
    const early = new Set([0.2, 0.25, 0.3].map((share) => Math.round(share * ROWS)));
    const late = new Set([0.7, 0.75, 0.8].map((share) => Math.round(share * ROWS)));
    const kept = { early: Infinity, late: Infinity };
    const sample = (matched: number) => {
      const window = early.has(matched) ? 'early' : late.has(matched) ? 'late' : null;
      if (!window) return;
      gc();
      const { heapUsed, external } = process.memoryUsage();
      kept[window] = Math.min(kept[window], heapUsed + external);
    };
    const res = await fetch(exportUrl('?format=csv'), { headers: { Authorization: `Bearer ${tenant.key}` } });
    expect(res.status).to.equal(200);
    expect(res.headers.get('content-type')).to.equal('text/csv; charset=utf-8');
    expect(res.headers.get('content-disposition')).to.equal(`attachment; filename="${form.id}-submissions.csv"`);
    expect(res.headers.get('x-ratelimit-limit')).to.be.a('string');
    const header = csvLine(['id', 'createdAt', 'submitterEmail', 'submitterName', 'formVersion', 'Text', '=Formula', 'Number', 'Choices', 'Secret', 'Note, "quoted"']);
    function* lines() {
      yield header;
      for (let i = 1; i <= ROWS; i++) yield expectedCsvLine(i);
    }
    expect(await expectStream(res, lines(), sample)).to.equal(ROWS + 1);
    const growthMb = (kept.late - kept.early) / 1024 / 1024;
    console.log(`      export of ${ROWS} rows (about ${Math.round(ROWS * 470 / 1e6)} MB of CSV) in ${Date.now() - started} ms; memory kept from a quarter to three quarters of the rows (least of three samples each) ${growthMb.toFixed(1)} MB`);
    // Half the rows are about 23 MB of CSV, several times that as objects.
    expect(growthMb).to.be.lessThan(10);
  });

  it('streams NDJSON, one Submission detail per line, within the startDate/endDate days', async function () {
    this.timeout(30_000);
    // Row i is created at 2026-01-01T00:00:00Z + i s: 2026-01-02 is rows 86,400 to 99,999 (and 100,000 at 03:46:40).
    const res = await fetch(exportUrl('?format=ndjson&startDate=2026-01-02&endDate=2026-01-02'), { headers: { Authorization: `Bearer ${tenant.key}` } });
    expect(res.status).to.equal(200);
    expect(res.headers.get('content-type')).to.equal('application/x-ndjson');
    expect(res.headers.get('content-disposition')).to.equal(`attachment; filename="${form.id}-submissions.ndjson"`);
    let i = 86_400;
    let pending = '';
    const decoder = new TextDecoder();
    for await (const chunk of res.body as any as AsyncIterable<Uint8Array>) {
      const lines = (pending + decoder.decode(chunk, { stream: true })).split('\n');
      pending = lines.pop()!;
      for (const line of lines) {
        const r = expectedRow(i++);
        expect(JSON.parse(line), `row ${i - 1}`).to.deep.equal({
          id: r.id, formId: form.id, formTitle: 'Test form', submitterEmail: r.submitterEmail, submitterName: r.submitterName,
          createdAt: r.createdAt, formVersion: null,
          data: { Text: r.data.fld_text, '=Formula': r.data.fld_formula, Number: r.data.fld_num, Choices: r.data.fld_multi, Secret: 'Redacted', 'Note, "quoted"': r.data.fld_quote },
          rawData: r.data,
        });
      }
    }
    expect(pending, 'every line ends with a newline').to.equal('');
    expect(i - 1, 'last row').to.equal(ROWS);
  });

  it('answers problems before the first byte in the API error shape', async () => {
    const other = await createTenant(t.app);
    const cases: Array<[string, string, number, string]> = [
      ['', tenant.key, 400, 'validation_error'],
      ['?format=xlsx', tenant.key, 400, 'validation_error'],
      ['?format=csv&startDate=yesterday', tenant.key, 400, 'validation_error'],
      ['?format=csv', other.key, 404, 'not_found'],
      ['?format=csv', await createKey(t.app, tenant.organizationId, ['forms:read']), 403, 'forbidden'],
    ];
    for (const [query, key, status, code] of cases) {
      const res = await get(query, key);
      expect(res.status, query).to.equal(status);
      expect(res.body.error, query).to.equal(code);
      expect(res.headers.get('x-ratelimit-limit'), query).to.be.a('string');
    }
    const empty = await get('?format=csv&endDate=2025-12-31');
    expect(empty.status).to.equal(200);
    expect(empty.text).to.equal('id,createdAt,submitterEmail,submitterName,formVersion,Text,\'=Formula,Number,Choices,Secret,"Note, ""quoted"""\r\n');
  });

  it('runs at most half as many exports at once as the pool has connections; more get 503 before the first byte', async function () {
    this.timeout(20_000);
    const small = await startTestApp({ DB_POOL_MAX: '2' });
    try {
      const url = `${small.url}/v1/forms/${form.id}/submissions/export?format=ndjson`;
      const headers = { Authorization: `Bearer ${tenant.key}` };
      const abort = new AbortController();
      const first = await fetch(url, { headers, signal: abort.signal });
      await first.body!.getReader().read();
      const second = await call(small.url, 'GET', `/v1/forms/${form.id}/submissions/export?format=csv&endDate=2025-12-31`, { key: tenant.key });
      expect(second.status).to.equal(503);
      expect(second.body.error).to.equal('service_unavailable');
      expect(second.headers.get('retry-after')).to.be.a('string');
      expect((await call(small.url, 'GET', `/v1/forms/${form.id}/submissions?limit=1`, { key: tenant.key })).status, 'other reads still served').to.equal(200);
      abort.abort();
      let third = second;
      const deadline = Date.now() + 5_000;
      while (third.status !== 200 && Date.now() < deadline) {
        await new Promise((resolve) => setTimeout(resolve, 50));
        third = await call(small.url, 'GET', `/v1/forms/${form.id}/submissions/export?format=csv&endDate=2025-12-31`, { key: tenant.key });
      }
      expect(third.status, 'a slot again once the first export ended').to.equal(200);
    } finally {
      await small.close();
    }
  });

  it('gives the database connection back when the client goes away mid-stream', async function () {
    this.timeout(20_000);
    const pool = (t.app.orm.em.getConnection().getKnex() as any).client.pool;
    const abort = new AbortController();
    const res = await fetch(exportUrl('?format=ndjson'), { headers: { Authorization: `Bearer ${tenant.key}` }, signal: abort.signal });
    const reader = res.body!.getReader();
    await reader.read();
    expect(pool.numUsed(), 'the export holds a connection').to.be.greaterThan(0);
    abort.abort();
    const deadline = Date.now() + 5_000;
    while (pool.numUsed() > 0 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 50));
    expect(pool.numUsed(), 'connections in use after the client left').to.equal(0);
    const [{ n }] = await t.app.orm.em.fork().getConnection().execute(
      `select count(*)::int as n from pg_stat_activity where datname = current_database() and pid <> pg_backend_pid() and state <> 'idle' and query like '%order by created_at, id%'`);
    expect(n, 'no export query still running').to.equal(0);
    // The pool still works.
    expect((await get('?format=csv&endDate=2025-12-31')).status).to.equal(200);
  });
});
