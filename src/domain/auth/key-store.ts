import type { Plan } from '../../../config/plans';
import type { Orm } from '../../db/orm';
import { TtlCache } from '../../lib/ttl-cache';
import { hashApiKey, looksLikeApiKey } from './api-keys';
import { findActiveKeyByHash, recordKeyUse } from './store';

export interface AuthenticatedKey {
  id: string;
  organizationId: string;
  scopes: string[];
  expiresAt: Date | null;
  plan: Plan;
}

const LAST_USED_WRITE_INTERVAL_MS = 60_000;

/**
 * Resolves API keys to their records without a database round trip once warm. Revocations and plan
 * changes made by any process are announced on Redis and drop the cached entry at once; the TTL
 * bounds staleness when Redis is unreachable.
 */
export class KeyStore {
  private readonly byHash = new TtlCache<string, AuthenticatedKey>(30_000);
  /** Unknown keys, kept apart and small so guessed keys can never evict live records. */
  private readonly unknownHashes = new TtlCache<string, true>(5_000, 1_000);
  private readonly lastUsedWrites = new TtlCache<string, true>(LAST_USED_WRITE_INTERVAL_MS);

  constructor(private readonly orm: Orm) {}

  async authenticate(rawKey: string | null, now = new Date()): Promise<AuthenticatedKey | null> {
    if (!rawKey || !looksLikeApiKey(rawKey)) return null;
    const hash = hashApiKey(rawKey);
    if (this.unknownHashes.get(hash)) return null;
    let record: AuthenticatedKey | null | undefined = this.byHash.get(hash);
    if (record === undefined) {
      record = await this.load(hash);
      if (record) this.byHash.set(hash, record);
      else this.unknownHashes.set(hash, true);
    }
    if (!record || (record.expiresAt && record.expiresAt <= now)) return null;
    this.touch(record.id, now);
    return record;
  }

  /** Handles an invalidation announced by any process (`key:<id>`, `org:<id>`, `all`); other kinds, forms included, are not ours. */
  handleInvalidation(message: string): void {
    const [kind, id] = message.split(':');
    if (kind === 'key') this.byHash.deleteWhere((k) => k.id === id);
    else if (kind === 'org') this.byHash.deleteWhere((k) => k.organizationId === id);
    else if (message === 'all') {
      this.byHash.clear();
      this.unknownHashes.clear();
    }
  }

  private async load(hash: string): Promise<AuthenticatedKey | null> {
    const row = await findActiveKeyByHash(this.orm.em, hash);
    if (!row) return null;
    return {
      id: row.id,
      organizationId: row.organization_id,
      scopes: row.scopes,
      expiresAt: row.expires_at ? new Date(row.expires_at) : null,
      plan: row.plan,
    };
  }

  /** Records last use at most once a minute per key, off the request path. */
  private touch(keyId: string, now: Date): void {
    if (this.lastUsedWrites.get(keyId)) return;
    this.lastUsedWrites.set(keyId, true);
    recordKeyUse(this.orm.em, keyId, now).catch(() => this.lastUsedWrites.delete(keyId));
  }
}
