import { spawn, type ChildProcess } from 'node:child_process';
import { closeSync, openSync, readFileSync } from 'node:fs';
import net from 'node:net';
import path from 'node:path';

export const DIST_ROOT = path.resolve(__dirname, '../..');

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

export interface ServiceProcess {
  child: ChildProcess;
  output(): string;
  /** Resolves with the exit code, or the signal's name when a signal ended the process. */
  exited: Promise<number | string>;
  stop(signal?: NodeJS.Signals): Promise<number | string>;
}

/**
 * Runs a compiled entry point (e.g. `src/api.js`) as a child process with the test run's env. Its
 * output is kept in memory, or with `outputFile` written to that file as an operator's would be:
 * benchmarks use it, so that reading the service's log lines costs the measuring process nothing.
 * With `ipc`, the child gets Node's IPC channel (`process.send` there, `child.on('message')` here).
 */
export function spawnEntry(entry: string, env: Record<string, string> = {}, nodeArgs: string[] = [], outputFile?: string, ipc = false): ServiceProcess {
  const fd = outputFile ? openSync(outputFile, 'a') : null;
  const child = spawn(process.execPath, [...nodeArgs, path.join(DIST_ROOT, entry)], {
    env: { ...process.env, LOG_LEVEL: 'warn', NODE_NO_WARNINGS: '1', ...env },
    stdio: ['ignore', fd ?? 'pipe', fd ?? 'pipe', ...(ipc ? ['ipc' as const] : [])],
  });
  if (fd !== null) closeSync(fd);
  let output = '';
  child.stdout?.on('data', (chunk) => { output += chunk; });
  child.stderr?.on('data', (chunk) => { output += chunk; });
  const exited = new Promise<number | string>((resolve) => child.once('exit', (code, signal) => resolve(code ?? signal ?? -1)));
  return {
    child,
    output: () => (outputFile ? readFileSync(outputFile, 'utf8') : output),
    exited,
    async stop(signal: NodeJS.Signals = 'SIGTERM') {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal);
      return exited;
    },
  };
}

export async function waitUntil(check: () => Promise<boolean> | boolean, timeoutMs = 10_000, intervalMs = 50): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (await Promise.resolve().then(check).catch(() => false)) return;
    if (Date.now() > deadline) throw new Error(`condition not met within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, intervalMs));
  }
}

export interface StartedEntry {
  proc: ServiceProcess;
  url: string;
}

/** Spawns a compiled entry point on a free port (`PORT`, or `METRICS_PORT` for workers) and waits for /healthz. */
export async function startEntry(
  entry: string, env: Record<string, string>, portVar: 'PORT' | 'METRICS_PORT' = 'PORT', nodeArgs: string[] = [], outputFile?: string,
): Promise<StartedEntry> {
  const port = await freePort();
  const proc = spawnEntry(entry, { ...env, HOST: '127.0.0.1', [portVar]: String(port) }, nodeArgs, outputFile);
  const url = `http://127.0.0.1:${port}`;
  try {
    await waitUntil(async () => (await fetch(`${url}/healthz`)).ok, 60_000, 100);
  } catch {
    await proc.stop('SIGKILL');
    throw new Error(`${entry} did not start:\n${proc.output()}`);
  }
  return { proc, url };
}

/** Starts `node dist/src/api.js` on a free port and waits for /healthz. */
export async function spawnApi(env: Record<string, string> = {}): Promise<ServiceProcess & { url: string }> {
  const { proc, url } = await startEntry('src/api.js', env);
  return { ...proc, url };
}
