import { randomBytes } from 'node:crypto';
import type { Config } from '../../../config';
import type { Orm } from '../../db/orm';
import type { Logger } from '../../lib/logger';
import { findGeneratedKey, storeGeneratedKey } from './store';

export interface EncryptionKeys {
  /** Seals everything new. */
  current: Buffer;
  /** Opens sealed values: the current key first, then the previous ones. */
  all: Buffer[];
}

/**
 * The current key is ENCRYPTION_KEY, or else one generated into the database at first start. A key
 * generated earlier keeps opening what it sealed after ENCRYPTION_KEY is set, as do the keys in
 * ENCRYPTION_KEYS_PREVIOUS, until `cli secrets reencrypt` has re-sealed everything.
 */
export async function resolveEncryptionKeys(orm: Orm, config: Readonly<Config>, logger: Logger): Promise<EncryptionKeys> {
  if (!config.encryptionKey) {
    await storeGeneratedKey(orm, randomBytes(32).toString('base64'));
    logger.warn('ENCRYPTION_KEY is not set: using a key generated into the database; set ENCRYPTION_KEY in production');
  }
  const stored = await findGeneratedKey(orm);
  const generated = stored ? Buffer.from(stored, 'base64') : null;
  const current = config.encryptionKey ?? generated!;
  const all = [current, ...config.previousEncryptionKeys, ...(generated ? [generated] : [])]
    .filter((key, i, keys) => keys.findIndex((other) => other.equals(key)) === i);
  return { current, all };
}
