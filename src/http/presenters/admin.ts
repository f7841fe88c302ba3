import type { ApiKey, Organization } from '../../domain/auth/entities';
import { effectiveQuota } from '../../domain/quotas/quota';

export function presentOrganization(org: Organization) {
  return { id: org.id, name: org.name, plan: org.plan, monthlyQuota: effectiveQuota(org.plan, org.monthlyQuota) };
}

export function presentKey(key: ApiKey) {
  return {
    id: key.id, name: key.name, prefix: key.prefix, last4: key.last4, scopes: key.scopes,
    createdAt: key.createdAt.toISOString(), expiresAt: key.expiresAt?.toISOString() ?? null,
    lastUsedAt: key.lastUsedAt?.toISOString() ?? null, revokedAt: key.revokedAt?.toISOString() ?? null,
  };
}
