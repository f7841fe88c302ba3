import { execFile, spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { freePort, waitUntil } from './processes';
import { postgresBinDir, postgresRunAs, queryOnce as query } from './postgres-server';

const run = promisify(execFile);

export interface PrimaryWithReplica {
  primaryUrl: string;
  replicaUrl: string;
  /** Resolves once the replica has replayed everything the primary has written so far. */
  caughtUp(): Promise<void>;
  /** Stops applying WAL on the replica: it lags from now on. */
  pauseReplay(): Promise<void>;
  resumeReplay(): Promise<void>;
  stop(): Promise<void>;
}

/**
 * A PostgreSQL primary of the test's own and a real streaming replica of it (`pg_basebackup -R`),
 * each on a free loopback port in a temporary directory, so nothing of the machine's cluster changes.
 */
export async function startPrimaryWithReplica(database: string): Promise<PrimaryWithReplica> {
  const bin = postgresBinDir();
  const user = postgresRunAs();
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'fs-pg-replica-'));
  if (user.uid !== undefined) fs.chownSync(dir, user.uid, user.gid!);
  const primaryDir = path.join(dir, 'primary');
  const replicaDir = path.join(dir, 'replica');
  const [primaryPort, replicaPort] = [await freePort(), await freePort()];
  const servers: ChildProcess[] = [];
  const startServer = (dataDir: string, port: number) => {
    const child = spawn(`${bin}/postgres`, ['-D', dataDir, '-p', String(port), '-c', `unix_socket_directories=${dir}`], {
      ...user, stdio: 'ignore',
    });
    servers.push(child);
  };
  const stop = async () => {
    await Promise.all(servers.map((child) => new Promise<void>((resolve) => {
      if (child.exitCode !== null || child.signalCode !== null) return resolve();
      child.once('exit', () => resolve());
      child.kill('SIGQUIT'); // immediate shutdown: nothing here is worth keeping
    })));
    fs.rmSync(dir, { recursive: true, force: true });
  };
  const url = (port: number, db = database) => `postgres://postgres@127.0.0.1:${port}/${db}`;
  try {
    await run(`${bin}/initdb`, ['-D', primaryDir, '-U', 'postgres', '--auth=trust', '--no-sync'], { ...user, timeout: 60_000 });
    fs.appendFileSync(primaryDir + '/postgresql.conf', [
      "listen_addresses = '127.0.0.1'", 'wal_level = replica', 'max_wal_senders = 4', 'hot_standby = on',
      'fsync = off', 'synchronous_commit = off', 'full_page_writes = off', 'shared_buffers = 32MB', '',
    ].join('\n'));
    startServer(primaryDir, primaryPort);
    await waitUntil(async () => (await query(url(primaryPort, 'postgres'), 'select 1')).length === 1, 20_000, 100);
    await query(url(primaryPort, 'postgres'), `create database "${database}"`);
    await run(`${bin}/pg_basebackup`, ['-h', '127.0.0.1', '-p', String(primaryPort), '-U', 'postgres', '-D', replicaDir, '-R', '-X', 'stream', '--checkpoint=fast'],
      { ...user, timeout: 60_000 });
    startServer(replicaDir, replicaPort);
    await waitUntil(async () => (await query(url(replicaPort, 'postgres'), 'select pg_is_in_recovery() as r'))[0].r === true, 20_000, 100);
  } catch (err) {
    await stop();
    throw err;
  }
  return {
    primaryUrl: url(primaryPort),
    replicaUrl: url(replicaPort),
    async caughtUp() {
      const [{ lsn }] = await query(url(primaryPort, 'postgres'), 'select pg_current_wal_lsn()::text as lsn');
      await waitUntil(async () => (await query(url(replicaPort, 'postgres'),
        `select pg_last_wal_replay_lsn() >= '${lsn}'::pg_lsn as done`))[0].done === true, 30_000, 50);
    },
    pauseReplay: async () => { await query(url(replicaPort, 'postgres'), 'select pg_wal_replay_pause()'); },
    resumeReplay: async () => { await query(url(replicaPort, 'postgres'), 'select pg_wal_replay_resume()'); },
    stop,
  };
}
