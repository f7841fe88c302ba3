import IORedis, { Cluster, type ClusterNode, type Redis, type RedisOptions } from 'ioredis';
import type { Config } from './index';

/** Where Redis is: one node (`REDIS_URL`), or the seed nodes of a Redis Cluster (`REDIS_CLUSTER_NODES`). */
export type RedisTarget = Pick<Config, 'redisUrl' | 'redisClusterNodes'>;

const reconnectDelay = (times: number) => Math.min(200 * times, 2000);

/**
 * A client of the configured Redis. On a Cluster every node connection takes `options`; the
 * cluster-wide ones (offline queue, reconnects) are set on the Cluster itself. Both kinds answer
 * the same commands, so the rest of the service sees one type.
 */
export function redisClient(target: RedisTarget, options: RedisOptions = {}): Redis {
  if (!target.redisClusterNodes.length) return new IORedis(target.redisUrl, { retryStrategy: reconnectDelay, ...options });
  const { enableOfflineQueue, lazyConnect, maxRetriesPerRequest, ...nodeOptions } = options;
  const cluster = new Cluster(target.redisClusterNodes as ClusterNode[], {
    redisOptions: { ...nodeOptions, maxRetriesPerRequest },
    enableOfflineQueue: enableOfflineQueue ?? true,
    lazyConnect: lazyConnect ?? false,
    clusterRetryStrategy: reconnectDelay,
    // A slot moving between masters is answered by the node that owns it now.
    enableReadyCheck: true,
  });
  return cluster as unknown as Redis;
}

/** Request paths must never wait on Redis: no offline queue, one retry, short timeouts. */
export function failFastRedis(target: RedisTarget, extra: RedisOptions = {}): Redis {
  return redisClient(target, {
    enableOfflineQueue: false,
    maxRetriesPerRequest: 1,
    commandTimeout: 1500,
    connectTimeout: 2000,
    ...extra,
  });
}

/** BullMQ workers must wait for Redis rather than fail. */
export function blockingRedis(target: RedisTarget): Redis {
  return redisClient(target, { maxRetriesPerRequest: null });
}
