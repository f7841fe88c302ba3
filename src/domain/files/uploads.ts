// Uploads: announcing one (the upload target), receiving its bytes (local driver), checking the
// uploads a submission names, downloading, and deleting files.
import type { Readable } from 'node:stream';
import type { Config } from '../../../config';
import type { Orm } from '../../db/orm';
import { newId } from '../../lib/ids';
import type { Logger } from '../../lib/logger';
import { isPlainObject } from '../../lib/objects';
import type { CachedForm, FormCache } from '../forms/form-cache';
import type { Field } from '../forms/types';
import type { FieldError } from '../submissions/validate';
import { ReceiveRefused, type FileStore, type UploadTarget } from './file-store';
import type { FileLinks, StoredFile } from './links';
import { contentProblem, declaredFileProblem, fileLimits, type DeclaredFile, type FileLimits } from './rules';
import {
  expireUnclaimedUploads, findUpload, findUploads, forgetUpload, insertUpload, markPending, markUploaded, uploadsToDelete,
  type UploadRow,
} from './store';

/** The file store and the links of a process. */
export interface Files {
  store: FileStore;
  links: FileLinks;
}

export interface FileDeps {
  orm: Orm;
  config: Readonly<Config>;
  formCache: FormCache;
  files: Files;
  logger: Logger;
}

/** How long an upload URL stays valid: a client that takes longer asks for a new upload. */
export const UPLOAD_URL_TTL_SECONDS = 15 * 60;

export type CreateUploadResult =
  | { ok: true; upload: { uploadId: string } & UploadTarget }
  /** The field is not a file-upload field of the form. */
  | { ok: false; kind: 'not_found' }
  /** The body, or the file it declares, is refused; `errors` name the field (or the body property). */
  | { ok: false; kind: 'invalid'; errors: FieldError[] };

const BODY_KEYS = new Set(['fieldId', 'name', 'type', 'size']);

function fileField(form: CachedForm, fieldId: unknown): Field | null {
  return form.structure.fields.find((f) => f.id === fieldId && f.type === 'file-upload') ?? null;
}

/** Checks a declared file against its field, records the upload and answers where to send the bytes. */
export async function createUpload(deps: FileDeps, form: CachedForm, body: unknown): Promise<CreateUploadResult> {
  if (!isPlainObject(body)) return { ok: false, kind: 'invalid', errors: [{ field: 'body', message: 'Request body must be a JSON object' }] };
  const unknown = Object.keys(body).filter((key) => !BODY_KEYS.has(key));
  if (unknown.length) return { ok: false, kind: 'invalid', errors: unknown.map((field) => ({ field, message: 'Unknown property' })) };
  if (typeof body.fieldId !== 'string') return { ok: false, kind: 'invalid', errors: [{ field: 'fieldId', message: 'fieldId is required' }] };
  const field = fileField(form, body.fieldId);
  if (!field) return { ok: false, kind: 'not_found' };
  const declared = { name: body.name, type: body.type, size: body.size } as DeclaredFile;
  const problem = declaredFileProblem(fileLimits(field, deps.config.uploadMaxBytes), declared);
  if (problem) return { ok: false, kind: 'invalid', errors: [{ field: field.id, message: problem }] };

  const id = newId('upl');
  await insertUpload(deps.orm.em.fork(), {
    id, organizationId: form.organizationId, formId: form.id, fieldId: field.id, name: declared.name, type: declared.type, size: declared.size,
  });
  const target = await deps.files.store.uploadTarget(id, declared, UPLOAD_URL_TTL_SECONDS,
    () => deps.files.links.url('upload', id, UPLOAD_URL_TTL_SECONDS).url);
  return { ok: true, upload: { uploadId: id, ...target } };
}

/** The limits of the field an upload was made for, or null when the form no longer has it. */
async function limitsOf(deps: FileDeps, upload: UploadRow): Promise<FileLimits | null> {
  const form = await deps.formCache.get(upload.formId);
  const field = form && form.organizationId === upload.organizationId ? fileField(form, upload.fieldId) : null;
  return field ? fileLimits(field, deps.config.uploadMaxBytes) : null;
}

export type ReceiveResult =
  | { ok: true }
  | { ok: false; status: 400 | 403 | 404 | 409 | 413 | 422; code: string; message: string };

/**
 * The bytes of an upload sent to the service's own upload URL (local driver): its signature and
 * expiry checked, streamed to disk without being held in memory, refused when they are more or
 * fewer than declared or their first bytes do not agree with the declared type, and kept only if
 * no other request completed the same upload first.
 */
export async function receiveUpload(
  deps: FileDeps, uploadId: string, query: { expires?: unknown; signature?: unknown }, declaredLength: number | null, source: Readable,
): Promise<ReceiveResult> {
  const link = deps.files.links.verify('upload', uploadId, query.expires, query.signature);
  if (link !== 'ok') return { ok: false, status: 403, code: 'forbidden', message: link === 'expired' ? 'This upload URL has expired' : 'Invalid upload URL' };
  const { store } = deps.files;
  if (!store.receive) return { ok: false, status: 404, code: 'not_found', message: 'Uploads go to the file store directly' };
  const em = deps.orm.em.fork();
  const upload = await findUpload(em, uploadId);
  if (!upload || upload.status === 'deleting') return { ok: false, status: 404, code: 'not_found', message: 'Upload not found' };
  if (upload.status !== 'pending') return { ok: false, status: 409, code: 'upload_completed', message: 'This upload has been completed already' };
  if (declaredLength !== null && declaredLength > upload.size) {
    return { ok: false, status: 413, code: 'payload_too_large', message: `The upload was declared as ${upload.size} bytes` };
  }
  if (declaredLength !== null && declaredLength < upload.size) {
    return { ok: false, status: 400, code: 'validation_error', message: `The upload was declared as ${upload.size} bytes` };
  }
  const limits = await limitsOf(deps, upload);
  if (!limits) return { ok: false, status: 404, code: 'not_found', message: 'The field of this upload no longer exists' };

  let received;
  try {
    received = await store.receive(uploadId, source, upload.size, (head) => {
      const problem = contentProblem(limits, upload, head);
      if (problem) throw new ReceiveRefused('content', problem);
    });
  } catch (err) {
    if (!(err instanceof ReceiveRefused)) throw err;
    if (err.reason === 'too_large') return { ok: false, status: 413, code: 'payload_too_large', message: `The upload was declared as ${upload.size} bytes` };
    if (err.reason === 'too_small') return { ok: false, status: 400, code: 'validation_error', message: err.message };
    return { ok: false, status: 422, code: 'validation_error', message: err.message };
  }
  if (!(await markUploaded(em, uploadId, null))) {
    await received.discard();
    return { ok: false, status: 409, code: 'upload_completed', message: 'This upload has been completed already' };
  }
  try {
    await received.commit();
  } catch (err) {
    await markPending(em, uploadId).catch(() => undefined);
    await received.discard().catch(() => undefined);
    throw err;
  }
  return { ok: true };
}

/** The uploads a submission's values name: which field, which upload. */
export interface UploadRef {
  fieldId: string;
  uploadId: string;
}

/** `{uploadId}` or a list of them, as validate.ts accepts them for a file-upload field. */
function refsOfValue(value: unknown): string[] | null {
  if (isPlainObject(value) && typeof value.uploadId === 'string' && !('dataUrl' in value)) return [value.uploadId];
  if (Array.isArray(value) && value.length > 0 && value.every((v) => isPlainObject(v) && typeof v.uploadId === 'string')) {
    return value.map((v) => (v as { uploadId: string }).uploadId);
  }
  return null;
}

/** The uploads named by a submission's (validated) values, in field order. */
export function uploadRefs(fields: readonly Field[], values: Record<string, unknown>): UploadRef[] {
  const refs: UploadRef[] = [];
  for (const field of fields) {
    if (field.type !== 'file-upload' || !Object.prototype.hasOwnProperty.call(values, field.id)) continue;
    for (const uploadId of refsOfValue(values[field.id]) ?? []) refs.push({ fieldId: field.id, uploadId });
  }
  return refs;
}

/**
 * S3 uploads are checked on first use: their size (HEAD) and their first bytes (a ranged GET), the
 * result recorded with the object's ETag, so a download serves only the bytes that were checked.
 */
async function checkStoredBytes(deps: FileDeps, upload: UploadRow, limits: FileLimits): Promise<string | null> {
  const { store } = deps.files;
  const found = await store.stat(upload.id);
  if (!found) return 'The file has not been uploaded yet';
  if (found.size !== upload.size) return `The uploaded file is ${found.size} bytes, not the ${upload.size} declared`;
  const problem = contentProblem(limits, upload, await store.firstBytes(upload.id));
  if (problem) return problem;
  await markUploaded(deps.orm.em.fork(), upload.id, found.etag);
  return null;
}

/**
 * Checks every upload a submission names: it belongs to the form's organization, form and field,
 * is not held by another submission, not expired, and its bytes arrived with the declared size and
 * an accepted type. Answers the field errors, or the stored value of each field (`{uploadId, name,
 * type, size}`, a list when the field took a list), so reads need no lookup. `rows` are the uploads
 * looked up already (a batch looks up all of its items' at once).
 */
export async function checkUploads(
  deps: FileDeps, form: CachedForm, values: Record<string, unknown>, refs: UploadRef[], rows?: Map<string, UploadRow>,
): Promise<{ ok: true; values: Record<string, unknown> } | { ok: false; errors: FieldError[] }> {
  const found = rows ?? await findUploads(deps.orm.em.fork(), form.organizationId, refs.map((r) => r.uploadId));
  const errors = new Map<string, string>();
  const stored = new Map<string, StoredFile>();
  const seen = new Set<string>();
  for (const { fieldId, uploadId } of refs) {
    const upload = found.get(uploadId);
    const problem = await (async () => {
      if (seen.has(uploadId)) return 'The same upload is named twice';
      seen.add(uploadId);
      if (!upload || upload.organizationId !== form.organizationId || upload.formId !== form.id || upload.fieldId !== fieldId
          || upload.status === 'deleting') {
        return 'Upload not found for this field';
      }
      if (upload.claimed) return 'This upload is already used by another submission';
      if (upload.expired) return 'This upload has expired; upload the file again';
      if (upload.status === 'pending') {
        const field = fileField(form, fieldId)!;
        return deps.files.store.receive ? 'The file has not been uploaded yet' : checkStoredBytes(deps, upload, fileLimits(field, deps.config.uploadMaxBytes));
      }
      return null;
    })();
    if (problem) {
      if (!errors.has(fieldId)) errors.set(fieldId, problem);
    } else {
      stored.set(uploadId, { uploadId, name: upload!.name, type: upload!.type, size: upload!.size });
    }
  }
  if (errors.size) return { ok: false, errors: [...errors].map(([field, message]) => ({ field, message })) };
  const out = { ...values };
  for (const fieldId of new Set(refs.map((r) => r.fieldId))) {
    const value = values[fieldId];
    out[fieldId] = Array.isArray(value)
      ? value.map((v) => stored.get((v as { uploadId: string }).uploadId)!)
      : stored.get((value as { uploadId: string }).uploadId)!;
  }
  return { ok: true, values: out };
}

export type DownloadResult =
  | { ok: true; name: string; type: string; size: number; stream: Readable }
  | { ok: false; status: 403 | 404; message: string };

/** The bytes behind a signed download link: only of a claimed upload, and only the bytes that were checked. */
export async function openDownload(deps: FileDeps, uploadId: string, query: { expires?: unknown; signature?: unknown }): Promise<DownloadResult> {
  const link = deps.files.links.verify('download', uploadId, query.expires, query.signature);
  if (link !== 'ok') return { ok: false, status: 403, message: link === 'expired' ? 'This link has expired' : 'Invalid link' };
  const upload = await findUpload(deps.orm.em.fork(), uploadId);
  if (!upload || upload.status === 'deleting' || upload.status === 'pending') return { ok: false, status: 404, message: 'File not found' };
  const opened = await deps.files.store.open(upload.id, upload.etag);
  if (!opened) return { ok: false, status: 404, message: 'File not found' };
  return { ok: true, name: upload.name, type: upload.type, size: opened.size, stream: opened.stream };
}

/**
 * Deletes the bytes of uploads marked `deleting` (a deleted submission's, `submissionId`, or any),
 * then their rows. A store that fails leaves the rows for the next run: a storage outage delays a
 * deletion, never loses it. Answers how many were deleted; throws the first failure after trying all.
 */
export async function deleteMarkedFiles(deps: FileDeps, opts: { submissionId?: string; limit?: number } = {}): Promise<number> {
  const em = deps.orm.em.fork();
  const ids = await uploadsToDelete(em, opts.limit ?? 1000, opts.submissionId);
  let deleted = 0;
  let failure: unknown = null;
  for (const id of ids) {
    try {
      await deps.files.store.remove(id);
      await forgetUpload(em, id);
      deleted++;
    } catch (err) {
      failure ??= err;
    }
  }
  if (failure) throw failure;
  return deleted;
}

/** The hourly sweep: uploads unclaimed after 24 hours are deleted, and deletions still owed are retried. */
export async function sweepUploads(deps: FileDeps): Promise<{ uploadsExpired: number; filesDeleted: number }> {
  const uploadsExpired = await expireUnclaimedUploads(deps.orm.em.fork(), 5_000);
  let filesDeleted = 0;
  try {
    filesDeleted = await deleteMarkedFiles(deps, { limit: 5_000 });
  } catch (err) {
    deps.logger.warn({ err: (err as Error).message }, 'file deletions left for the next run: the file store failed');
  }
  return { uploadsExpired, filesDeleted };
}

