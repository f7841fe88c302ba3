import net from 'node:net';

export interface PgProxy {
  port: number;
  /** Destroys every open connection; new ones are still accepted. */
  cutAll(): void;
  /**
   * While on, nothing is passed either way (a black-holed network: no error, no answer); when
   * turned off, what was held back is passed on, unless its connection was cut meanwhile.
   */
  hold(on: boolean): void;
  /** Cuts everything and stops listening (connections are refused). */
  close(): Promise<void>;
}

/** A TCP proxy to the local PostgreSQL that a test controls, to play database outages. */
export async function startPgProxy(port = 0): Promise<PgProxy> {
  const pairs = new Set<{ client: net.Socket; upstream: net.Socket }>();
  let holding = false;
  let held: Array<() => void> = [];
  const forward = (from: net.Socket, to: net.Socket) => {
    from.on('data', (chunk) => {
      if (holding) held.push(() => { if (!to.destroyed) to.write(chunk); });
      else to.write(chunk);
    });
  };
  const server = net.createServer((client) => {
    const upstream = net.connect(5432, '127.0.0.1');
    const pair = { client, upstream };
    pairs.add(pair);
    for (const s of [client, upstream]) {
      s.on('error', () => undefined);
      s.on('close', () => {
        pairs.delete(pair);
        client.destroy();
        upstream.destroy();
      });
    }
    forward(client, upstream);
    forward(upstream, client);
  });
  await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', () => resolve()));
  const proxy: PgProxy = {
    port: (server.address() as net.AddressInfo).port,
    cutAll() {
      held = [];
      for (const { client, upstream } of pairs) {
        client.destroy();
        upstream.destroy();
      }
    },
    hold(on) {
      holding = on;
      if (!on) for (const flush of held.splice(0)) flush();
    },
    async close() {
      holding = false;
      proxy.cutAll();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
  return proxy;
}
