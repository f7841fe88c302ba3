import { isSealed, seal } from '../../lib/crypto';

export const MASKED_SECRET = '***';

type Settings = Record<string, any>;

function integrationsOf(settings: Settings | null | undefined): any[] {
  return Array.isArray(settings?.integrations) ? settings!.integrations : [];
}

/**
 * Seals CRM tokens before they are stored. A token sent back as `***` (what reads show) keeps the
 * stored token of the integration at the same position, so clients can round-trip settings.
 */
export function sealSettings(incoming: Settings, previous: Settings | null, key: Buffer): Settings {
  const before = integrationsOf(previous);
  const integrations = integrationsOf(incoming).map((integration, index) => {
    const token = integration?.accessToken;
    if (token === MASKED_SECRET && isSealed(before[index]?.accessToken)) {
      return { ...integration, accessToken: before[index].accessToken };
    }
    if (typeof token === 'string' && !isSealed(token)) return { ...integration, accessToken: seal(token, key) };
    return integration;
  });
  return Array.isArray(incoming.integrations) ? { ...incoming, integrations } : incoming;
}

/** What API reads show: tokens are write-only. */
export function presentSettings(settings: Settings): Settings {
  if (!Array.isArray(settings.integrations)) return settings;
  return {
    ...settings,
    integrations: settings.integrations.map((integration: any) =>
      integration && 'accessToken' in integration ? { ...integration, accessToken: MASKED_SECRET } : integration),
  };
}
