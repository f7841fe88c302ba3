import type { Plan } from '../../../config/plans';
import type { Em } from '../../db/orm';
import { newId } from '../../lib/ids';
import { effectiveQuota, quotaMonth } from '../quotas/quota';
import { findMonthUsed } from '../quotas/store';
import { generateApiKey } from './api-keys';
import { ApiKey, Organization } from './entities';
import { lockFirstStart } from './store';

export class AdminError extends Error {}

export async function createOrganization(em: Em, input: { name: string; plan: Plan; monthlyQuota?: number | null }): Promise<Organization> {
  const org = Object.assign(new Organization(), {
    id: newId('org'), name: input.name, plan: input.plan, monthlyQuota: input.monthlyQuota ?? null,
  });
  await em.persistAndFlush(org);
  return org;
}

export async function updateOrganization(em: Em, id: string, patch: { plan?: Plan; monthlyQuota?: number | null }): Promise<Organization> {
  const org = await em.findOne(Organization, { id });
  if (!org) throw new AdminError(`organization ${id} not found`);
  Object.assign(org, patch, { updatedAt: new Date() });
  await em.flush();
  return org;
}

export async function createApiKey(em: Em, input: { organizationId: string; scopes: string[]; name?: string; expiresAt?: Date | null })
  : Promise<{ record: ApiKey; key: string }> {
  if (!(await em.findOne(Organization, { id: input.organizationId }))) {
    throw new AdminError(`organization ${input.organizationId} not found`);
  }
  const generated = generateApiKey();
  const record = Object.assign(new ApiKey(), {
    id: newId('key'), organizationId: input.organizationId, name: input.name ?? 'API key',
    keyHash: generated.keyHash, prefix: generated.prefix, last4: generated.last4, scopes: input.scopes,
    expiresAt: input.expiresAt ?? null,
  });
  await em.persistAndFlush(record);
  return { record, key: generated.key };
}

export async function listApiKeys(em: Em, organizationId: string): Promise<ApiKey[]> {
  return em.find(ApiKey, { organizationId }, { orderBy: { createdAt: 'asc', id: 'asc' } });
}

export async function revokeApiKey(em: Em, id: string): Promise<ApiKey> {
  const key = await em.findOne(ApiKey, { id });
  if (!key) throw new AdminError(`key ${id} not found`);
  key.revokedAt ??= new Date();
  await em.flush();
  return key;
}

export async function organizationUsage(em: Em, organizationId: string, now = new Date()) {
  const org = await em.findOne(Organization, { id: organizationId });
  if (!org) throw new AdminError(`organization ${organizationId} not found`);
  const month = quotaMonth(now);
  const used = await findMonthUsed(em, organizationId, month);
  return { month, used: used ?? 0, quota: effectiveQuota(org.plan, org.monthlyQuota) };
}

/**
 * On the first start against an empty database: the `default` organization and one `*` key.
 * An advisory lock makes concurrent first starts create exactly one.
 */
export async function bootstrapDefaultOrganization(em: Em): Promise<{ organizationId: string; key: string } | null> {
  return em.transactional(async (tx) => {
    await lockFirstStart(tx);
    if ((await tx.count(Organization, {})) > 0) return null;
    const org = Object.assign(new Organization(), { id: newId('org'), name: 'default', plan: 'enterprise' as Plan });
    // Keys reference the organization by a plain column, so its row must exist first.
    await tx.persistAndFlush(org);
    const generated = generateApiKey();
    tx.persist(Object.assign(new ApiKey(), {
      id: newId('key'), organizationId: org.id, name: 'default', keyHash: generated.keyHash,
      prefix: generated.prefix, last4: generated.last4, scopes: ['*'],
    }));
    return { organizationId: org.id, key: generated.key };
  });
}

