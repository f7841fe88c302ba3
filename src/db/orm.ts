import 'reflect-metadata';
import { MikroORM } from '@mikro-orm/core';
import { Migrator } from '@mikro-orm/migrations';
import { PostgreSqlDriver, type EntityManager } from '@mikro-orm/postgresql';
import { Client } from 'pg';
import { ENTITIES } from './entities';
import { allowNamedStatements } from './prepared';
import { Migration20261122000000_initial } from './migrations/Migration20261122000000_initial';
import { Migration20261123000100_security } from './migrations/Migration20261123000100_security';
import { Migration20261123000300_webhooks } from './migrations/Migration20261123000300_webhooks';
import { Migration20261123000400_bulk } from './migrations/Migration20261123000400_bulk';

export type Orm = MikroORM<PostgreSqlDriver>;
export type Em = EntityManager;

const MIGRATIONS = [
  { name: 'Migration20261122000000_initial', class: Migration20261122000000_initial },
  { name: 'Migration20261123000100_security', class: Migration20261123000100_security },
  { name: 'Migration20261123000300_webhooks', class: Migration20261123000300_webhooks },
  { name: 'Migration20261123000400_bulk', class: Migration20261123000400_bulk },
];

export interface OrmOptions {
  /** false behind PgBouncer in transaction mode and other poolers without prepared-statement support. */
  preparedStatements?: boolean;
}

export async function initOrm(databaseUrl: string, poolMax = 10, opts: OrmOptions = {}): Promise<Orm> {
  const orm = await MikroORM.init<PostgreSqlDriver>({
    driver: PostgreSqlDriver,
    clientUrl: databaseUrl,
    entities: ENTITIES,
    extensions: [Migrator],
    migrations: { migrationsList: MIGRATIONS, transactional: true, allOrNothing: true, silent: true },
    // No request may wait long on a database that is gone: connecting and taking a pooled
    // connection both give up within seconds, and the request answers 503.
    pool: { min: 0, max: poolMax, acquireTimeoutMillis: 4_000 },
    driverOptions: { connection: { connectionTimeoutMillis: 3_000 } },
    // A shared EntityManager grows forever: every request and job must fork its own.
    allowGlobalContext: false,
    discovery: { warnWhenNoEntities: true },
    forceUtcTimezone: true,
    debug: false,
  });
  allowNamedStatements(orm.em, opts.preparedStatements ?? true);
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

export async function migrate(orm: Orm): Promise<void> {
  await orm.getMigrator().up();
}
