import { execFile, spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { Cluster } from 'ioredis';
import { freePort, waitUntil } from './processes';

const run = promisify(execFile);

export interface RunningRedisCluster {
  ports: number[];
  /** `REDIS_CLUSTER_NODES` for the service. */
  nodes: string;
  /** A client of the cluster, for assertions. */
  client(): Cluster;
  stop(): Promise<void>;
}

async function redisCli(port: number, ...args: string[]): Promise<string> {
  const { stdout } = await run('redis-cli', ['-h', '127.0.0.1', '-p', String(port), ...args], { timeout: 20_000 });
  return stdout;
}

/**
 * A real Redis Cluster of three masters on loopback ports (`redis-server --cluster-enabled yes`,
 * joined with `redis-cli --cluster create`), keeping nothing on disk.
 */
export async function startRedisCluster(masters = 3): Promise<RunningRedisCluster> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'fs-redis-cluster-'));
  const ports: number[] = [];
  const children: ChildProcess[] = [];
  const clients: Cluster[] = [];
  const stop = async () => {
    for (const c of clients) c.disconnect();
    await Promise.all(children.map((child) => new Promise<void>((resolve) => {
      if (child.exitCode !== null || child.signalCode !== null) return resolve();
      child.once('exit', () => resolve());
      child.kill('SIGKILL');
    })));
    fs.rmSync(dir, { recursive: true, force: true });
  };
  try {
    for (let i = 0; i < masters; i++) {
      const port = await freePort();
      ports.push(port);
      children.push(spawn('redis-server', [
        '--port', String(port), '--bind', '127.0.0.1', '--cluster-enabled', 'yes',
        '--cluster-config-file', `nodes-${port}.conf`, '--cluster-node-timeout', '5000', '--dir', dir,
        '--save', '', '--appendonly', 'no', '--daemonize', 'no', '--loglevel', 'warning',
      ], { stdio: 'ignore' }));
    }
    for (const port of ports) await waitUntil(async () => (await redisCli(port, 'ping')).trim() === 'PONG', 10_000, 50);
    await run('redis-cli', ['--cluster', 'create', ...ports.map((p) => `127.0.0.1:${p}`), '--cluster-replicas', '0', '--cluster-yes'],
      { timeout: 30_000 });
    await waitUntil(async () => {
      for (const port of ports) if (!(await redisCli(port, 'cluster', 'info')).includes('cluster_state:ok')) return false;
      return true;
    }, 20_000, 100);
  } catch (err) {
    await stop();
    throw err;
  }
  return {
    ports,
    nodes: ports.map((p) => `127.0.0.1:${p}`).join(','),
    client() {
      const c = new Cluster(ports.map((port) => ({ host: '127.0.0.1', port })));
      clients.push(c);
      return c;
    },
    stop,
  };
}
