import { isSealedValue } from '../submissions/sealed-values';

export const HUBSPOT_UPSERT_PATH = '/crm/v3/objects/contacts/batch/upsert';

export interface HubspotIntegration {
  /** Stable id (int_…): what a crm_syncs row refers to. */
  id: string;
  type: 'hubspot';
  /** Sealed at rest. */
  accessToken: string;
  /** Field id → HubSpot contact property. */
  fieldMap: Record<string, string>;
  enabled?: boolean;
}

/** Enabled HubSpot integrations of a form's settings, with their position and stable id. */
export function activeIntegrations(settings: Record<string, any> | null): Array<{ index: number; integration: HubspotIntegration }> {
  const list: unknown[] = Array.isArray(settings?.integrations) ? settings!.integrations : [];
  return list.flatMap((integration: any, index) =>
    integration?.type === 'hubspot' && integration.enabled !== false && typeof integration.accessToken === 'string'
      && typeof integration.id === 'string' && integration.fieldMap && typeof integration.fieldMap === 'object'
      ? [{ index, integration: integration as HubspotIntegration }]
      : []);
}

/**
 * A submitted value as a HubSpot property string; null when there is nothing to send. Sensitive
 * (sealed) values never leave the service; multiple choices use HubSpot's `;` separator.
 */
export function propertyValue(value: unknown): string | null {
  if (value === null || value === undefined || value === '' || isSealedValue(value)) return null;
  if (typeof value === 'string') return value;
  if (typeof value === 'number' || typeof value === 'boolean') return String(value);
  if (Array.isArray(value)) {
    const parts = value.map(propertyValue).filter((v): v is string => v !== null);
    return parts.length ? parts.join(';') : null;
  }
  const v = value as Record<string, unknown>;
  if (v.format === 'full' && typeof v.fullName === 'string') return v.fullName || null;
  if (v.format === 'split') return [v.firstName, v.lastName].filter((p) => typeof p === 'string' && p).join(' ') || null;
  if (typeof v.name === 'string' && typeof v.dataUrl === 'string') return v.name;
  return null;
}

export interface ContactUpsert {
  email: string;
  properties: Record<string, string>;
}

/** The contact to upsert; null when neither a mapped `email` nor the submitter's email is known. */
export function buildContactUpsert(
  fieldMap: Record<string, string>, data: Record<string, unknown>, submitterEmail: string | null,
): ContactUpsert | null {
  const properties: Record<string, string> = {};
  for (const [fieldId, property] of Object.entries(fieldMap)) {
    const value = propertyValue(data[fieldId]);
    if (value !== null) properties[property] = value;
  }
  const email = properties.email ?? submitterEmail;
  if (!email) return null;
  return { email, properties: { ...properties, email } };
}

export function upsertRequestBody(contact: ContactUpsert): string {
  return JSON.stringify({ inputs: [{ idProperty: 'email', id: contact.email, properties: contact.properties }] });
}
