import { stringify } from 'csv-stringify';
import { Transform, type Readable } from 'node:stream';
import QueryStream from 'pg-query-stream';
import { withoutReadTimeout, type Orm } from '../../db/orm';
import type { CachedForm } from '../forms/form-cache';
import { fieldsOfAllVersions } from '../forms/store';
import type { Field } from '../forms/types';
import type { FileLink, FileLinks } from '../files/links';
import { beginExportSql, exportRowsQuery } from './read-store';
import { keyByLabel, shownValues } from './shown-values';

export type ExportFormat = 'csv' | 'ndjson';

export const EXPORT_CONTENT_TYPES: Record<ExportFormat, string> = {
  csv: 'text/csv; charset=utf-8',
  ndjson: 'application/x-ndjson',
};

/** Rows fetched per round trip, and so about how many are held in memory at once. */
const FETCH_ROWS = 500;
/** An export may outlast ordinary statements while a slow client reads it, but not forever. */
const EXPORT_STATEMENT_TIMEOUT_MS = 30 * 60_000;

/** Exports running per connection pool, so that they never hold more than half of its connections. */
const runningExports = new WeakMap<object, number>();

/** Every export slot of this process is taken. */
export class ExportCapacityReached extends Error {}

interface ExportRow {
  id: string;
  data: Record<string, unknown>;
  submitter_email: string | null;
  submitter_name: string | null;
  created_at: Date;
  /** Null (or absent): not recorded, stored before form versions. */
  form_version?: number | null;
}

const FORMULA_START = /^[=+\-@\t\r]/;

/** A spreadsheet would run a cell starting with = + - @ tab or CR as a formula: prefix it with '. */
export function neutralizeFormula(cell: string): string {
  return FORMULA_START.test(cell) ? `'${cell}` : cell;
}

const isFileLink = (value: unknown): value is FileLink =>
  !!value && typeof value === 'object' && typeof (value as FileLink).url === 'string' && typeof (value as FileLink).size === 'number';

/** A file is its link; several files are their links, one per line. */
function cellText(value: unknown): string {
  if (value === null || value === undefined) return '';
  if (isFileLink(value)) return value.url;
  if (Array.isArray(value) && value.length > 0 && value.every(isFileLink)) return value.map((file) => file.url).join('\n');
  if (typeof value === 'string') return value;
  if (typeof value === 'object') return JSON.stringify(value);
  return String(value);
}

/** A value column of the CSV: a field id and the label heading it. */
export type ExportColumn = Pick<Field, 'id' | 'label'>;

/** A field some version of the form had (fieldsOfAllVersions): its newest label, and where it was then. */
export interface KeptField {
  id: string;
  label: string;
  type: string;
  version: number;
  position: number;
}

/**
 * The CSV's value columns (pure): one per field id that any version of the form had, headed by the
 * newest label it had; headings take no values. The current version's fields first, in form order,
 * then the fields it no longer has, the most recently removed first, each in its last version's order.
 */
export function exportColumns(current: Field[], kept: KeptField[] = []): ExportColumn[] {
  const now = new Set(current.map((f) => f.id));
  const gone = kept.filter((f) => !now.has(f.id) && f.type !== 'heading')
    .sort((a, b) => b.version - a.version || a.position - b.position);
  return [...current.filter((f) => f.type !== 'heading'), ...gone].map(({ id, label }) => ({ id, label }));
}

/** The fields that take values, in form order: the current version's value columns. */
export function exportFields(form: CachedForm): ExportColumn[] {
  return exportColumns(form.structure.fields);
}

export function csvHeader(fields: ExportColumn[]): string[] {
  return ['id', 'createdAt', 'submitterEmail', 'submitterName', 'formVersion', ...fields.map((f) => f.label)].map(neutralizeFormula);
}

export function csvRecord(row: ExportRow, fields: ExportColumn[], links: FileLinks): string[] {
  const data = shownValues(row.data, links);
  return [row.id, new Date(row.created_at).toISOString(), row.submitter_email, row.submitter_name, row.form_version,
    ...fields.map((f) => data[f.id])]
    .map((value) => neutralizeFormula(cellText(value)));
}

/** One Submission detail, as `GET /v1/submissions/{id}` shows it. */
export function ndjsonLine(row: ExportRow, form: CachedForm, links: FileLinks): string {
  const rawData = shownValues(row.data, links);
  return `${JSON.stringify({
    id: row.id, formId: form.id, formTitle: form.title, submitterEmail: row.submitter_email,
    submitterName: row.submitter_name, createdAt: new Date(row.created_at).toISOString(), formVersion: row.form_version ?? null,
    data: keyByLabel(rawData, form.structure.fields), rawData,
  })}\n`;
}

/** RFC 4180: CRLF between records; a field with a comma, quote, CR or LF is quoted, quotes doubled. */
function csvEncoder(fields: ExportColumn[], links: FileLinks): Transform[] {
  const toRecord = new Transform({
    objectMode: true,
    transform(row: ExportRow, _enc, done) { done(null, csvRecord(row, fields, links)); },
  });
  const encoder = stringify({ record_delimiter: 'windows', quoted_match: /[\r\n]/ });
  encoder.write(csvHeader(fields));
  return [toRecord, encoder];
}

function ndjsonEncoder(form: CachedForm, links: FileLinks): Transform[] {
  return [new Transform({
    writableObjectMode: true,
    transform(row: ExportRow, _enc, done) { done(null, ndjsonLine(row, form, links)); },
  })];
}

/**
 * Streams the form's submissions, oldest first, from a cursor on a connection of its own: rows
 * are fetched as the reader consumes them, so memory does not grow with the number of rows.
 * Resolves once the first rows (or the end) are there, so a failure before the first byte can
 * still be answered as an error. The stages are to be piped in order; reading them to the end or
 * destroying them (a client gone mid-stream) both give the connection back.
 */
export async function openSubmissionExport(
  orm: Orm, organizationId: string, form: CachedForm, format: ExportFormat,
  bounds: { from: Date | null; until: Date | null; version?: number | null }, links: FileLinks,
): Promise<Readable[]> {
  const query = exportRowsQuery(organizationId, form.id, bounds);
  // Read before a connection is taken for the cursor: one row per field any version had.
  const columns = format === 'csv' ? exportColumns(form.structure.fields, await fieldsOfAllVersions(orm.em.fork(), organizationId, form.id)) : [];

  const pool = (orm.em.getConnection().getKnex() as any).client;
  const running = runningExports.get(pool) ?? 0;
  if (running >= Math.max(1, Math.floor((pool.pool?.max ?? 10) / 2))) throw new ExportCapacityReached();
  runningExports.set(pool, running + 1);
  let connection: any;
  let rows: QueryStream;
  try {
    connection = await pool.acquireConnection();
    await connection.query(beginExportSql(EXPORT_STATEMENT_TIMEOUT_MS));
    // The pool's client-side read timeout would end a long export: this cursor lifts it, as above the statement limit.
    rows = connection.query(withoutReadTimeout(new QueryStream(query.text, query.values, { batchSize: FETCH_ROWS })));
    await new Promise<void>((resolve, reject) => {
      rows.once('readable', resolve);
      rows.once('error', reject);
    });
  } catch (err) {
    if (connection) await giveBack(pool, connection, false);
    else exportEnded(pool);
    throw err;
  }

  let finished = false;
  rows.once('end', () => { finished = true; });
  // Whether the rows were read to the end, failed, or the client went away mid-stream.
  rows.once('close', () => { void giveBack(pool, connection, finished && !rows.errored); });
  return [rows, ...(format === 'csv' ? csvEncoder(columns, links) : ndjsonEncoder(form, links))];
}

/** A connection goes back to the pool only in a clean state; otherwise it is closed. */
async function giveBack(pool: any, connection: any, completed: boolean): Promise<void> {
  try {
    await connection.query(completed ? 'commit' : 'rollback');
  } catch {
    connection.end().catch(() => undefined);
  }
  try {
    await pool.releaseConnection(connection);
  } finally {
    exportEnded(pool);
  }
}

function exportEnded(pool: object): void {
  runningExports.set(pool, (runningExports.get(pool) ?? 1) - 1);
}
