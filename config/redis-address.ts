// How the configuration names Redis: the cluster's seed nodes and the queues' key prefix. Pure, so
// that config/index.ts can check them without importing the clients of redis.ts.

/**
 * Every key of a BullMQ queue must hash to one Cluster slot (its Lua scripts touch several keys),
 * so on a Cluster the prefix is a hash tag: `{bull}` for `bull`. A prefix that already holds a tag
 * is kept as it is.
 */
export function queuePrefixFor(prefix: string, cluster: boolean): string {
  return cluster && !/\{[^}]+\}/.test(prefix) ? `{${prefix}}` : prefix;
}

/** `host:port,host:port` → cluster seed nodes; throws on a malformed entry. */
export function parseClusterNodes(value: string): Array<{ host: string; port: number }> {
  return value.split(',').map((entry) => entry.trim()).filter(Boolean).map((entry) => {
    const match = /^\[?([^\]]+?)\]?:(\d{1,5})$/.exec(entry);
    const port = match ? Number(match[2]) : NaN;
    if (!match || port < 1 || port > 65535) throw new Error(`"${entry}" is not host:port`);
    return { host: match[1], port };
  });
}
