import Joi from 'joi';
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
];

function cpuMicrosPerCall(fn: () => void): number {
  const started = process.cpuUsage();
  for (let i = 0; i < CALLS; i++) fn();
  const used = process.cpuUsage(started);
  return (used.user + used.system) / CALLS;
}

function main(): void {
  const results = pieces.map(() => ({ before: [] as number[], after: [] as number[] }));
  for (const p of pieces) { cpuMicrosPerCall(p.before); cpuMicrosPerCall(p.after); } // warm-up: both optimised
  for (let r = 0; r < ROUNDS; r++) {
    pieces.forEach((p, i) => {
      const order = r % 2 ? (['after', 'before'] as const) : (['before', 'after'] as const);
      for (const k of order) results[i][k].push(cpuMicrosPerCall(p[k]));
    });
  }
  const median = (v: number[]) => [...v].sort((a, b) => a - b)[v.length >> 1];
  console.table(pieces.map((p, i) => ({
    piece: p.piece,
    beforeMicros: Number(median(results[i].before).toFixed(3)),
    afterMicros: Number(median(results[i].after).toFixed(3)),
    savedMicros: Number((median(results[i].before) - median(results[i].after)).toFixed(3)),
  })));
  console.log(`(${ROUNDS} interleaved rounds of ${CALLS} calls each, medians; ${sink > 0 ? 'ok' : ''})`);
}

main();
