import type { MikroORM } from '@mikro-orm/core';
import type { EntityManager, PostgreSqlDriver } from '@mikro-orm/postgresql';

/** The service's ORM and its EntityManager: built by orm.ts, used by prepared.ts and every store (through orm.ts). */
export type Orm = MikroORM<PostgreSqlDriver>;
export type Em = EntityManager;
