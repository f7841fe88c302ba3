import type { EncryptionKeys } from './keys';
import type { Em } from '../../db/orm';
import { isSealed, seal, unseal } from '../../lib/crypto';
import { isSealedValue, SEALED_VALUE_KEY } from '../submissions/sealed-values';
import { findSealedBatch, SEALED_COLUMNS, writeResealed, type SealedColumn, type SealedTable } from './store';

export interface UnopenableValue {
  table: SealedTable;
  id: string;
}

export interface ReencryptCounts {
  webhooks: number;
  forms: number;
  submissions: number;
  /** Rows holding a sealed value no configured key opens: left exactly as they are. */
  unopenable: UnopenableValue[];
}

const BATCH = 500;
const MAX_REPORTED = 1_000;

type Outcome = { kind: 'current' } | { kind: 'resealed'; value: string } | { kind: 'unopenable' };

function reseal(value: string, keys: EncryptionKeys): Outcome {
  try {
    unseal(value, keys.current);
    return { kind: 'current' };
  } catch {
    try {
      return { kind: 'resealed', value: seal(unseal(value, keys.all), keys.current) };
    } catch {
      return { kind: 'unopenable' };
    }
  }
}

interface DeepOutcome { value: unknown; changed: boolean; unopenable: boolean }

/**
 * Re-seals the sealed values inside a JSON value: CRM tokens in form settings (sealed strings) and
 * sensitive answers in submissions (`{"$sealed": …}` only: a plain string is whatever a submitter typed).
 */
function resealDeep(value: unknown, keys: EncryptionKeys, sealedStrings: boolean): DeepOutcome {
  if (isSealedValue(value)) {
    const inner = resealDeep(value.$sealed, keys, true);
    return { ...inner, value: inner.changed ? { [SEALED_VALUE_KEY]: inner.value } : value };
  }
  if (sealedStrings && isSealed(value)) {
    const outcome = reseal(value, keys);
    return outcome.kind === 'resealed'
      ? { value: outcome.value, changed: true, unopenable: false }
      : { value, changed: false, unopenable: outcome.kind === 'unopenable' };
  }
  if (value === null || typeof value !== 'object') return { value, changed: false, unopenable: false };
  const copy: any = Array.isArray(value) ? [...value] : { ...value };
  let changed = false;
  let unopenable = false;
  for (const key of Object.keys(copy)) {
    const inner = resealDeep(copy[key], keys, sealedStrings);
    if (inner.changed) copy[key] = inner.value;
    changed ||= inner.changed;
    unopenable ||= inner.unopenable;
  }
  return { value: changed ? copy : value, changed, unopenable };
}

/**
 * Walks a table by id in batches, re-sealing one column; each batch commits on its own. A row with
 * a value no key opens is reported and skipped, never allowed to stop the others.
 */
async function resealColumn(em: Em, sealed: SealedColumn, keys: EncryptionKeys, unopenable: UnopenableValue[]): Promise<number> {
  const { table } = sealed;
  let after = '';
  let changed = 0;
  for (;;) {
    const rows = await findSealedBatch(em, sealed, after, BATCH);
    if (!rows.length) return changed;
    await em.transactional(async (tx) => {
      for (const row of rows) {
        const outcome = resealDeep(row.value, keys, table !== 'submissions');
        if (outcome.unopenable && unopenable.length < MAX_REPORTED) unopenable.push({ table, id: row.id });
        if (outcome.unopenable || !outcome.changed) continue;
        const stored = typeof outcome.value === 'string' ? outcome.value : JSON.stringify(outcome.value);
        await writeResealed(tx, sealed, row.id, stored);
        changed++;
      }
    });
    after = rows[rows.length - 1].id;
  }
}

/**
 * The last step of a key rotation: every webhook secret, CRM token and sensitive submission value
 * sealed with a previous key is sealed again with the current one. Safe to run more than once and
 * while the service runs (a value is readable with either key throughout).
 */
export async function reencryptSecrets(em: Em, keys: EncryptionKeys): Promise<ReencryptCounts> {
  const unopenable: UnopenableValue[] = [];
  return {
    webhooks: await resealColumn(em, SEALED_COLUMNS.webhookSecrets, keys, unopenable)
      + await resealColumn(em, SEALED_COLUMNS.previousWebhookSecrets, keys, unopenable),
    forms: await resealColumn(em, SEALED_COLUMNS.crmTokens, keys, unopenable),
    submissions: await resealColumn(em, SEALED_COLUMNS.sensitiveValues, keys, unopenable),
    unopenable,
  };
}
