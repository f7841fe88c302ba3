// Answers that survive a closed tab (README "The hosted page and the embed"): the answers typed so far and the page
// reached are kept in the browser's localStorage, one entry per form, for DRAFT_DAYS. Pure rules
// (what may be kept, what a stored entry is worth) here; the page calls them (form.ts, KeptAnswers).
import { UPLOAD_UNCLAIMED_HOURS } from '../../domain/files/rules';
import type { Field } from '../../domain/forms/types';

export const DRAFT_DAYS = 7;
export const DRAFT_TTL_MS = DRAFT_DAYS * 24 * 60 * 60 * 1000;
const DRAFT_VERSION = 1;
/** A clock a little ahead of the one that saved is tolerated; an entry from further in the future is not believed. */
const CLOCK_SKEW_MS = 5 * 60 * 1000;
/** A kept upload is forgotten an hour before the service deletes it unclaimed: a submission could not take it. */
export const UPLOAD_KEPT_MS = (UPLOAD_UNCLAIMED_HOURS - 1) * 60 * 60 * 1000;

/** An upload kept as its claim: the id the submission names and what the page shows of it, never its bytes. */
export interface UploadClaim {
  uploadId: string;
  name: string;
  size: number;
  /** When the upload finished (ms since the epoch). */
  uploadedAt: number;
}

export interface Draft {
  /** The page index reached. */
  page: number;
  /** Kept answers per field id (a file-upload field's: its claims). */
  values: Record<string, unknown>;
  savedAt: number;
}

export function draftKey(formId: string): string {
  return `formservice:draft:${formId}`;
}

/**
 * Whether a field's answer may be kept in the browser: never a sensitive field's, a payment's (a
 * reference to money) or a signature's (an act of signing belongs to one sitting); hidden fields
 * and headings hold nothing typed.
 */
export function keepable(field: Field): boolean {
  if (field.hidden || field.config?.sensitive === true) return false;
  return field.type !== 'payment' && field.type !== 'signature' && field.type !== 'heading';
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return !!value && typeof value === 'object' && !Array.isArray(value);
}

/** The claims of a file-upload value, or null when it is not a list of well-formed claims. */
export function uploadClaims(value: unknown): UploadClaim[] | null {
  if (!Array.isArray(value)) return null;
  const claims: UploadClaim[] = [];
  for (const item of value) {
    if (!isRecord(item) || typeof item.uploadId !== 'string' || !item.uploadId || typeof item.name !== 'string') return null;
    if (typeof item.uploadedAt !== 'number' || !Number.isFinite(item.uploadedAt)) return null;
    const size = typeof item.size === 'number' && Number.isFinite(item.size) && item.size >= 0 ? item.size : 0;
    claims.push({ uploadId: item.uploadId, name: item.name, size, uploadedAt: item.uploadedAt });
  }
  return claims;
}

/** The claims still young enough for a submission to take at `now`. */
export function liveClaims(claims: UploadClaim[], now: number): UploadClaim[] {
  return claims.filter((claim) => now - claim.uploadedAt <= UPLOAD_KEPT_MS);
}

/**
 * What is kept of `values` at `now`: the keepable fields' answers only (undefined answers dropped), a
 * file-upload field's as its claims still young enough to be submitted.
 */
export function keptValues(fields: Field[], values: Record<string, unknown>, now: number): Record<string, unknown> {
  const kept: Record<string, unknown> = {};
  for (const field of fields) {
    const value = values[field.id];
    if (value === undefined || !keepable(field)) continue;
    if (field.type === 'file-upload') {
      const claims = liveClaims(uploadClaims(value) ?? [], now);
      if (claims.length) kept[field.id] = claims;
      continue;
    }
    kept[field.id] = value;
  }
  return kept;
}

/** The stored text of a draft of `formId`, or null when nothing is worth keeping. */
export function draftText(formId: string, fields: Field[], values: Record<string, unknown>, page: number, now: number): string | null {
  const kept = keptValues(fields, values, now);
  if (!Object.keys(kept).length && page === 0) return null;
  return JSON.stringify({ v: DRAFT_VERSION, formId, savedAt: now, page, values: kept });
}

/**
 * The draft a stored text holds for `formId` at `now`, or null: unreadable, of another form or
 * version, older than DRAFT_TTL_MS or from the future. Only answers of keepable fields the form still
 * has are taken, whatever the text says (it may have been written by an older page or by hand).
 */
export function readDraft(text: string | null, formId: string, fields: Field[], pageCount: number, now: number): Draft | null {
  if (!text) return null;
  let stored: unknown;
  try {
    stored = JSON.parse(text);
  } catch {
    return null;
  }
  if (!isRecord(stored) || stored.v !== DRAFT_VERSION || stored.formId !== formId) return null;
  const { savedAt, page, values } = stored;
  if (typeof savedAt !== 'number' || !Number.isFinite(savedAt)) return null;
  if (now - savedAt > DRAFT_TTL_MS || savedAt - now > CLOCK_SKEW_MS) return null;
  if (!isRecord(values)) return null;
  const kept = keptValues(fields, values, now);
  const reached = typeof page === 'number' && Number.isInteger(page) && page >= 0 && page < pageCount ? page : 0;
  return { page: reached, values: kept, savedAt };
}

/** The browser's localStorage, or null where it is refused (blocked storage, some private modes, sandboxed frames). */
function storage(): Storage | null {
  try {
    return window.localStorage;
  } catch {
    return null;
  }
}

/** The kept draft of `formId`, if any; a stored entry that is not a valid draft is removed. */
export function loadDraft(formId: string, fields: Field[], pageCount: number): Draft | null {
  const store = storage();
  if (!store) return null;
  try {
    const text = store.getItem(draftKey(formId));
    const draft = readDraft(text, formId, fields, pageCount, Date.now());
    if (text !== null && !draft) store.removeItem(draftKey(formId));
    return draft;
  } catch {
    return null;
  }
}

/** Keeps the answers so far; a full or refused storage only means nothing is kept. */
export function saveDraft(formId: string, fields: Field[], values: Record<string, unknown>, page: number): void {
  const store = storage();
  if (!store) return;
  try {
    const text = draftText(formId, fields, values, page, Date.now());
    if (text === null) store.removeItem(draftKey(formId));
    else store.setItem(draftKey(formId), text);
  } catch {
    // Quota exceeded or storage refused.
  }
}

export function clearDraft(formId: string): void {
  try {
    storage()?.removeItem(draftKey(formId));
  } catch {
    // Storage refused: there is nothing kept either.
  }
}
