// Every SQL statement of the files area. The claim of an upload by a submission is not here: it is
// the `upload` entry of CLAIM_KINDS, made by the storing statement (submissions/store.ts).
import type { Em } from '../../db/orm';
import { UPLOAD_UNCLAIMED_HOURS } from './rules';

export { UPLOAD_UNCLAIMED_HOURS };
/** What an expired upload's claim row holds instead of a submission id (no submission id is empty). */
export const EXPIRED_CLAIM = '';

export type UploadStatus = 'pending' | 'uploaded' | 'claimed' | 'deleting';

export interface UploadRow {
  id: string;
  organizationId: string;
  formId: string;
  fieldId: string;
  name: string;
  type: string;
  size: number;
  status: UploadStatus;
  etag: string | null;
  /** Older than UPLOAD_UNCLAIMED_HOURS. */
  expired: boolean;
  /** A submission (or the expiry sweep) holds it. */
  claimed: boolean;
}

const UPLOAD_COLUMNS = `u.id, u.organization_id, u.form_id, u.field_id, u.name, u.type, u.size, u.status, u.etag,
  u.created_at < now() - interval '${UPLOAD_UNCLAIMED_HOURS} hours' as expired,
  exists (select from upload_claims c where c.upload_id = u.id) as claimed`;

function toUpload(row: any): UploadRow {
  return {
    id: row.id, organizationId: row.organization_id, formId: row.form_id, fieldId: row.field_id, name: row.name,
    type: row.type, size: Number(row.size), status: row.status, etag: row.etag, expired: row.expired, claimed: row.claimed,
  };
}

export async function insertUpload(em: Em, upload: {
  id: string; organizationId: string; formId: string; fieldId: string; name: string; type: string; size: number;
}): Promise<void> {
  await em.execute(
    'insert into uploads (id, organization_id, form_id, field_id, name, type, size) values (?, ?, ?, ?, ?, ?, ?)',
    [upload.id, upload.organizationId, upload.formId, upload.fieldId, upload.name, upload.type, upload.size],
  );
}

export async function findUpload(em: Em, id: string): Promise<UploadRow | null> {
  const [row] = await em.execute(`select ${UPLOAD_COLUMNS} from uploads u where u.id = ?`, [id]);
  return row ? toUpload(row) : null;
}

/** The uploads among `ids` of one organization (one round trip for a request or a whole batch). */
export async function findUploads(em: Em, organizationId: string, ids: string[]): Promise<Map<string, UploadRow>> {
  if (ids.length === 0) return new Map();
  const rows = await em.execute(
    `select ${UPLOAD_COLUMNS} from uploads u where u.organization_id = ? and u.id in (select jsonb_array_elements_text(?::jsonb))`,
    [organizationId, JSON.stringify(ids)],
  );
  return new Map(rows.map((row: any) => [row.id, toUpload(row)]));
}

/** Its bytes arrived and passed their checks; false when another request marked it first. */
export async function markUploaded(em: Em, id: string, etag: string | null): Promise<boolean> {
  const result = await em.execute(
    `update uploads set status = 'uploaded', etag = ?, checked_at = now() where id = ? and status = 'pending'`, [etag, id], 'run',
  );
  return (result as any).affectedRows > 0;
}

/** Undoes markUploaded when its bytes could not be kept after all. */
export async function markPending(em: Em, id: string): Promise<void> {
  await em.execute(`update uploads set status = 'pending', etag = null, checked_at = null where id = ? and status = 'uploaded'`, [id]);
}

/** Which of `ids` a submission (or the expiry sweep) holds. */
export async function claimedUploads(em: Em, ids: string[]): Promise<Set<string>> {
  if (ids.length === 0) return new Set();
  const rows = await em.execute(
    'select upload_id from upload_claims where upload_id in (select jsonb_array_elements_text(?::jsonb))', [JSON.stringify(ids)],
  );
  return new Set(rows.map((row: any) => row.upload_id as string));
}

/**
 * A CTE for the deleting statement of a submission (read-service.ts, after its `gone` CTE): the
 * files it claimed go `deleting`, for the deletion job to delete their bytes, then their rows.
 */
export const FILES_OF_DELETED_SQL = `doomed_files as (
  update uploads u set status = 'deleting'
    from upload_claims c join gone g on c.submission_id = g.id
   where u.id = c.upload_id and u.status <> 'deleting'
  returning u.id
)`;

/** Before partitions are dropped: the files of their submissions go `deleting`. */
export async function markFilesOfSubmissionsBefore(tx: Em, cutoff: Date): Promise<number> {
  const result = await tx.execute(
    `update uploads u set status = 'deleting'
       from upload_claims c join submissions s on s.id = c.submission_id
      where u.id = c.upload_id and u.status <> 'deleting' and s.created_at < ?`,
    [cutoff.toISOString()], 'run',
  );
  return (result as any).affectedRows;
}

/**
 * The hourly sweep's first step: uploads older than UPLOAD_UNCLAIMED_HOURS that a submission holds
 * are marked `claimed` (they leave the unclaimed index); the others are claimed by the sweep itself
 * (EXPIRED_CLAIM, so that no submission can take one while its bytes go) and marked `deleting`.
 */
export async function expireUnclaimedUploads(em: Em, limit: number): Promise<number> {
  await em.execute(
    `update uploads u set status = 'claimed'
      where u.status in ('pending', 'uploaded') and u.created_at < now() - interval '${UPLOAD_UNCLAIMED_HOURS} hours'
        and exists (select from upload_claims c where c.upload_id = u.id and c.submission_id <> '${EXPIRED_CLAIM}')`,
  );
  const [row] = await em.execute(
    `with old as (
       select id, organization_id from uploads
        where status in ('pending', 'uploaded') and created_at < now() - interval '${UPLOAD_UNCLAIMED_HOURS} hours'
        order by created_at limit ?
     ), taken as (
       insert into upload_claims (upload_id, organization_id, submission_id)
       select id, organization_id, '${EXPIRED_CLAIM}' from old order by id
       on conflict do nothing
       returning upload_id
     ), doomed as (
       update uploads u set status = 'deleting' from taken t where u.id = t.upload_id returning 1
     )
     select count(*)::int as n from doomed`,
    [limit],
  );
  return row.n;
}

/** Uploads whose bytes are to be deleted, oldest first; `submissionId` narrows to one submission's. */
export async function uploadsToDelete(em: Em, limit: number, submissionId?: string): Promise<string[]> {
  const rows = submissionId
    ? await em.execute(
      `select u.id from uploads u join upload_claims c on c.upload_id = u.id
        where c.submission_id = ? and u.status = 'deleting'`, [submissionId])
    : await em.execute(`select id from uploads where status = 'deleting' order by created_at limit ?`, [limit]);
  return rows.map((row: any) => row.id as string);
}

/** After its bytes are gone: the upload's rows go. */
export async function forgetUpload(em: Em, id: string): Promise<void> {
  await em.execute(
    `with claim as (delete from upload_claims where upload_id = ?) delete from uploads where id = ? and status = 'deleting'`, [id, id],
  );
}
