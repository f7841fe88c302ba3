import { parseArgs } from 'node:util';
import { loadConfig, type Config } from '../../config';
import { isPlan, PLANS, type Plan } from '../../config/plans';
import { prepareDatabase } from '../app';
import { failFastRedis, type RedisTarget } from '../../config/redis';
import { reencryptSecrets } from '../domain/secrets/reencrypt';
import { createLogger } from '../lib/logger';
import { ADMIN_DB_TIMEOUTS, initOrm, type Orm } from '../db/orm';
import {
  AdminError, createApiKey, createOrganization, listApiKeys, organizationUsage, revokeApiKey, updateOrganization,
} from '../domain/auth/admin';
import { presentKey, presentOrganization } from '../http/presenters/admin';
import { resolveEncryptionKeys } from '../domain/secrets/keys';
import { publishInvalidation } from '../lib/cache-invalidation';
import { isScope } from '../domain/auth/scopes';
import { walkDayCounts } from '../domain/maintenance/day-count-repair';
import { walkDeliverySideRows, webhookExists } from '../domain/maintenance/delivery-side-rows';
import { buildDayMarks, type DayMarksFailure } from '../domain/submissions/day-marks';

const USAGE = `usage: npm run --silent cli -- <command>
  migrate
  orgs create --name NAME --plan ${PLANS.join('|')} [--monthly-quota N]
  orgs update ORG_ID [--plan P] [--monthly-quota N]
  orgs usage ORG_ID
  keys create --org ORG_ID --scopes "forms:read,submissions:*" [--name N] [--expires-at ISO]
  keys list --org ORG_ID
  keys revoke KEY_ID
  secrets reencrypt                 (after rotating ENCRYPTION_KEY; see deploy/README.md)
  counts check [--form FORM_ID]     (one line per drifted form-day and form-month; exits 1 when any drifted)
  counts repair [--form FORM_ID] [--since YYYY-MM-DD]
  counts marks [--form FORM_ID] [--since YYYY-MM-DD]  (day marks of busy days older than yesterday)
  deliveries check [--webhook WEBHOOK_ID]   (one line per delivery whose owed or failed row disagrees with it; exits 1 when any does)
  deliveries repair [--webhook WEBHOOK_ID]  (makes those rows what each delivery says, while traffic flows)`;

class UsageError extends Error {}

function plan(value: string | undefined): Plan | undefined {
  if (value === undefined) return undefined;
  if (!isPlan(value)) throw new UsageError(`--plan must be one of ${PLANS.join(', ')}`);
  return value;
}

function quota(value: string | undefined): number | undefined {
  if (value === undefined) return undefined;
  if (!/^\d+$/.test(value)) throw new UsageError('--monthly-quota must be a non-negative integer');
  return Number(value);
}

function scopes(value: string | undefined): string[] {
  const list = (value ?? '').split(',').map((s) => s.trim()).filter(Boolean);
  if (!list.length) throw new UsageError('--scopes is required');
  const unknown = list.filter((s) => !isScope(s));
  if (unknown.length) throw new UsageError(`unknown scopes: ${unknown.join(', ')}`);
  return [...new Set(list)];
}

function expiresAt(value: string | undefined): Date | null {
  if (value === undefined) return null;
  const date = new Date(value);
  if (Number.isNaN(date.getTime())) throw new UsageError('--expires-at must be an ISO 8601 date-time');
  return date;
}

function day(value: string | undefined): string | undefined {
  if (value === undefined) return undefined;
  if (!/^\d{4}-\d{2}-\d{2}$/.test(value) || Number.isNaN(Date.parse(`${value}T00:00:00Z`))
    || new Date(`${value}T00:00:00Z`).toISOString().slice(0, 10) !== value) throw new UsageError('--since must be a date, YYYY-MM-DD');
  return value;
}

function printLine(value: unknown): void {
  process.stdout.write(`${JSON.stringify(value)}\n`);
}

function required(value: string | undefined, what: string): string {
  if (!value) throw new UsageError(`${what} is required`);
  return value;
}

/** Tells running API processes to drop cached key records at once; best effort when Redis is down. */
async function announce(redisTarget: RedisTarget, message: `key:${string}` | `org:${string}`): Promise<void> {
  const redis = failFastRedis(redisTarget, { enableOfflineQueue: true, lazyConnect: true });
  redis.on('error', () => {});
  try {
    await redis.connect();
    await publishInvalidation(redis, message);
  } catch {
    process.stderr.write('warning: Redis unreachable; running API processes notice the change within 30 s\n');
  } finally {
    redis.disconnect();
  }
}

async function run(argv: string[], orm: Orm, config: Readonly<Config>): Promise<unknown> {
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      name: { type: 'string' }, plan: { type: 'string' }, 'monthly-quota': { type: 'string' },
      org: { type: 'string' }, scopes: { type: 'string' }, 'expires-at': { type: 'string' },
      form: { type: 'string' }, since: { type: 'string' }, webhook: { type: 'string' },
    },
  });
  const [group, command, id] = positionals;
  const em = orm.em.fork();
  switch (`${group} ${command}`) {
    case 'orgs create': {
      const org = await createOrganization(em, {
        name: required(values.name, '--name'), plan: required(plan(values.plan), '--plan') as Plan,
        monthlyQuota: quota(values['monthly-quota']) ?? null,
      });
      return presentOrganization(org);
    }
    case 'orgs update': {
      const patch: { plan?: Plan; monthlyQuota?: number } = {};
      if (values.plan !== undefined) patch.plan = plan(values.plan);
      if (values['monthly-quota'] !== undefined) patch.monthlyQuota = quota(values['monthly-quota']);
      const org = await updateOrganization(em, required(id, 'ORG_ID'), patch);
      await announce(config, `org:${org.id}`);
      return presentOrganization(org);
    }
    case 'orgs usage':
      return organizationUsage(em, required(id, 'ORG_ID'));
    case 'keys create': {
      const { record, key } = await createApiKey(em, {
        organizationId: required(values.org, '--org'), scopes: scopes(values.scopes),
        name: values.name, expiresAt: expiresAt(values['expires-at']),
      });
      // The one time the whole key is printed: id, key, scopes, expiresAt, and nothing else.
      return { id: record.id, key, scopes: record.scopes, expiresAt: record.expiresAt?.toISOString() ?? null };
    }
    case 'keys list':
      return { keys: (await listApiKeys(em, required(values.org, '--org'))).map(presentKey) };
    case 'keys revoke': {
      const key = await revokeApiKey(em, required(id, 'KEY_ID'));
      await announce(config, `key:${key.id}`);
      return presentKey(key);
    }
    case 'secrets reencrypt': {
      const counts = await reencryptSecrets(em, await resolveEncryptionKeys(orm, config, createLogger('silent')));
      if (counts.unopenable.length) {
        // Reported, not fatal: everything else was re-sealed; the exit status tells scripts to look.
        process.stderr.write(`warning: no encryption key opens this value in ${counts.unopenable.length} row(s), left as they are: `
          + `${counts.unopenable.map((row) => `${row.table} ${row.id}`).join(', ')} (is a previous key missing from ENCRYPTION_KEYS_PREVIOUS?)\n`);
        process.exitCode = 1;
      }
      return counts;
    }
    case 'counts check':
    case 'counts repair': {
      // One JSON line per drifted (form, UTC day) and (form, UTC month) as it is found, then the summary line (README "Day counts that heal").
      const repair = command === 'repair';
      if (!repair && values.since !== undefined) throw new UsageError('--since is for counts repair');
      const { forms, drifted } = await walkDayCounts(em, { repair, formId: values.form, since: day(values.since) }, printLine);
      if (values.form !== undefined && forms === 0) throw new UsageError(`no form ${values.form}`);
      if (repair) return { forms, repaired: drifted };
      if (drifted) process.exitCode = 1;
      return { forms, drifted };
    }
    case 'counts marks': {
      // The job keeps today's and yesterday's marks; older busy days (before the job ran, after a
      // restore or a repair) get theirs here. Every busy day from --since on (default: all).
      // A day whose build failed is named (and the exit code is 1); the others are built.
      // (The last run, caught up, went through every day.)
      const total = { days: 0, walked: 0, added: 0 };
      let failed: DayMarksFailure[] = [];
      for (let caughtUp = false; !caughtUp;) {
        const run = await buildDayMarks(em, { ...config.dayMarks, since: day(values.since) ?? '0001-01-01', formId: values.form });
        Object.assign(total, { days: run.days, walked: total.walked + run.walked, added: total.added + run.added });
        failed = run.failed;
        caughtUp = run.caughtUp;
      }
      if (failed.length) process.exitCode = 1;
      return { ...total, failed };
    }
    case 'deliveries check':
    case 'deliveries repair': {
      // One JSON line per delivery whose owed or failed row disagrees with it, as it is found, then the summary line (deploy/README.md, "Backups and restore").
      const repair = command === 'repair';
      if (values.webhook !== undefined && !(await webhookExists(em, values.webhook))) throw new UsageError(`no webhook ${values.webhook}`);
      const { deliveries, drifted, locked } = await walkDeliverySideRows(em, { repair, webhookId: values.webhook }, printLine);
      if (!repair) {
        if (drifted) process.exitCode = 1;
        return { deliveries, drifted };
      }
      if (locked) {
        process.stderr.write(`warning: ${locked} deliveries stayed locked by other statements and were left as they were; run deliveries repair again\n`);
        process.exitCode = 1;
      }
      return { deliveries, repaired: drifted - locked, locked };
    }
    default:
      throw new UsageError(USAGE);
  }
}

async function main(): Promise<void> {
  const argv = process.argv.slice(2);
  const config = loadConfig();
  if (argv[0] === 'migrate') {
    const applied = await prepareDatabase(config, (line) => process.stderr.write(`${line}\n`));
    process.stdout.write(`${JSON.stringify({ migrated: true, applied })}\n`);
    return;
  }
  const orm = await initOrm(config.databaseUrl, 2, { preparedStatements: config.dbPreparedStatements, timeouts: ADMIN_DB_TIMEOUTS });
  try {
    process.stdout.write(`${JSON.stringify(await run(argv, orm, config))}\n`);
  } finally {
    await orm.close();
  }
}

main().catch((err) => {
  const known = err instanceof UsageError || err instanceof AdminError || err?.code === 'ERR_PARSE_ARGS_UNKNOWN_OPTION';
  process.stderr.write(`error: ${known ? err.message : err?.message ?? err}\n`);
  process.exitCode = 1;
});
