import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { spawn, type ChildProcess } from 'node:child_process';
import { Client } from 'pg';
import { freePort, waitUntil } from './processes';

export interface RunningPgBouncer {
  port: number;
  /** The database URL through PgBouncer, for the same database `databaseUrl` names. */
  url: string;
  output(): string;
  stop(): Promise<void>;
}

export function pgBouncerBinary(): string | null {
  for (const candidate of ['/usr/sbin/pgbouncer', '/usr/bin/pgbouncer']) if (fs.existsSync(candidate)) return candidate;
  const found = spawnSync('sh', ['-c', 'command -v pgbouncer'], { encoding: 'utf8' });
  return found.status === 0 ? found.stdout.trim() : null;
}

/**
 * A real PgBouncer in transaction pooling mode in front of the PostgreSQL that `databaseUrl` names,
 * with fewer server connections than the service's pool, so consecutive transactions of one client
 * connection land on different server connections (what breaks named prepared statements).
 */
export async function startPgBouncer(databaseUrl: string, serverConnections = 3): Promise<RunningPgBouncer> {
  const binary = pgBouncerBinary();
  if (!binary) throw new Error('pgbouncer is not installed (apt-get install -y pgbouncer)');
  const target = new URL(databaseUrl);
  const port = await freePort();
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'fs-pgbouncer-'));
  fs.chmodSync(dir, 0o755);
  const user = decodeURIComponent(target.username || 'postgres');
  fs.writeFileSync(path.join(dir, 'users.txt'), `"${user}" ""\n`);
  fs.writeFileSync(path.join(dir, 'pgbouncer.ini'), [
    '[databases]',
    `* = host=${target.hostname} port=${target.port || 5432}`,
    '[pgbouncer]',
    'listen_addr = 127.0.0.1',
    `listen_port = ${port}`,
    'unix_socket_dir =',
    'auth_type = trust',
    `auth_file = ${path.join(dir, 'users.txt')}`,
    'pool_mode = transaction',
    `default_pool_size = ${serverConnections}`,
    'max_client_conn = 500',
    // What node-postgres may send at connect; PgBouncer refuses unknown startup parameters.
    'ignore_startup_parameters = extra_float_digits,options,statement_timeout,idle_in_transaction_session_timeout,lock_timeout',
    '',
  ].join('\n'));
  for (const file of fs.readdirSync(dir)) fs.chmodSync(path.join(dir, file), 0o644);
  // PgBouncer refuses to run as root; drop to the database's system user then.
  const asRoot = typeof process.getuid === 'function' && process.getuid() === 0;
  const child: ChildProcess = spawn(binary, [...(asRoot ? ['-u', 'postgres'] : []), path.join(dir, 'pgbouncer.ini')], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout!.on('data', (c) => { output += c; });
  child.stderr!.on('data', (c) => { output += c; });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));

  const url = new URL(databaseUrl);
  url.hostname = '127.0.0.1';
  url.port = String(port);
  try {
    await waitUntil(async () => {
      const client = new Client({ connectionString: url.toString() });
      await client.connect();
      await client.query('select 1');
      await client.end();
      return true;
    }, 15_000, 100);
  } catch {
    child.kill('SIGKILL');
    throw new Error(`pgbouncer did not start:\n${output}`);
  }
  return {
    port, url: url.toString(), output: () => output,
    async stop() {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGINT');
      await exited;
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
}
