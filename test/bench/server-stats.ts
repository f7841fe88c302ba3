import IORedis from 'ioredis';
import { Client } from 'pg';
import { processTree, readProc } from './cpu';

// What PostgreSQL (pg_stat_statements) and Redis (INFO commandstats) did during a bench phase,
// from snapshots before and after it: nothing is reset, so other users of the servers are not
// disturbed (Redis counts their commands too; PostgreSQL's are filtered to the bench database).

interface StatementStats { query: string; calls: number; totalMs: number; rows: number }

export interface StatementSnapshot {
  /** null when pg_stat_statements is not loaded or not created in the admin database. */
  byQuery: Map<string, StatementStats> | null;
  why?: string;
}

/** pg_stat_statements of one database, read through the admin database where the extension lives. */
export async function snapshotStatements(adminUrl: string, database: string): Promise<StatementSnapshot> {
  const client = new Client({ connectionString: adminUrl });
  await client.connect();
  try {
    const { rows } = await client.query(
      `select s.queryid::text as id, s.query, s.calls::float8 as calls, s.total_exec_time as total_ms, s.rows::float8 as rows
         from pg_stat_statements s join pg_database d on d.oid = s.dbid where d.datname = $1`, [database]);
    return { byQuery: new Map(rows.map((r) => [r.id, { query: r.query, calls: r.calls, totalMs: r.total_ms, rows: r.rows }])) };
  } catch (err: any) {
    return { byQuery: null, why: err.message };
  } finally {
    await client.end();
  }
}

/**
 * Transactions of one database so far (committed and rolled back, pg_stat_database): with the
 * group commit, one storing statement is one transaction, so their count per submission shows how
 * many submissions a statement held where pg_stat_statements is not loaded. The statistics
 * collector lags by up to half a second (stats_fetch_consistency aside): compare over seconds.
 */
export async function snapshotTransactions(adminUrl: string, database: string): Promise<number> {
  const client = new Client({ connectionString: adminUrl });
  await client.connect();
  try {
    await client.query('select pg_stat_clear_snapshot()');
    const { rows } = await client.query('select (xact_commit + xact_rollback)::float8 as n from pg_stat_database where datname = $1', [database]);
    return rows[0]?.n ?? 0;
  } finally {
    await client.end();
  }
}

/** The statements that took most execution time between two snapshots, per submission. */
export function topStatements(before: StatementSnapshot, after: StatementSnapshot, submissions: number, top = 8) {
  if (!before.byQuery || !after.byQuery) return null;
  const rows = [...after.byQuery].map(([id, s]) => {
    const prior = before.byQuery!.get(id);
    return { query: s.query, calls: s.calls - (prior?.calls ?? 0), totalMs: s.totalMs - (prior?.totalMs ?? 0) };
  }).filter((s) => s.calls > 0).sort((a, b) => b.totalMs - a.totalMs);
  const total = rows.reduce((sum, s) => sum + s.totalMs, 0);
  return {
    execMsPerSub: Number((total / submissions).toFixed(3)),
    callsPerSub: Number((rows.reduce((sum, s) => sum + s.calls, 0) / submissions).toFixed(3)),
    top: rows.slice(0, top).map((s) => ({
      statement: s.query.replace(/\s+/g, ' ').slice(0, 90),
      callsPerSub: Number((s.calls / submissions).toFixed(3)),
      execMsPerSub: Number((s.totalMs / submissions).toFixed(4)),
      msPerCall: Number((s.totalMs / s.calls).toFixed(3)),
    })),
  };
}

export type CommandStats = Map<string, { calls: number; usec: number }>;

/** INFO commandstats of the Redis the bench uses (every client's commands, not just ours). */
export async function snapshotCommands(redisUrl: string): Promise<CommandStats> {
  const redis = new IORedis(redisUrl, { lazyConnect: true, maxRetriesPerRequest: 1 });
  try {
    await redis.connect();
    const info = await redis.info('commandstats');
    const stats: CommandStats = new Map();
    for (const line of info.split('\n')) {
      const m = /^cmdstat_([^:]+):calls=(\d+),usec=(\d+)/.exec(line.trim());
      if (m) stats.set(m[1], { calls: Number(m[2]), usec: Number(m[3]) });
    }
    return stats;
  } finally {
    redis.disconnect();
  }
}

export function commandsPerSubmission(before: CommandStats, after: CommandStats, submissions: number) {
  return [...after].map(([command, s]) => {
    const prior = before.get(command);
    return { command, calls: s.calls - (prior?.calls ?? 0), usec: s.usec - (prior?.usec ?? 0) };
  }).filter((c) => c.calls > 0).sort((a, b) => b.calls - a.calls).map((c) => ({
    command: c.command,
    callsPerSub: Number((c.calls / submissions).toFixed(3)),
    usecPerSub: Number((c.usec / submissions).toFixed(2)),
  }));
}

/** A process's garbage collections by kind (minor, major, incremental, weakcb), from prom-client's default GC histogram. */
export type GcSnapshot = Map<string, { count: number; seconds: number }>;

/** The service's GC histogram, read from its /metrics (undefined when it does not answer). */
export async function snapshotGc(serviceUrl: string): Promise<GcSnapshot | undefined> {
  const res = await fetch(`${serviceUrl}/metrics`).catch(() => undefined);
  if (!res?.ok) return undefined;
  const gc: GcSnapshot = new Map();
  for (const m of (await res.text()).matchAll(/^\w*nodejs_gc_duration_seconds_(sum|count)\{kind="(\w+)"\} (\S+)$/gm)) {
    const kind = gc.get(m[2]) ?? { count: 0, seconds: 0 };
    if (m[1] === 'sum') kind.seconds = Number(m[3]);
    else kind.count = Number(m[3]);
    gc.set(m[2], kind);
  }
  return gc;
}

/** The storing statements' group sizes so far (formservice_submission_store_group_size): statements and the submissions they held. */
export async function snapshotGroups(serviceUrl: string): Promise<{ statements: number; submissions: number } | undefined> {
  const res = await fetch(`${serviceUrl}/metrics`).catch(() => undefined);
  if (!res?.ok) return undefined;
  const text = await res.text();
  const value = (suffix: string) => Number(text.match(new RegExp(`^formservice_submission_store_group_size_${suffix}(?:\\{\\})? (\\S+)$`, 'm'))?.[1] ?? NaN);
  return { statements: value('count'), submissions: value('sum') };
}

/** The collections between two snapshots, by kind: how many, their pauses in all and on average, and per 1,000 submissions. */
export function gcDuring(before: GcSnapshot, after: GcSnapshot, submissions: number) {
  return [...after].map(([kind, s]) => {
    const count = s.count - (before.get(kind)?.count ?? 0);
    const ms = (s.seconds - (before.get(kind)?.seconds ?? 0)) * 1000;
    return {
      kind, collections: count, totalMs: Number(ms.toFixed(1)), meanMs: count ? Number((ms / count).toFixed(2)) : 0,
      msPer1000Subs: Number(((ms / submissions) * 1000).toFixed(2)),
    };
  }).filter((k) => k.collections > 0);
}

/** How many of the bench database's backends were in each state, on average over a phase. */
export interface WaitSampling {
  stop(): Promise<Array<{ state: string; backends: number }>>;
}

/**
 * Samples pg_stat_activity every few milliseconds during a phase: the bench database's client
 * backends by state, an active one by its wait event (`cpu` when it waits on nothing), an idle one
 * as `idle ClientRead` (its client's turn; idle pool connections count here too). The mean count per
 * state says where the statements' time goes: executing, flushing WAL, waiting for another
 * backend's flush or a lock, or waiting for Node.js. The sampling costs one small query per tick on
 * its own connection.
 */
export async function sampleWaits(adminUrl: string, database: string, everyMs = 3): Promise<WaitSampling> {
  const client = new Client({ connectionString: adminUrl });
  await client.connect();
  const counts = new Map<string, number>();
  let samples = 0;
  let running = true;
  const loop = (async () => {
    while (running) {
      const { rows } = await client.query(
        `select case when state = 'active' then coalesce(wait_event_type || ':' || wait_event, 'cpu')
                     else state || ' ' || coalesce(wait_event, '') end as state, count(*)::int as n
           from pg_stat_activity
          where datname = $1 and backend_type = 'client backend' and pid <> pg_backend_pid()
          group by 1`, [database]);
      for (const r of rows) counts.set(r.state, (counts.get(r.state) ?? 0) + r.n);
      samples++;
      await new Promise((resolve) => setTimeout(resolve, everyMs));
    }
  })();
  return {
    async stop() {
      running = false;
      await loop;
      await client.end();
      return [...counts].map(([state, n]) => ({ state, backends: Number((n / Math.max(samples, 1)).toFixed(3)) }))
        .sort((a, b) => b.backends - a.backends);
    },
  };
}

/** A process's resident set (MB) from /proc/<pid>/status, or NaN once it is gone. */
export function rssMb(pid: number | undefined): number {
  const m = pid === undefined ? null : /^VmRSS:\s+(\d+) kB/m.exec(readProc(pid, 'status') ?? '');
  return m ? Number(m[1]) / 1024 : NaN;
}

/**
 * The proportional set (MB) of a process and its children, from /proc/<pid>/smaps_rollup: for
 * PostgreSQL, the postmaster with its backends and background processes, where a sum of RSS would
 * count the shared buffers once per backend that touched them.
 */
export function treePssMb(parentPid: number): number {
  let kb = 0;
  for (const pid of processTree(parentPid)) {
    const m = /^Pss:\s+(\d+) kB/m.exec(readProc(pid, 'smaps_rollup') ?? ''); // '' once it ended meanwhile
    if (m) kb += Number(m[1]);
  }
  return kb / 1024;
}

/** Redis INFO memory's `used_memory` (MB). */
export async function redisUsedMemoryMb(redisUrl: string): Promise<number> {
  const redis = new IORedis(redisUrl, { lazyConnect: true, maxRetriesPerRequest: 1 });
  try {
    await redis.connect();
    const m = /^used_memory:(\d+)/m.exec(await redis.info('memory'));
    return m ? Number(m[1]) / 1024 / 1024 : NaN;
  } finally {
    redis.disconnect();
  }
}

export interface TableRows { live: number; dead: number; updates: number; hotUpdates: number; autovacuums: number; megabytes: number }

/**
 * pg_stat_user_tables of the named tables (those that exist), a partitioned table as the sum of its
 * partitions: live and dead rows, updates and HOT updates so far, autovacuum runs so far, and its
 * size on disk with its indexes (MB).
 */
export async function tableRows(databaseUrl: string, tables: string[]): Promise<Map<string, TableRows>> {
  const client = new Client({ connectionString: databaseUrl });
  await client.connect();
  try {
    const { rows } = await client.query(
      `select coalesce(p.relname, s.relname) as name, sum(s.n_live_tup)::float8 as live, sum(s.n_dead_tup)::float8 as dead,
              sum(s.n_tup_upd)::float8 as updates, sum(s.n_tup_hot_upd)::float8 as hot, sum(s.autovacuum_count)::float8 as autovacuums,
              sum(pg_total_relation_size(s.relid))::float8 / 1048576 as megabytes
         from pg_stat_user_tables s
         left join pg_inherits i on i.inhrelid = s.relid
         left join pg_class p on p.oid = i.inhparent
        where coalesce(p.relname, s.relname) = any($1)
        group by 1`, [tables]);
    return new Map(rows.map((r) => [r.name, { live: r.live, dead: r.dead, updates: r.updates, hotUpdates: r.hot, autovacuums: r.autovacuums, megabytes: r.megabytes }]));
  } finally {
    await client.end();
  }
}
