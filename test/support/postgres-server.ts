import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { Client } from 'pg';
import { freePort, waitUntil } from './processes';

const run = promisify(execFile);

/** The newest PostgreSQL server binaries Debian installed (`/usr/lib/postgresql/<major>/bin`). */
export function postgresBinDir(): string {
  const versions = fs.readdirSync('/usr/lib/postgresql').filter((v) => /^\d+$/.test(v)).sort((a, b) => Number(b) - Number(a));
  if (!versions.length) throw new Error('no PostgreSQL server binaries under /usr/lib/postgresql');
  return `/usr/lib/postgresql/${versions[0]}/bin`;
}

/** PostgreSQL refuses to run as root: as root, its programs run as the `postgres` system user. */
export function postgresRunAs(): { uid?: number; gid?: number } {
  if (typeof process.getuid !== 'function' || process.getuid() !== 0) return {};
  const passwd = fs.readFileSync('/etc/passwd', 'utf8').split('\n').find((line) => line.startsWith('postgres:'));
  if (!passwd) throw new Error('no postgres system user to run PostgreSQL as');
  const [, , uid, gid] = passwd.split(':');
  return { uid: Number(uid), gid: Number(gid) };
}

export async function queryOnce(url: string, sql: string, params: unknown[] = []): Promise<any[]> {
  const client = new Client({ connectionString: url });
  await client.connect();
  try {
    return (await client.query(sql, params)).rows;
  } finally {
    await client.end();
  }
}

/** A PostgreSQL instance of its own (initdb + pg_ctl in a temporary directory, on a free loopback port). */
export interface OwnPostgres {
  port: number;
  dataDir: string;
  logFile: string;
  /** `postgres://postgres@127.0.0.1:PORT/<database>` (trust authentication). */
  url(database: string): string;
  /** The postmaster's pid (its backends and background processes are its children). */
  postmasterPid(): number;
  /** `pg_ctl stop -m fast`, then the directory is removed. Safe to call more than once. */
  stop(): Promise<void>;
}

/**
 * Initializes and starts a PostgreSQL instance as an operator runs one: fsync and full-page writes
 * on, autovacuum on (the defaults), `settings` on top (e.g. shared_buffers). Listens on 127.0.0.1
 * only, trust authentication. Its log (and autovacuum's, `log_autovacuum_min_duration = 0`) goes to
 * `logFile`, kept after the directory is removed. On `port`, or a free one.
 */
export async function ownPostgres(opts: { settings: Record<string, string | number>; logFile: string; port?: number }): Promise<OwnPostgres> {
  const { settings, logFile } = opts;
  const bin = postgresBinDir();
  const user = postgresRunAs();
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'fs-pg-own-'));
  if (user.uid !== undefined) fs.chownSync(dir, user.uid, user.gid!);
  const dataDir = path.join(dir, 'data');
  fs.writeFileSync(logFile, '');
  if (user.uid !== undefined) fs.chownSync(logFile, user.uid, user.gid!);
  const port = opts.port ?? await freePort();
  const url = (database: string) => `postgres://postgres@127.0.0.1:${port}/${database}`;
  let stopped: Promise<void> | null = null;
  const stop = () => stopped ??= (async () => {
    if (fs.existsSync(path.join(dataDir, 'postmaster.pid'))) {
      await run(`${bin}/pg_ctl`, ['stop', '-D', dataDir, '-m', 'fast', '-w', '-t', '60'], { ...user, timeout: 90_000 }).catch(() =>
        run(`${bin}/pg_ctl`, ['stop', '-D', dataDir, '-m', 'immediate', '-w'], { ...user, timeout: 30_000 }).catch(() => undefined));
    }
    fs.rmSync(dir, { recursive: true, force: true });
  })();
  try {
    await run(`${bin}/initdb`, ['-D', dataDir, '-U', 'postgres', '--auth=trust', '-E', 'UTF8', '--locale=C.UTF-8'], { ...user, timeout: 120_000 });
    const conf = {
      log_autovacuum_min_duration: 0, ...settings,
      listen_addresses: "'127.0.0.1'", port, unix_socket_directories: `'${dir}'`,
    };
    fs.appendFileSync(path.join(dataDir, 'postgresql.conf'),
      `\n# ownPostgres\n${Object.entries(conf).map(([k, v]) => `${k} = ${v}`).join('\n')}\n`);
    await run(`${bin}/pg_ctl`, ['start', '-D', dataDir, '-l', logFile, '-w', '-t', '60'], { ...user, timeout: 90_000 });
    await waitUntil(async () => (await queryOnce(url('postgres'), 'select 1 as one')).length === 1, 20_000, 100);
  } catch (err) {
    await stop();
    throw err;
  }
  return {
    port, dataDir, logFile, url,
    postmasterPid: () => Number(fs.readFileSync(path.join(dataDir, 'postmaster.pid'), 'utf8').split('\n', 1)[0]),
    stop,
  };
}
