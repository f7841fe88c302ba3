import { spawn, type ChildProcess } from 'node:child_process';
import IORedis from 'ioredis';
import { freePort, waitUntil } from './processes';

/** A redis-server of a test's own, on a loopback port, that keeps nothing on disk: a restart starts it empty. */
export interface OwnRedis {
  port: number;
  url: string;
  /** The running server's pid (undefined when not started). */
  pid(): number | undefined;
  /** Starts (or starts again, empty) the server on its port. */
  start(): Promise<void>;
  /** SIGKILL: everything it held is gone. */
  kill(): Promise<void>;
}

export async function ownRedis(port?: number): Promise<OwnRedis> {
  const chosen = port ?? await freePort();
  let child: ChildProcess | null = null;
  const url = `redis://127.0.0.1:${chosen}`;
  return {
    port: chosen,
    url,
    pid: () => child?.pid,
    async start() {
      child = spawn('redis-server', ['--port', String(chosen), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], { stdio: 'ignore' });
      await waitUntil(async () => {
        const client = new IORedis(url, { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
        client.on('error', () => undefined);
        try {
          await client.connect();
          return (await client.ping()) === 'PONG';
        } finally {
          client.disconnect();
        }
      }, 10_000, 50);
    },
    async kill() {
      const running = child;
      child = null;
      if (!running || running.exitCode !== null || running.signalCode !== null) return;
      const exited = new Promise((resolve) => running.once('exit', resolve));
      running.kill('SIGKILL');
      await exited;
    },
  };
}
