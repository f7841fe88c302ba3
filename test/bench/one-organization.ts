import { readFileSync } from 'node:fs';
import { loadConfig } from '../../config';
import { prepareDatabase } from '../../src/app';
import { initOrm } from '../../src/db/orm';
import { createOrganization } from '../../src/domain/auth/admin';
import { createForm } from '../../src/domain/forms/form-service';
import { normalizeStructure } from '../../src/domain/forms/structure';
import { quotaMonth } from '../../src/domain/quotas/quota';
import { storeSubmissions } from '../../src/domain/submissions/submission-writer';
import { newId } from '../../src/lib/ids';
import { benchEnvironment, benchNumber } from './support';

/**
 * One organization against many, at the storing statement alone (issue 13, goal 2): `--connections`
 * pooled connections each store submissions one after the other (storeSubmissions, one at a time: the quota, the
 * change feed, the outbox row, one commit each), spread over one organization or over `--orgs`, in
 * alternating phases of `--duration` seconds so that drifting load on the machine hits both alike.
 * No HTTP, no workers: what is left is how the organization's commits wait for each other.
 * Usage: node dist/test/bench/one-organization.js [--connections 16 --orgs 20 --duration 5 --rounds 2]
 */
const CONNECTIONS = benchNumber('connections', 16);
const ORGS = benchNumber('orgs', 20);
const DURATION = benchNumber('duration', 5);
const ROUNDS = benchNumber('rounds', 2);

/** CPU time (ms) a process has used so far, or 0 once it is gone. */
function cpuMs(pid: number | 'self'): number {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return ((Number(fields[11]) + Number(fields[12])) * 1000) / 100; // utime + stime, in clock ticks of 10 ms
  } catch {
    return 0;
  }
}

async function main(): Promise<void> {
  const env = benchEnvironment('oneorg');
  try {
    await prepareDatabase(loadConfig({ ...process.env, DATABASE_URL: env.databaseUrl, REDIS_URL: env.redisUrl }));
    const orm = await initOrm(env.databaseUrl, CONNECTIONS);
    try {
      const em = orm.em.fork();
      const { structure } = normalizeStructure({
        pages: [],
        fields: [{ id: 'fld_name', type: 'text', label: 'Name', required: true, config: {}, validationRules: {}, order: 0 }],
      }, (p) => newId(p));
      const targets: Array<{ organizationId: string; formId: string; formUpdatedAt: Date }> = [];
      for (let o = 0; o < ORGS; o++) {
        const org = await createOrganization(em, { name: `bench ${o}`, plan: 'enterprise', monthlyQuota: 100_000_000 });
        const { form } = await createForm(em, org.id, { title: 'Bench', status: 'published' }, structure!, Buffer.alloc(32));
        targets.push({ organizationId: org.id, formId: form.id, formUpdatedAt: form.updatedAt });
      }

      const backends = async () => (await orm.em.fork().getConnection().execute(
        'select pid from pg_stat_activity where datname = current_database()')).map((r: any) => r.pid as number);
      const cpu = async () => {
        const pids = await backends();
        return { node: cpuMs('self'), pids, postgres: pids.map((pid) => cpuMs(pid)) };
      };

      async function phase(orgs: number): Promise<{ perSecond: number; pgMs: number; nodeMs: number }> {
        const before = await cpu();
        const until = Date.now() + DURATION * 1000;
        let stored = 0;
        await Promise.all(Array.from({ length: CONNECTIONS }, async (_, c) => {
          for (let i = c; Date.now() < until; i += CONNECTIONS) {
            const target = targets[i % orgs];
            const createdAt = new Date();
            const [settled] = await storeSubmissions(orm, [{
              id: newId('sub'), ...target, month: quotaMonth(createdAt), data: { fld_name: 'Ada' }, submitterEmail: null,
              submitterName: null, source: 'api', createdAt, claims: [], idempotency: null,
            }]);
            if ('error' in settled) throw settled.error;
            if (settled.outcome.kind !== 'created') throw new Error(`not stored: ${settled.outcome.kind}`);
            stored++;
          }
        }));
        const after = await cpu();
        const pgMs = before.pids.reduce((sum, pid, i) => sum + (cpuMs(pid) - before.postgres[i]), 0);
        return { perSecond: stored / DURATION, pgMs: pgMs / stored, nodeMs: (after.node - before.node) / stored };
      }

      await phase(ORGS); // warm-up: every organization's month counted once, statements prepared
      const rows = [];
      for (let r = 0; r < ROUNDS; r++) {
        const one = await phase(1);
        const many = await phase(ORGS);
        rows.push({
          round: r + 1, 'stored/s, 1 org': Math.round(one.perSecond), [`stored/s, ${ORGS} orgs`]: Math.round(many.perSecond),
          ratio: +(one.perSecond / many.perSecond).toFixed(2),
          'PostgreSQL CPU ms/stored, 1 org': +one.pgMs.toFixed(3), [`…, ${ORGS} orgs`]: +many.pgMs.toFixed(3),
          'node CPU ms/stored, 1 org': +one.nodeMs.toFixed(3), [`… , ${ORGS} orgs`]: +many.nodeMs.toFixed(3),
        });
      }
      console.table(rows);
    } finally {
      await orm.close();
    }
  } finally {
    await env.cleanup();
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
