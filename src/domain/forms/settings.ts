import { seal } from '../../lib/crypto';
import { randomBase62 } from '../../lib/ids';

export const MASKED_SECRET = '***';
export const INTEGRATION_ID = /^int_[A-Za-z0-9]{1,64}$/;

export type Settings = Record<string, any>;

function integrationsOf(settings: Settings | null | undefined): any[] {
  return Array.isArray(settings?.integrations) ? settings!.integrations : [];
}

export function newIntegrationId(): string {
  return `int_${randomBase62(20)}`;
}

/** `***` was sent for an integration whose id names no stored integration with a token. */
export class UnresolvedMaskedToken extends Error {
  constructor(readonly index: number) {
    super('accessToken "***" keeps the stored token of the integration with the same id; this id has none: send the token');
  }
}

/**
 * Gives every integration a stable id and seals CRM tokens before they are stored. An integration
 * sent with the id of a stored one is that integration: a token sent back as `***` (what reads show)
 * keeps its stored token. Any other integration is new and gets a fresh id, so removing or
 * reordering integrations can never hand one integration's token to another.
 */
export function sealSettings(incoming: Settings, previous: Settings | null, key: Buffer, newId = newIntegrationId): Settings {
  if (!Array.isArray(incoming.integrations)) return incoming;
  const stored = new Map<string, any>();
  for (const integration of integrationsOf(previous)) {
    if (typeof integration?.id === 'string') stored.set(integration.id, integration);
  }
  const taken = new Set<string>();
  const integrations = incoming.integrations.map((integration: any, index: number) => {
    const same = typeof integration?.id === 'string' && !taken.has(integration.id) ? stored.get(integration.id) : undefined;
    const id: string = same ? integration.id : newId();
    taken.add(id);
    const token = integration?.accessToken;
    if (token === MASKED_SECRET) {
      if (typeof same?.accessToken !== 'string') throw new UnresolvedMaskedToken(index);
      return { ...integration, id, accessToken: same.accessToken };
    }
    // Whatever a client sends is a plain token: even text shaped like a sealed value is sealed.
    return typeof token === 'string' ? { ...integration, id, accessToken: seal(token, key) } : { ...integration, id };
  });
  return { ...incoming, integrations };
}
