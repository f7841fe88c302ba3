import { fork, type ChildProcess } from 'node:child_process';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { cpuMs } from './cpu';
import { announceRuntime, atFixedRate, benchArg, benchNumber } from './support';

/**
 * What the machine charges for a request, before any of the service's code: a bare node:http JSON
 * echo in its own process, driven at fixed rates by a keep-alive client in this one, CPU per
 * request of each side. Run it beside bench:deliver or bench:ingest to read their figures: on a
 * virtual machine a process woken from idle pays much more per wake-up than one that is kept busy,
 * so a request costs several times more CPU at 200/s than at 3,000/s, and the machine's speed
 * itself varies from day to day.
 * Usage: npm run bench:machine [-- --rates 200,1000,3000 --seconds 8]
 */
function serve(): void {
  const server = http.createServer((req, res) => {
    let body = '';
    req.setEncoding('utf8');
    req.on('data', (chunk: string) => { body += chunk; });
    req.on('end', () => {
      const { n } = JSON.parse(body) as { n: number };
      res.writeHead(201, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ ok: true, n }));
    });
  });
  server.listen(0, '127.0.0.1', () => process.send!((server.address() as AddressInfo).port));
}

export interface BareEchoCost {
  rate: string;
  serverUsPerRequest: number;
  clientUsPerRequest: number;
}

/** CPU per request of the bare echo (its own process) and its client (this one), at each rate in turn. */
export async function bareEchoCost(rates: readonly number[], seconds: number): Promise<BareEchoCost[]> {
  const child: ChildProcess = fork(__filename, ['--serve'], { stdio: 'inherit' });
  const port = await new Promise<number>((resolve) => child.once('message', (m) => resolve(Number(m))));
  const agent = new http.Agent({ keepAlive: true, maxSockets: 64 });
  const post = (n: number) => new Promise<void>((resolve, reject) => {
    const body = JSON.stringify({ n, data: { fld_email: `user${n}@example.com`, fld_topic: 'bench' } });
    const req = http.request({
      host: '127.0.0.1', port, method: 'POST', path: '/', agent,
      headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) },
    }, (res) => { res.resume(); res.on('end', resolve); });
    req.on('error', reject);
    req.end(body);
  });
  const rows: BareEchoCost[] = [];
  try {
    for (const rate of rates) {
      const total = rate * seconds;
      const [serverBefore, clientBefore] = [cpuMs(child.pid!), cpuMs('self')];
      await atFixedRate(rate, seconds, post);
      rows.push({
        rate: `${rate}/s`,
        serverUsPerRequest: Math.round(((cpuMs(child.pid!) - serverBefore) * 1000) / total),
        clientUsPerRequest: Math.round(((cpuMs('self') - clientBefore) * 1000) / total),
      });
    }
  } finally {
    agent.destroy();
    child.kill();
  }
  return rows;
}

if (process.argv.includes('--serve')) serve();
else if (require.main === module) {
  announceRuntime();
  bareEchoCost(benchArg('rates', '200,1000,3000').split(',').map(Number), benchNumber('seconds', 8))
    .then((rows) => console.table(rows), (err) => { console.error(err); process.exit(1); });
}
