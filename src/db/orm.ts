import 'reflect-metadata';
import { MikroORM } from '@mikro-orm/core';
import { Migration, Migrator } from '@mikro-orm/migrations';
import { PostgreSqlDriver } from '@mikro-orm/postgresql';
import { Client } from 'pg';
import { ENTITIES } from './entities';
import { allowNamedStatements } from './prepared';
import type { Em, Orm } from './types';
import { Migration20261122000000_initial } from './migrations/Migration20261122000000_initial';
import { Migration20261123000100_security } from './migrations/Migration20261123000100_security';
import { Migration20261123000200_durability } from './migrations/Migration20261123000200_durability';
import { Migration20261123000300_webhooks } from './migrations/Migration20261123000300_webhooks';
import { Migration20261123000400_bulk } from './migrations/Migration20261123000400_bulk';
import { Migration20261123000500_partitions } from './migrations/Migration20261123000500_partitions';
import { Migration20261123001000_counter_slots } from './migrations/Migration20261123001000_counter_slots';
import { Migration20261123001100_change_feed_xid } from './migrations/Migration20261123001100_change_feed_xid';
import { Migration20261123003000_hot_path_indexes } from './migrations/Migration20261123003000_hot_path_indexes';
import { Migration20261123004000_store_submission_function } from './migrations/Migration20261123004000_store_submission_function';
import { Migration20261124000000_drop_store_submission_function } from './migrations/Migration20261124000000_drop_store_submission_function';
import { Migration20261124020000_payment_intents } from './migrations/Migration20261124020000_payment_intents';
import { Migration20261125000000_uploads } from './migrations/Migration20261125000000_uploads';
import { Migration20261125100000_delivery_job_groups } from './migrations/Migration20261125100000_delivery_job_groups';
import { Migration20261126000000_submission_day_counts } from './migrations/Migration20261126000000_submission_day_counts';
import { Migration20261126100000_webhook_throttle } from './migrations/Migration20261126100000_webhook_throttle';
import { Migration20261127000100_day_counts_heal } from './migrations/Migration20261127000100_day_counts_heal';
import { Migration20261127000300_webhook_last_success } from './migrations/Migration20261127000300_webhook_last_success';
import { Migration20261127000400_languages } from './migrations/Migration20261127000400_languages';
import { Migration20261127000500_form_analytics_pages } from './migrations/Migration20261127000500_form_analytics_pages';
import { Migration20261127000600_form_versions } from './migrations/Migration20261127000600_form_versions';
import { Migration20261127000601_form_version_columns } from './migrations/Migration20261127000601_form_version_columns';
import { Migration20261128000100_submission_day_marks } from './migrations/Migration20261128000100_submission_day_marks';
import { Migration20261128000200_delivery_owed } from './migrations/Migration20261128000200_delivery_owed';
import { Migration20261128000201_delivery_owed_backfill } from './migrations/Migration20261128000201_delivery_owed_backfill';
import { Migration20261128000202_deliveries_created_idx } from './migrations/Migration20261128000202_deliveries_created_idx';
import { Migration20261128000400_submission_month_counts } from './migrations/Migration20261128000400_submission_month_counts';
import { Migration20261128000401_month_counts_backfill } from './migrations/Migration20261128000401_month_counts_backfill';
import { Migration20261129000100_delivery_rollout_contract } from './migrations/Migration20261129000100_delivery_rollout_contract';
import { Migration20261129000200_month_counts_rollout_contract } from './migrations/Migration20261129000200_month_counts_rollout_contract';
import { Migration20261129000300_storing_without_foreign_keys } from './migrations/Migration20261129000300_storing_without_foreign_keys';
import { Migration20261129001000_day_mark_failures } from './migrations/Migration20261129001000_day_mark_failures';

export type { Em, Orm };

const MIGRATION_CLASSES = [
  { name: 'Migration20261122000000_initial', class: Migration20261122000000_initial },
  { name: 'Migration20261123000100_security', class: Migration20261123000100_security },
  { name: 'Migration20261123000200_durability', class: Migration20261123000200_durability },
  { name: 'Migration20261123000300_webhooks', class: Migration20261123000300_webhooks },
  { name: 'Migration20261123000400_bulk', class: Migration20261123000400_bulk },
  { name: 'Migration20261123000500_partitions', class: Migration20261123000500_partitions },
  { name: 'Migration20261123001000_counter_slots', class: Migration20261123001000_counter_slots },
  { name: 'Migration20261123001100_change_feed_xid', class: Migration20261123001100_change_feed_xid },
  { name: 'Migration20261123003000_hot_path_indexes', class: Migration20261123003000_hot_path_indexes },
  { name: 'Migration20261123004000_store_submission_function', class: Migration20261123004000_store_submission_function },
  { name: 'Migration20261124000000_drop_store_submission_function', class: Migration20261124000000_drop_store_submission_function },
  { name: 'Migration20261124020000_payment_intents', class: Migration20261124020000_payment_intents },
  { name: 'Migration20261125000000_uploads', class: Migration20261125000000_uploads },
  { name: 'Migration20261125100000_delivery_job_groups', class: Migration20261125100000_delivery_job_groups },
  { name: 'Migration20261126000000_submission_day_counts', class: Migration20261126000000_submission_day_counts },
  { name: 'Migration20261126100000_webhook_throttle', class: Migration20261126100000_webhook_throttle },
  { name: 'Migration20261127000100_day_counts_heal', class: Migration20261127000100_day_counts_heal },
  { name: 'Migration20261127000300_webhook_last_success', class: Migration20261127000300_webhook_last_success },
  { name: 'Migration20261127000400_languages', class: Migration20261127000400_languages },
  { name: 'Migration20261127000500_form_analytics_pages', class: Migration20261127000500_form_analytics_pages },
  { name: 'Migration20261127000600_form_versions', class: Migration20261127000600_form_versions },
  { name: 'Migration20261127000601_form_version_columns', class: Migration20261127000601_form_version_columns },
  { name: 'Migration20261128000100_submission_day_marks', class: Migration20261128000100_submission_day_marks },
  { name: 'Migration20261128000200_delivery_owed', class: Migration20261128000200_delivery_owed },
  { name: 'Migration20261128000201_delivery_owed_backfill', class: Migration20261128000201_delivery_owed_backfill },
  { name: 'Migration20261128000202_deliveries_created_idx', class: Migration20261128000202_deliveries_created_idx },
  { name: 'Migration20261128000400_submission_month_counts', class: Migration20261128000400_submission_month_counts },
  { name: 'Migration20261128000401_month_counts_backfill', class: Migration20261128000401_month_counts_backfill },
  { name: 'Migration20261129000100_delivery_rollout_contract', class: Migration20261129000100_delivery_rollout_contract },
  { name: 'Migration20261129000200_month_counts_rollout_contract', class: Migration20261129000200_month_counts_rollout_contract },
  { name: 'Migration20261129000300_storing_without_foreign_keys', class: Migration20261129000300_storing_without_foreign_keys },
  { name: 'Migration20261129001000_day_mark_failures', class: Migration20261129001000_day_mark_failures },
];

/**
 * How long one migration statement may wait for a lock. Migrations run while the previous release
 * serves (deploy/README.md, "Upgrading"): a statement queued behind a long transaction for a lock
 * that conflicts with the storing statement's would block every request queued behind it, so it
 * gives up instead and the migration is retried (`migrate`). Requests themselves give up on a lock
 * after `DEFAULT_DB_TIMEOUTS.lockMs`; this is the same bound.
 */
export const MIGRATION_LOCK_TIMEOUT_MS = 2_000;
/** How many times `migrate` runs a migration whose statement gave up waiting for a lock. */
export const MIGRATION_ATTEMPTS = 8;

type MigrationClass = new (...args: any[]) => Migration;

/**
 * The one place every migration gets its lock bound: the wrapped migration's statements start with
 * `set local lock_timeout` (in its transaction), or `set lock_timeout` for a non-transactional one
 * (`create index concurrently`), so no migration has to remember it.
 */
function withLockTimeout(Base: MigrationClass): MigrationClass {
  return class extends Base {
    private setLockTimeout(): void {
      this.addSql(`set ${this.isTransactional() ? 'local ' : ''}lock_timeout = '${MIGRATION_LOCK_TIMEOUT_MS}ms';`);
    }

    override async up(): Promise<void> {
      this.setLockTimeout();
      await Base.prototype.up.call(this); // `super.up()` names Migration's abstract method to tsc
    }

    override async down(): Promise<void> {
      this.setLockTimeout();
      await super.down();
    }
  };
}

const MIGRATIONS = MIGRATION_CLASSES.map(({ name, class: cls }) => ({ name, class: withLockTimeout(cls) }));

/** How long the database may take before a request gives up on it; 0 turns a limit off. */
export interface DbTimeouts {
  statementMs: number;
  lockMs: number;
  idleInTransactionMs: number;
}

/** Requests answer within 5 s, so no statement of theirs may wait on a lock or run for longer. */
export const DEFAULT_DB_TIMEOUTS: DbTimeouts = { statementMs: 3_000, lockMs: 2_000, idleInTransactionMs: 15_000 };

/** Migrations and operator commands may rewrite or index big tables: no statement limit, but no endless lock wait. */
export const ADMIN_DB_TIMEOUTS: DbTimeouts = { statementMs: 0, lockMs: 30_000, idleInTransactionMs: 0 };

/** The longest a Node timer can wait (about 24.8 days). */
const LONGEST_TIMER_MS = 2 ** 31 - 1;

/**
 * Lifts the client-side read timeout for one long streaming query (e.g. a cursor behind an export),
 * which would otherwise end it after the statement timeout; pair it with `set local
 * statement_timeout` in the query's transaction. Returns the same query object.
 */
export function withoutReadTimeout<T extends object>(submittable: T): T {
  return Object.assign(submittable, { query_timeout: LONGEST_TIMER_MS });
}

/**
 * Server-side limits end a slow statement or a lock wait; the client-side read timeout (a little
 * longer) ends a wait on a database that no longer answers at all (a black-holed network), and TCP
 * keepalive finds connections whose peer is gone. Behind PgBouncer (no prepared statements) the
 * server-side limits are not sent as startup parameters, which it refuses: set them on the role
 * (`ALTER ROLE … SET statement_timeout = …`, and `jit = off`); the client-side ones still apply.
 */
function connectionOptions(timeouts: DbTimeouts, startupParameters: boolean): Record<string, unknown> {
  return {
    connectionTimeoutMillis: 3_000,
    keepAlive: true,
    keepAliveInitialDelayMillis: 10_000,
    ...(timeouts.statementMs ? { query_timeout: timeouts.statementMs + 500 } : {}),
    ...(startupParameters && timeouts.statementMs ? { statement_timeout: timeouts.statementMs } : {}),
    ...(startupParameters && timeouts.lockMs ? { lock_timeout: timeouts.lockMs } : {}),
    ...(startupParameters && timeouts.idleInTransactionMs ? { idle_in_transaction_session_timeout: timeouts.idleInTransactionMs } : {}),
    // No statement of this service scans enough to gain from JIT, and a misestimated one pays for
    // compiling on every execution: the storing statement once did (100+ ms for a statement that
    // runs in about one) before its estimate was fixed; a test keeps that estimate under
    // jit_above_cost, and this is the second guard (behind PgBouncer: ALTER ROLE … SET jit = off).
    ...(startupParameters ? { options: '-c jit=off' } : {}),
  };
}

export interface OrmOptions {
  /** false behind PgBouncer in transaction mode and other poolers without prepared-statement support. */
  preparedStatements?: boolean;
  timeouts?: DbTimeouts;
  /**
   * A read replica: nothing is created there, and a replica that is down when the process starts
   * does not stop it (its reads are answered by the primary meanwhile).
   */
  replica?: boolean;
}

export async function initOrm(databaseUrl: string, poolMax = 10, opts: OrmOptions = {}): Promise<Orm> {
  const preparedStatements = opts.preparedStatements ?? true;
  const orm = await MikroORM.init<PostgreSqlDriver>({
    driver: PostgreSqlDriver,
    clientUrl: databaseUrl,
    entities: ENTITIES,
    extensions: [Migrator],
    // One transaction per migration (not one for them all): a migration's locks end with it, and one
    // that declares isTransactional() false can build an index concurrently.
    migrations: { migrationsList: MIGRATIONS, transactional: true, allOrNothing: false, silent: true },
    // No request may wait long on a database that is gone: connecting and taking a pooled
    // connection both give up within seconds, and the request answers 503.
    pool: { min: 0, max: poolMax, acquireTimeoutMillis: 4_000 },
    driverOptions: { connection: connectionOptions(opts.timeouts ?? DEFAULT_DB_TIMEOUTS, preparedStatements) },
    // A shared EntityManager grows forever: every request and job must fork its own.
    allowGlobalContext: false,
    discovery: { warnWhenNoEntities: true },
    forceUtcTimezone: true,
    ensureDatabase: !opts.replica,
    debug: false,
  });
  allowNamedStatements(orm.em, preparedStatements);
  return orm;
}

/** Creates the database named in the URL when it does not exist yet. */
export async function ensureDatabase(databaseUrl: string): Promise<void> {
  const target = new URL(databaseUrl);
  const dbName = decodeURIComponent(target.pathname.replace(/^\//, ''));
  if (!dbName) throw new Error('DATABASE_URL names no database');
  const admin = new URL(databaseUrl);
  admin.pathname = '/postgres';
  const client = new Client({ connectionString: admin.toString() });
  await client.connect();
  try {
    const found = await client.query('select 1 from pg_database where datname = $1', [dbName]);
    if (found.rowCount === 0) {
      await client.query(`create database "${dbName.replace(/"/g, '""')}"`).catch((err: any) => {
        if (err.code !== '42P04') throw err; // created concurrently by another process
      });
    }
  } finally {
    await client.end();
  }
}

/** What `migrate` did to one migration: how long it took and how many times a lock wait made it retry. */
export interface AppliedMigration {
  name: string;
  ms: number;
  attempts: number;
}

/** Why a migration's statement gave up on a lock (null: it did not): its wait ran out, or it was a deadlock's victim. */
function lockGivenUp(err: unknown): string | null {
  for (let e: any = err; e; e = e.cause ?? e.previous) {
    if (e.code === '55P03') return `waited ${MIGRATION_LOCK_TIMEOUT_MS} ms for a lock`; // lock_not_available: lock_timeout ran out
    // deadlock_detected: it waited for a lock held by a transaction waiting for one it held, and PostgreSQL cancelled it
    if (e.code === '40P01') return 'lost a deadlock';
    if (e === e.cause) break;
  }
  return /canceling statement due to lock timeout/.test(String((err as Error)?.message ?? err)) ? `waited ${MIGRATION_LOCK_TIMEOUT_MS} ms for a lock` : null;
}

/**
 * Applies the pending migrations one at a time, each in its own transaction with the lock bound
 * above; a migration whose statement gave up waiting for a lock (or lost a deadlock) was rolled back whole and runs
 * again after a pause (a non-transactional one must be written to run again: `if not exists`).
 */
export async function migrate(orm: Orm, log: (line: string) => void = () => {}): Promise<AppliedMigration[]> {
  const migrator = orm.getMigrator();
  const applied: AppliedMigration[] = [];
  for (const { name } of await migrator.getPendingMigrations()) {
    const started = Date.now();
    for (let attempt = 1; ; attempt++) {
      try {
        await migrator.up({ migrations: [name] });
        applied.push({ name, ms: Date.now() - started, attempts: attempt });
        break;
      } catch (err) {
        const givenUp = lockGivenUp(err);
        if (!givenUp || attempt >= MIGRATION_ATTEMPTS) throw err;
        log(`${name}: a statement ${givenUp}, attempt ${attempt + 1} follows`);
        await new Promise((r) => setTimeout(r, Math.min(250 * 2 ** attempt, 5_000)));
      }
    }
  }
  return applied;
}

/** One round trip to the database: what the readiness checks ask of it. */
export async function pingDatabase(orm: Orm): Promise<void> {
  await orm.em.getConnection().execute('select 1');
}
