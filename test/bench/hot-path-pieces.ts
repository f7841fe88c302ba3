import { randomUUID } from 'node:crypto';
import Joi from 'joi';
import pino from 'pino';
import { hashApiKey } from '../../src/domain/auth/api-keys';
import type { CachedForm } from '../../src/domain/forms/form-cache';
import { normalizeStructure } from '../../src/domain/forms/structure';
import { checkSubmission, type SubmissionDeps } from '../../src/domain/submissions/create-submission';
import { storeSubmissionsValues, storingItem, type SubmissionRow } from '../../src/domain/submissions/storing-statement';
import { validateSubmission } from '../../src/domain/submissions/validate';
import { jsonBodyProblem } from '../../src/lib/json-guard';
import { createLogger, isoTimestamp } from '../../src/lib/logger';
import { metrics } from '../../src/lib/metrics';
import { newId } from '../../src/lib/ids';
import { TtlCache } from '../../src/lib/ttl-cache';
import { submitterErrors } from '../../src/domain/submissions/create-submission';
import { quotaMonthOfIso } from '../../src/domain/quotas/quota';
import { benchNumber } from './support';

/**
 * The pieces of a submission's request path that this service adds to "parse + one INSERT", each
 * measured in this process alone (no HTTP, no database, no other process to wake), as it was and as
 * it is, interleaved: `--rounds` rounds of `--calls` calls of each, and the median CPU microseconds
 * per call. On a shared machine whose speed drifts by 2–3× within a minute, the ingest bench cannot
 * tell a 3 % change from noise; the same work done alternately in one process can.
 * Tried and not kept, measured so: skipping the walk over a parsed body (json-guard.ts) when its
 * text shows it plain (no `\\u` escape, no raw lone surrogate, few brackets) cost as much as the
 * walk, 1.9 against 1.8 µs.
 * Usage: node_modules/.bin/node dist/test/bench/hot-path-pieces.js [--calls 20000 --rounds 7]
 */
const CALLS = benchNumber('calls', 20_000);
const ROUNDS = benchNumber('rounds', 7);

// How the submitter details were checked before: joi's validation run for every value present.
const submitterSchemas = [
  ['submitterEmail', Joi.string().email({ tlds: false }).max(320).allow(null).label('submitterEmail')],
  ['submitterName', Joi.string().max(500).allow(null).label('submitterName')],
] as const;
function submitterErrorsWithJoi(submitterEmail: unknown, submitterName: unknown) {
  const errors: Array<{ field: string; message: string }> = [];
  for (const [field, schema] of submitterSchemas) {
    const value = field === 'submitterEmail' ? submitterEmail : submitterName;
    if (value === undefined) continue;
    const { error } = schema.validate(value, { abortEarly: false });
    for (const d of error?.details ?? []) errors.push({ field, message: d.message.replace(/"/g, '') });
  }
  return errors;
}

// How a row became a statement item before: every column named, null where it has no value.
function storingItemWithNulls(row: SubmissionRow, seq: number, jobGroup: string | null = null) {
  return {
    seq, org: row.organizationId, form: row.formId, form_updated: row.formUpdatedAt.toISOString(), form_version: row.formVersion ?? null,
    month: row.month,
    id: row.id, data: row.data, email: row.submitterEmail, name: row.submitterName, source: row.source, language: row.language ?? null,
    created: row.createdAt.toISOString(),
    idem_key: row.idempotency?.key ?? null, idem_hash: row.idempotency?.requestHash ?? null,
    idem_body: row.idempotency?.responseBody ?? null, idem_token: row.idempotency?.claimToken ?? null,
    event_id: row.fanout?.event?.id ?? null, event: row.fanout?.event?.payload ?? null, dlv_ids: row.fanout?.deliveryIds ?? null,
    syncs: row.fanout?.syncs.length ? row.fanout.syncs : null,
    job_group: row.fanout?.deliveryIds.length ? jobGroup : null,
  };
}
const sampleRow: SubmissionRow = {
  id: newId('sub'), organizationId: newId('org'), formId: newId('form'), formUpdatedAt: new Date(1_700_000_000_000), formVersion: 1,
  month: '2026-11', data: { fld_name: 'Ada Lovelace', fld_email: 'ada@example.com', fld_count: 3, fld_plan: 'pro' },
  submitterEmail: 'ada@example.com', submitterName: null, source: 'api', language: null, createdAt: new Date(), claims: [], idempotency: null,
  fanout: { event: null, deliveryIds: [], syncs: [] },
};

let sink = 0;
const pieces: Array<{ piece: string; before: () => void; after: () => void }> = [
  {
    piece: 'submitterEmail check',
    before: () => { sink += submitterErrorsWithJoi('ada@example.com', undefined).length; },
    after: () => { sink += submitterErrors('ada@example.com', undefined).length; },
  },
  {
    // Creation time → answer, quota month and item; the form's updated_at → item (cached per form now).
    piece: 'ISO times of a submission',
    before: () => {
      const at = new Date();
      const form = new Date(1_700_000_000_000);
      sink += at.toISOString().length + at.toISOString().slice(0, 7).length + at.toISOString().length + form.toISOString().length;
    },
    after: () => {
      const at = new Date();
      const iso = at.toISOString();
      sink += iso.length + quotaMonthOfIso(iso).length + at.toISOString().length + 24;
    },
  },
  {
    piece: 'statement item of a row (JSON text)',
    before: () => { sink += JSON.stringify(storingItemWithNulls(sampleRow, 3)).length; },
    after: () => { sink += JSON.stringify(storingItem(sampleRow, 3)).length; },
  },
  {
    piece: "a log line's time",
    before: () => { sink += pino.stdTimeFunctions.isoTime().length; },
    after: () => { sink += isoTimestamp().length; },
  },
];

// What one submission costs in this service's code beyond "parse + one INSERT", piece by piece, in
// a tight loop (warm caches: a server pays more for each, about 2–3× in its profile, but in the same
// proportions). The bench's form and body.
const body = JSON.stringify({
  data: { fld_name: 'Ada Lovelace', fld_email: 'ada@example.com', fld_count: 3, fld_plan: 'pro' },
  submitterEmail: 'ada@example.com',
});
const { structure } = normalizeStructure({
  pages: [],
  fields: [
    { id: 'fld_name', type: 'text', label: 'Name', required: true, config: {}, validationRules: { maxLength: 200 }, order: 0 },
    { id: 'fld_email', type: 'email', label: 'Email', required: true, config: {}, validationRules: {}, order: 1 },
    { id: 'fld_count', type: 'number', label: 'Count', required: false, config: {}, validationRules: { min: 0, max: 10 }, order: 2 },
    { id: 'fld_plan', type: 'select', label: 'Plan', required: false, config: { options: [{ label: 'Pro', value: 'pro' }, { label: 'Free', value: 'free' }] }, validationRules: {}, order: 3 },
  ],
}, (p) => newId(p));
const form: CachedForm = {
  id: newId('form'), organizationId: newId('org'), title: 'Bench', description: null, status: 'published', settings: {},
  translations: null, updatedAt: new Date(1_700_000_000_000), version: 1, structure: structure!,
};
const deps = { encryptionKey: Buffer.alloc(32) } as unknown as SubmissionDeps;
const rawKey = `fs_live_${'a1B2c3D4e5'.repeat(4)}`;
const caches = Array.from({ length: 6 }, () => new TtlCache<string, number>(60_000));
const cacheKey = hashApiKey(rawKey);
for (const cache of caches) cache.set(cacheKey, 1);
const accessLog = createLogger('info', pino.destination({ dest: '/dev/null', sync: false, minLength: 4096 })).child({}, { redact: [] });
const duration = metrics.httpDuration.labels({ method: 'POST', route: '/v1/forms/:formId/submissions', status: '201' });
let checkedRow: Parameters<typeof storeSubmissionsValues>[0][0] | null = null;

const breakdown: Array<{ piece: string; run: () => void | Promise<void> }> = [
  { piece: 'JSON.parse of the body (the bare stack too)', run: () => { sink += JSON.parse(body) ? 1 : 0; } },
  { piece: 'JSON body guard (json-guard.ts)', run: () => { sink += jsonBodyProblem(JSON.parse(body)) === null ? 1 : 0; } },
  { piece: 'API key hash (sha256)', run: () => { sink += hashApiKey(rawKey).length; } },
  { piece: 'six TTL-cache reads (key, unknown key, last use, form, webhook hints)', run: () => { for (const c of caches) sink += c.get(cacheKey) ?? 0; } },
  { piece: 'request id (randomUUID)', run: () => { sink += randomUUID().length; } },
  { piece: 'submitterEmail check', run: () => { sink += submitterErrors('ada@example.com', undefined).length; } },
  { piece: 'field validation (validateSubmission)', run: () => { sink += validateSubmission(form.structure, JSON.parse(body).data).errors.length; } },
  {
    piece: 'the whole check and row (checkSubmission: validation, ids, times, row)',
    run: async () => {
      const result = await checkSubmission(deps, form, { data: JSON.parse(body).data, submitterEmail: 'ada@example.com', submitterName: null, source: 'api' }, null);
      if (result.ok) checkedRow = result.checked.row;
    },
  },
  { piece: 'the row as a statement item (JSON, a 16th of a statement)', run: () => { if (checkedRow) sink += String(storeSubmissionsValues([checkedRow])[0]).length; } },
  { piece: 'response body JSON (the bare stack too)', run: () => { sink += JSON.stringify({ submission: { id: 'sub_x', formId: form.id, formVersion: 1, createdAt: new Date().toISOString() } }).length; } },
  {
    piece: 'access log line',
    run: () => accessLog.info({ reqId: 'r', method: 'POST', route: '/v1/forms/:formId/submissions', status: 201, durationMs: 3, organizationId: form.organizationId }, 'request'),
  },
  { piece: 'request duration histogram', run: () => duration.observe(0.003) },
];

async function asyncCpuMicrosPerCall(fn: () => void | Promise<void>): Promise<number> {
  const started = process.cpuUsage();
  for (let i = 0; i < CALLS; i++) await fn();
  const used = process.cpuUsage(started);
  return (used.user + used.system) / CALLS;
}

const median = (v: number[]) => [...v].sort((a, b) => a - b)[v.length >> 1];

function cpuMicrosPerCall(fn: () => void): number {
  const started = process.cpuUsage();
  for (let i = 0; i < CALLS; i++) fn();
  const used = process.cpuUsage(started);
  return (used.user + used.system) / CALLS;
}

async function main(): Promise<void> {
  const results = pieces.map(() => ({ before: [] as number[], after: [] as number[] }));
  for (const p of pieces) { cpuMicrosPerCall(p.before); cpuMicrosPerCall(p.after); } // warm-up: both optimised
  for (let r = 0; r < ROUNDS; r++) {
    pieces.forEach((p, i) => {
      const order = r % 2 ? (['after', 'before'] as const) : (['before', 'after'] as const);
      for (const k of order) results[i][k].push(cpuMicrosPerCall(p[k]));
    });
  }
  console.table(pieces.map((p, i) => ({
    piece: p.piece,
    beforeMicros: Number(median(results[i].before).toFixed(3)),
    afterMicros: Number(median(results[i].after).toFixed(3)),
    savedMicros: Number((median(results[i].before) - median(results[i].after)).toFixed(3)),
  })));
  console.log(`(${ROUNDS} interleaved rounds of ${CALLS} calls each, medians; ${sink > 0 ? 'ok' : ''})`);

  const costs = breakdown.map(() => [] as number[]);
  for (const b of breakdown) await asyncCpuMicrosPerCall(b.run); // warm-up
  for (let r = 0; r < ROUNDS; r++) {
    for (const [i, b] of breakdown.entries()) costs[i].push(await asyncCpuMicrosPerCall(b.run));
  }
  console.log("what a submission's pieces cost in this process (CPU µs per call, medians; a tight loop's warm caches):");
  console.table(breakdown.map((b, i) => ({ piece: b.piece, micros: Number(median(costs[i]).toFixed(3)) })));
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
