import { Client } from 'pg';
import { cpuMs } from './cpu';
import { loadConfig } from '../../config';
import { prepareDatabase } from '../../src/app';
import { initOrm } from '../../src/db/orm';
import { createOrganization } from '../../src/domain/auth/admin';
import { createForm } from '../../src/domain/forms/form-service';
import { normalizeStructure } from '../../src/domain/forms/structure';
import { quotaMonth } from '../../src/domain/quotas/quota';
import { splitQuotaSlots } from '../../src/domain/submissions/quota-slots';
import { storingStatement, type SubmissionRow } from '../../src/domain/submissions/storing-statement';
import { newId, newTimeOrderedId } from '../../src/lib/ids';
import { benchEnvironment, benchNumber } from './support';

/**
 * Where the storing statement's execution goes with `--items` submissions spread over `--orgs`
 * organizations (a form each): runs it `--runs` times on one connection (as the group commit
 * would, items round-robin over the organizations) and prints the median execution time, then
 * EXPLAIN (ANALYZE, BUFFERS) of one run, so that the plan nodes whose time grows with the number of
 * organizations show (the quota slots, the day counts, the per-group reads). No HTTP, no Node work
 * beyond building the statement: what the bench's pg_stat_statements table would show, on a
 * PostgreSQL without the extension.
 * Usage: node_modules/.bin/node dist/test/bench/storing-plan.js [--items 16 --orgs 20 --runs 300 --explain-runs 50 --without-foreign-keys]
 * or, an A/B: … --ab webhook_deliveries.webhook_deliveries_webhook_id_fkey [--block 100 --blocks 8 --connections 8],
 * or one organization against many: … --ab-orgs --orgs 20, or the items with and without their null columns: … --ab-nulls
 */
const ITEMS = benchNumber('items', 16);
const ORGS = benchNumber('orgs', 20);
const RUNS = benchNumber('runs', 300);
/** EXPLAIN ANALYZE runs whose execution and trigger times are summarised (medians): the foreign-key checks show as triggers. */
const EXPLAIN_RUNS = benchNumber('explain-runs', 50);
/**
 * An experiment: the statement without the foreign keys its inserts checked (each check locks the parent row FOR KEY SHARE);
 * since Migration20261129000300_storing_without_foreign_keys there are none of those three to drop.
 */
const WITHOUT_FKS = process.argv.includes('--without-foreign-keys');
/**
 * An A/B of constraints (`--ab table.constraint,…`): blocks of `--block` statements, each on the
 * next of `--connections` connections in turn (as the group commit takes its pool's), alternately
 * with and without those constraints (dropped, then added back: a partitioned table takes no `not valid`), `--blocks` of each;
 * prints the backends' CPU (from /proc) and the wall time per statement of each, medians over the
 * blocks. Interleaved, so a machine whose speed drifts drifts for both alike.
 */
const AB = process.argv.includes('--ab') ? process.argv[process.argv.indexOf('--ab') + 1].split(',').map((c) => c.split('.') as [string, string]) : [];
const BLOCK = benchNumber('block', 100);
const BLOCKS = benchNumber('blocks', 8);
const CONNECTIONS = benchNumber('connections', 8);
/** `--ab-orgs`: the same blocks, statements whose items are all of one organization against items of `--orgs`. */
const AB_ORGS = process.argv.includes('--ab-orgs');
/** `--ab-nulls`: the items with every column written (null where it has no value, as before) against without. */
const AB_NULLS = process.argv.includes('--ab-nulls');
const NULL_COLUMNS = Object.fromEntries(['form_version', 'email', 'name', 'language', 'idem_key', 'idem_hash', 'idem_body', 'idem_token',
  'event_id', 'event', 'dlv_ids', 'syncs', 'job_group'].map((column) => [column, null]));

async function main(): Promise<void> {
  const env = benchEnvironment('plan');
  try {
    await prepareDatabase(loadConfig({ ...process.env, DATABASE_URL: env.databaseUrl, REDIS_URL: env.redisUrl }));
    const orm = await initOrm(env.databaseUrl, 2);
    const targets: Array<{ organizationId: string; formId: string; formUpdatedAt: Date; version: number }> = [];
    try {
      const em = orm.em.fork();
      const { structure } = normalizeStructure({
        pages: [],
        fields: [{ id: 'fld_name', type: 'text', label: 'Name', required: true, config: {}, validationRules: {}, order: 0 }],
      }, (p) => newId(p));
      for (let o = 0; o < ORGS; o++) {
        const org = await createOrganization(em, { name: `plan ${o}`, plan: 'enterprise', monthlyQuota: 100_000_000 });
        const { form } = await createForm(em, org.id, { title: 'Plan', status: 'published' }, structure!, Buffer.alloc(32));
        targets.push({ organizationId: org.id, formId: form.id, formUpdatedAt: form.updatedAt, version: 1 });
        await splitQuotaSlots(orm.em.fork(), org.id, quotaMonth(new Date()));
      }
    } finally {
      await orm.close();
    }
    let next = 0;
    const rows = (): SubmissionRow[] => Array.from({ length: ITEMS }, () => {
      const t = targets[next++ % targets.length];
      const createdAt = new Date();
      return {
        id: newTimeOrderedId('sub', createdAt), organizationId: t.organizationId, formId: t.formId, formUpdatedAt: t.formUpdatedAt,
        formVersion: t.version, month: quotaMonth(createdAt), data: { fld_name: 'Ada Lovelace' }, submitterEmail: 'ada@example.com',
        submitterName: null, source: 'api', language: null, createdAt, claims: [], idempotency: null,
      };
    });
    if (AB.length) {
      await abConstraints(env.databaseUrl, rows);
      return;
    }
    if (AB_NULLS) {
      // The items as they were written before: every column named, null where it has no value.
      const withNulls = (batch: SubmissionRow[]) => {
        const { name, text, values } = storingStatement(batch);
        const items = (JSON.parse(values[0] as string) as Array<Record<string, unknown>>).map((item) => ({ ...NULL_COLUMNS, ...item }));
        return { name, text, values: [JSON.stringify(items), ...values.slice(1)] };
      };
      await interleave(env.databaseUrl, `${ITEMS} items over ${Math.min(ORGS, ITEMS)} organizations`, [
        { label: 'items with their null columns', rows, statement: withNulls },
        { label: 'items without them', rows },
      ]);
      return;
    }
    if (AB_ORGS) {
      let one = 0;
      const oneOrg = (): SubmissionRow[] => rows().map((row) => ({ ...row, ...(({ organizationId, formId, formUpdatedAt }) =>
        ({ organizationId, formId, formUpdatedAt }))(targets[one++ % 1]) }));
      await interleave(env.databaseUrl, `${ITEMS} items a statement`, [
        { label: `1 organization`, rows: oneOrg },
        { label: `${Math.min(ORGS, ITEMS)} organizations`, rows },
      ]);
      return;
    }
    const client = new Client({ connectionString: env.databaseUrl });
    await client.connect();
    try {
      // No WAL flush wait: what is left of the round trip is planning and execution.
      await client.query('set jit = off; set synchronous_commit = off');
      if (WITHOUT_FKS) {
        await client.query(`alter table submissions drop constraint if exists submissions_organization_id_fkey1;
          alter table submissions drop constraint if exists submissions_form_id_fkey1;
          alter table submission_changes drop constraint if exists submission_changes_organization_id_fkey`);
      }
      const times: number[] = [];
      for (let r = 0; r < RUNS; r++) {
        const { name, text, values } = storingStatement(rows());
        const started = process.hrtime.bigint();
        await client.query({ name, text, values });
        times.push(Number(process.hrtime.bigint() - started) / 1e6);
      }
      times.sort((a, b) => a - b);
      console.log(`${ITEMS} items over ${Math.min(ORGS, ITEMS)} organizations: round trip p50 ${times[times.length >> 1].toFixed(3)} ms, `
        + `p90 ${times[Math.floor(times.length * 0.9)].toFixed(3)} ms over ${RUNS} runs (${(times[times.length >> 1] / ITEMS).toFixed(3)} ms per item)`);
      const median = (values: number[]) => [...values].sort((a, b) => a - b)[values.length >> 1];
      const execution: number[] = [];
      const triggers = new Map<string, number[]>();
      let lastPlan: string[] = [];
      for (let r = 0; r < EXPLAIN_RUNS; r++) {
        const { text, values } = storingStatement(rows());
        const plan = await client.query({ text: `explain (analyze, buffers, costs off, summary on) ${text}`, values });
        lastPlan = plan.rows.map((row) => row['QUERY PLAN'] as string);
        for (const line of lastPlan) {
          const m = line.match(/^Trigger for constraint (\S+).*time=([\d.]+) calls=(\d+)/);
          if (m) triggers.set(`${m[1]} (${m[3]} calls)`, [...(triggers.get(`${m[1]} (${m[3]} calls)`) ?? []), Number(m[2])]);
          const e = line.match(/^Execution Time: ([\d.]+) ms/);
          if (e) execution.push(Number(e[1]));
        }
      }
      for (const line of lastPlan) console.log(line);
      console.log(`medians of ${EXPLAIN_RUNS} EXPLAIN ANALYZE runs: execution ${median(execution).toFixed(3)} ms`);
      for (const [name, times] of triggers) console.log(`  ${name}: ${median(times).toFixed(3)} ms`);
    } finally {
      await client.end();
    }
  } finally {
    await env.cleanup();
  }
}

interface Variant {
  label: string;
  rows: () => SubmissionRow[];
  /** The statement for the rows, when not storingStatement's. */
  statement?: (rows: SubmissionRow[]) => { name: string; text: string; values: unknown[] };
  /** Before and after each of its blocks (on the first connection). */
  enter?: (client: Client) => Promise<void>;
  leave?: (client: Client) => Promise<void>;
}

/**
 * Blocks of BLOCK statements, each on the next of CONNECTIONS connections in turn, the variants'
 * blocks interleaved (A B B A A B …, so neither always goes first), BLOCKS of each: the backends' CPU
 * (from /proc) and the wall time per statement, medians over the blocks.
 */
async function interleave(databaseUrl: string, title: string, variants: [Variant, Variant]): Promise<void> {
  const clients = await Promise.all(Array.from({ length: CONNECTIONS }, async () => {
    const client = new Client({ connectionString: databaseUrl });
    await client.connect();
    await client.query('set jit = off');
    const [{ pid }] = (await client.query('select pg_backend_pid() as pid')).rows;
    return { client, pid: pid as number };
  }));
  try {
    const backendsMs = () => clients.reduce((sum, c) => sum + cpuMs(c.pid), 0);
    const results = variants.map(() => ({ cpu: [] as number[], wall: [] as number[] }));
    let turn = 0;
    for (let b = 0; b < 2 * BLOCKS; b++) {
      const v = b % 4 === 0 || b % 4 === 3 ? 0 : 1;
      const variant = variants[v];
      await variant.enter?.(clients[0].client);
      const cpuBefore = backendsMs();
      const started = process.hrtime.bigint();
      for (let i = 0; i < BLOCK; i++) {
        const { name, text, values } = (variant.statement ?? storingStatement)(variant.rows());
        await clients[turn++ % clients.length].client.query({ name, text, values });
      }
      results[v].wall.push(Number(process.hrtime.bigint() - started) / 1e6 / BLOCK);
      results[v].cpu.push((backendsMs() - cpuBefore) / BLOCK);
      await variant.leave?.(clients[0].client);
    }
    const median = (values: number[]) => [...values].sort((a, b) => a - b)[values.length >> 1];
    console.log(`${title}: ${CONNECTIONS} connections, ${BLOCKS} blocks of ${BLOCK} statements each way, interleaved:`);
    console.table(variants.map((variant, v) => ({
      variant: variant.label,
      backendCpuMsPerStatement: Number(median(results[v].cpu).toFixed(3)),
      wallMsPerStatement: Number(median(results[v].wall).toFixed(3)),
      cpuPerBlock: results[v].cpu.map((x) => x.toFixed(2)).join(' '),
    })));
  } finally {
    for (const { client } of clients) await client.end();
  }
}

async function abConstraints(databaseUrl: string, rows: () => SubmissionRow[]): Promise<void> {
  const client = new Client({ connectionString: databaseUrl });
  await client.connect();
  const definitions = new Map<string, string>();
  try {
    for (const [table, name] of AB) {
      const { rows: [row] } = await client.query(
        'select pg_get_constraintdef(oid) as def from pg_constraint where conname = $1 and conrelid = $2::regclass', [name, table]);
      if (!row) throw new Error(`no constraint ${name} on ${table}`);
      definitions.set(`${table}.${name}`, row.def);
    }
  } finally {
    await client.end();
  }
  await interleave(databaseUrl, `${ITEMS} items over ${Math.min(ORGS, ITEMS)} organizations`, [
    { label: `with ${AB.map(([, n]) => n).join(', ')}`, rows },
    {
      label: 'without them', rows,
      enter: async (c) => { for (const [table, name] of AB) await c.query(`alter table ${table} drop constraint ${name}`); },
      leave: async (c) => {
        for (const [table, name] of AB) await c.query(`alter table ${table} add constraint ${name} ${definitions.get(`${table}.${name}`)}`);
      },
    },
  ]);
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
