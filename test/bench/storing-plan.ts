import { Client } from 'pg';
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
 * Usage: node_modules/.bin/node dist/test/bench/storing-plan.js [--items 16 --orgs 20 --runs 300 --without-foreign-keys]
 */
const ITEMS = benchNumber('items', 16);
const ORGS = benchNumber('orgs', 20);
const RUNS = benchNumber('runs', 300);
/** An experiment: the statement without the foreign keys its inserts check (each check locks the parent row FOR KEY SHARE). */
const WITHOUT_FKS = process.argv.includes('--without-foreign-keys');

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
    const client = new Client({ connectionString: env.databaseUrl });
    await client.connect();
    try {
      // No WAL flush wait: what is left of the round trip is planning and execution.
      await client.query('set jit = off; set synchronous_commit = off');
      if (WITHOUT_FKS) {
        await client.query(`alter table submissions drop constraint submissions_organization_id_fkey1;
          alter table submissions drop constraint submissions_form_id_fkey1;
          alter table submission_changes drop constraint submission_changes_organization_id_fkey`);
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
      const { text, values } = storingStatement(rows());
      const plan = await client.query({ text: `explain (analyze, buffers, costs off, summary on) ${text}`, values });
      for (const row of plan.rows) console.log(row['QUERY PLAN']);
    } finally {
      await client.end();
    }
  } finally {
    await env.cleanup();
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
