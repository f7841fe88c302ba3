import type { Em } from '../../db/orm';
import { isSealedValue } from './sealed-values';
import type { Field } from '../forms/types';

export const REDACTED = 'Redacted';

export interface SubmissionRecord {
  id: string;
  formId: string;
  data: Record<string, unknown>;
  submitterEmail: string | null;
  submitterName: string | null;
  createdAt: Date;
}

export interface ListFilter {
  limit: number;
  offset: number;
  from: Date | null;
  /** Exclusive. */
  until: Date | null;
}

/** Sealed (sensitive) values are never shown by ordinary reads. */
export function redact(data: Record<string, unknown>): Record<string, unknown> {
  return Object.fromEntries(Object.entries(data).map(([k, v]) => [k, isSealedValue(v) ? REDACTED : v]));
}

/** Keys by the field's current label; a deleted field keeps its id; a repeated label gets its id appended. */
export function keyByLabel(data: Record<string, unknown>, fields: Field[]): Record<string, unknown> {
  const labels = new Map(fields.map((f) => [f.id, f.label]));
  const out: Record<string, unknown> = {};
  for (const [id, value] of Object.entries(data)) {
    const label = labels.get(id) || id;
    out[label in out ? `${label} (${id})` : label] = value;
  }
  return out;
}

function toRecord(row: any): SubmissionRecord {
  return {
    id: row.id, formId: row.form_id, data: row.data, submitterEmail: row.submitter_email,
    submitterName: row.submitter_name, createdAt: new Date(row.created_at),
  };
}

export async function listSubmissions(em: Em, organizationId: string, formId: string, filter: ListFilter)
  : Promise<{ items: SubmissionRecord[]; total: number }> {
  const where = ['organization_id = ?', 'form_id = ?'];
  const params: unknown[] = [organizationId, formId];
  if (filter.from) { where.push('created_at >= ?'); params.push(filter.from.toISOString()); }
  if (filter.until) { where.push('created_at < ?'); params.push(filter.until.toISOString()); }
  const conn = em.getConnection();
  const [rows, [count]] = await Promise.all([
    conn.execute(
      `select id, form_id, data, submitter_email, submitter_name, created_at from submissions
        where ${where.join(' and ')} order by created_at desc, id desc limit ? offset ?`,
      [...params, filter.limit, filter.offset],
    ),
    conn.execute(`select count(*)::int as total from submissions where ${where.join(' and ')}`, params),
  ]);
  return { items: rows.map(toRecord), total: count.total };
}

export async function findSubmission(em: Em, organizationId: string, submissionId: string)
  : Promise<(SubmissionRecord & { formTitle: string }) | null> {
  const [row] = await em.getConnection().execute(
    `select s.id, s.form_id, s.data, s.submitter_email, s.submitter_name, s.created_at, f.title as form_title
       from submissions s join forms f on f.id = s.form_id
      where s.id = ? and s.organization_id = ?`,
    [submissionId, organizationId],
  );
  return row ? { ...toRecord(row), formTitle: row.form_title } : null;
}

export async function deleteSubmission(em: Em, organizationId: string, submissionId: string): Promise<boolean> {
  const affected = await em.getConnection().execute(
    'delete from submissions where id = ? and organization_id = ?', [submissionId, organizationId], 'run',
  );
  return (affected as any).affectedRows > 0;
}
