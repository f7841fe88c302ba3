// Sensitive answers at rest: a sealed value is stored as `{"$sealed": "enc:v1:…"}`, a shape no
// field's validation accepts, so a submitter can never send something that reads as sealed (a
// text answer "enc:v1:…" is just text) nor plant a value that re-encryption cannot open.
import { isSealed, seal } from '../../lib/crypto';

export const SEALED_VALUE_KEY = '$sealed';

export interface SealedValue {
  $sealed: string;
}

export function sealValue(value: unknown, key: Buffer): SealedValue {
  return { [SEALED_VALUE_KEY]: seal(JSON.stringify(value), key) } as SealedValue;
}

export function isSealedValue(value: unknown): value is SealedValue {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return false;
  const keys = Object.keys(value);
  return keys.length === 1 && keys[0] === SEALED_VALUE_KEY && isSealed((value as SealedValue).$sealed);
}
