import { expect } from 'chai';
import fc from 'fast-check';
import { call, createPublishedForm, createTenant, startTestApp, type TestApp, type TestTenant, fieldInput as field } from '../support/harness';

/**
 * Random and adversarial bodies against both submission endpoints and the form endpoints: whatever
 * arrives, the answer is never a 5xx and always comes within a second.
 */
const ANSWER_WITHIN_MS = 1_000;
const RUNS = 100;

const CATASTROPHIC_PATTERNS = ['^(a+)+$', '(a|aa)*b', '^(\\w+\\s?)*$', '(x+x+)+y', '^(a|a?)+$', '(.*a){20}', '^(a)\\1$', '(?=a)a'];

/** Strings PostgreSQL or recursive helpers choke on, next to ordinary ones. */
const hostileString = fc.oneof(
  fc.string(),
  fc.string({ unit: 'binary' }),
  fc.constantFrom('a\u0000', '\u0000', 'x\uD800', '\uDC00y', '\uDBFF', 'enc:v1:AAAA', `${'a'.repeat(40)}!`, '__proto__', 'constructor'),
  fc.integer({ min: 0xd800, max: 0xdfff }).map((unit) => `a${String.fromCharCode(unit)}b`),
  fc.nat({ max: 20_000 }).map((n) => `${'a'.repeat(n)}!`),
);

const hostileValue: fc.Arbitrary<unknown> = fc.letrec<{ value: unknown }>((tie) => ({
  value: fc.oneof(
    { depthSize: 'small', withCrossShrink: true },
    hostileString,
    fc.double(),
    fc.integer(),
    fc.boolean(),
    fc.constant(null),
    fc.array(tie('value'), { maxLength: 5 }),
    fc.dictionary(hostileString, tie('value'), { maxKeys: 5 }),
    fc.nat({ max: 50_000 }).map((n) => Array.from({ length: n }, (_, i) => (i % 2 ? 'a' : 'zzz'))),
  ),
})).value;

/** A JSON text nested `levels` deep (built as text: no serializer could build 10,000 levels). */
const deepText = fc.tuple(fc.integer({ min: 60, max: 20_000 }), fc.boolean())
  .map(([levels, arrays]) => (arrays ? `${'['.repeat(levels)}1${']'.repeat(levels)}` : `${'{"a":'.repeat(levels)}1${'}'.repeat(levels)}`));

const garbageText = fc.oneof(fc.string(), fc.constantFrom('', '{', '{"values":', 'null', '[]', '"x"', '1e999999', '{"a":1,"a":2}'));

/** A body as text: JSON of a hostile value (lone surrogates come through as \ud800 escapes), deep JSON, or not JSON. */
function bodies(shape: fc.Arbitrary<unknown>): fc.Arbitrary<string> {
  return fc.oneof(
    { weight: 4, arbitrary: shape.map((body) => JSON.stringify(body)) },
    { weight: 1, arbitrary: hostileValue.map((body) => JSON.stringify(body) ?? 'null') },
    { weight: 1, arbitrary: deepText },
    { weight: 1, arbitrary: garbageText },
  );
}

/** Mostly well-formed answers for the test form's fields, with hostile strings and sizes inside them. */
const answerArbs: Record<string, fc.Arbitrary<unknown>> = {
  fld_code: fc.oneof(fc.nat({ max: 20_000 }).map((n) => `${'a'.repeat(n)}!`), fc.constant('aaaa'), hostileString),
  fld_box: fc.oneof(fc.constant(['a']), fc.constant(['b']), fc.nat({ max: 200_000 }).map((n) => Array.from({ length: n }, () => 'a')), hostileValue),
  fld_email: fc.oneof(hostileString.map((local) => `${local}@b.co`), hostileValue),
  fld_name: fc.oneof(hostileString.map((fullName) => ({ format: 'full', fullName })), hostileValue),
  fld_dep0: hostileString,
  fld_dep1: hostileString,
  fld_num: fc.oneof(fc.integer({ min: 0, max: 10 }), hostileValue),
  unknown: hostileValue,
  constructor: hostileValue,
};
const valuesArb = fc.record(answerArbs, { requiredKeys: [] });

const KNOWN_ATTACKS: Array<Record<string, unknown>> = [
  { submitterName: 'a\u0000' },
  { submitterName: 'x\uD800' },
  { values: { fld_email: 'a\u0000@b.co' } },
  { values: { fld_code: `${'a'.repeat(30)}!` } },
  { values: { fld_box: Array.from({ length: 200_000 }, () => 'a') } },
  { values: { fld_name: { format: 'full', fullName: '\uDC00' } } },
];

const submissionBody = fc.record({
  data: valuesArb, submitterName: fc.option(hostileString), submitterEmail: fc.option(hostileString.map((local) => `${local}@b.co`)),
}, { requiredKeys: ['data'] });
const publicBody = fc.record({
  values: valuesArb, submitterName: fc.option(hostileString), submitterEmail: fc.option(hostileString.map((local) => `${local}@b.co`)),
}, { requiredKeys: ['values'] });

/** The known attacks as bodies of each surface, always tried before the random ones. */
const knownSubmissionBodies = KNOWN_ATTACKS.map(({ values, ...rest }) => [JSON.stringify({ data: values ?? {}, ...rest })] as [string]);
const knownPublicBodies = KNOWN_ATTACKS.map(({ values, ...rest }) => [JSON.stringify({ values: values ?? {}, ...rest })] as [string]);
const deepBody = (levels: number) => `{"data":${'['.repeat(levels)}${']'.repeat(levels)},"values":${'{"a":'.repeat(levels)}1${'}'.repeat(levels)}}`;

const hostileField = fc.record({
  id: fc.oneof(fc.constantFrom('f1', 'f2', '__proto__'), hostileString),
  type: fc.constantFrom('text', 'email', 'checkbox', 'name', 'select', 'number', 'bogus'),
  label: hostileString,
  validationRules: fc.record({ pattern: fc.oneof(fc.constantFrom(...CATASTROPHIC_PATTERNS), hostileString), maxLength: fc.integer() }, { requiredKeys: [] }),
  config: fc.record({ options: fc.array(fc.record({ label: hostileString, value: hostileString }), { maxLength: 3 }), sensitive: fc.boolean() }, { requiredKeys: [] }),
  conditionalLogic: fc.option(fc.record({
    show: fc.boolean(), logic: fc.constantFrom('all', 'any'),
    rules: fc.array(fc.record({ fieldId: fc.constantFrom('f1', 'f2'), operator: fc.constantFrom('equals', 'contains', 'bogus'), value: hostileValue }), { maxLength: 3 }),
  })),
}, { requiredKeys: ['type', 'label'] });

const formBody = fc.record({
  title: hostileString, description: hostileString, status: fc.constantFrom('draft', 'published', 'x'),
  fields: fc.array(hostileField, { maxLength: 4 }), pages: fc.array(hostileValue, { maxLength: 2 }),
  settings: fc.record({ integrations: fc.array(hostileValue, { maxLength: 2 }), theme: hostileValue }, { requiredKeys: [] }),
}, { requiredKeys: [] });

describe('hostile bodies (property-based)', function () {
  this.timeout(120_000);
  let t: TestApp;
  let tenant: TestTenant;
  let form: any;

  before(async () => {
    t = await startTestApp({ PUBLIC_RATE_LIMIT_POST: '100000', PUBLIC_RATE_LIMIT_GET: '100000', PUBLIC_RATE_LIMIT_MISSES: '100000' });
    tenant = await createTenant(t.app);
    const showWhenTicked = { show: true, logic: 'any', rules: [{ fieldId: 'fld_box', operator: 'contains', value: 'a' }, { fieldId: 'fld_box', operator: 'equals', value: 'b' }] };
    form = await createPublishedForm(t.url, tenant.key, [
      field('fld_code', 'text', 'Code', { order: 0, validationRules: { pattern: '^(a+)+$' } }),
      field('fld_box', 'checkbox', 'Box', { order: 1, config: { options: [{ label: 'A', value: 'a' }, { label: 'B', value: 'b' }] } }),
      field('fld_email', 'email', 'Email', { order: 2 }),
      field('fld_name', 'name', 'Name', { order: 3, config: { sensitive: true } }),
      ...Array.from({ length: 50 }, (_, i) => field(`fld_dep${i}`, 'text', `Dep ${i}`, { order: 4 + i, required: i % 2 === 0, conditionalLogic: showWhenTicked })),
      field('fld_num', 'number', 'Num', { order: 60, validationRules: { min: 0, max: 10 } }),
    ]);
  });
  after(async () => t.close());

  async function expectBounded(method: string, path: string, body: string, key?: string): Promise<void> {
    const started = Date.now();
    const res = await call(t.url, method, path, { key, body, headers: { 'Content-Type': 'application/json' } });
    const elapsed = Date.now() - started;
    expect(res.status, `${method} ${path} ${body.slice(0, 200)} → ${res.text.slice(0, 200)}`).to.be.below(500);
    expect(elapsed, `${method} ${path} ${body.slice(0, 200)}`).to.be.below(ANSWER_WITHIN_MS);
  }

  const property = (arb: fc.Arbitrary<string>, send: (body: string) => Promise<void>, examples: [string][] = []) =>
    fc.assert(fc.asyncProperty(arb, send), { numRuns: RUNS, examples: [...examples, [deepBody(10_000)], [deepBody(65)]] });

  it('POST /v1/forms/{formId}/submissions', () =>
    property(bodies(submissionBody), (body) => expectBounded('POST', `/v1/forms/${form.id}/submissions`, body, tenant.key), knownSubmissionBodies));

  it('POST /public/forms/{formId}', () =>
    property(bodies(publicBody), (body) => expectBounded('POST', `/public/forms/${form.id}`, body), knownPublicBodies));

  it('POST /v1/forms', () =>
    property(bodies(formBody), (body) => expectBounded('POST', '/v1/forms', body, tenant.key)));

  it('PUT /v1/forms/{formId}/structure and PUT /v1/forms/{formId}', async () => {
    const target = await createPublishedForm(t.url, tenant.key, []);
    await property(bodies(formBody), async (body) => {
      await expectBounded('PUT', `/v1/forms/${target.id}/structure`, body, tenant.key);
      await expectBounded('PUT', `/v1/forms/${target.id}`, body, tenant.key);
    });
  });

  it('a form accepted with a random structure takes random submissions in bounded time', () =>
    fc.assert(fc.asyncProperty(fc.array(hostileField, { minLength: 1, maxLength: 4 }), fc.array(valuesArb, { minLength: 1, maxLength: 3 }),
      async (fields, submissions) => {
        const created = await call(t.url, 'POST', '/v1/forms', { key: tenant.key, body: { title: 'Random', status: 'published', fields } });
        expect(created.status).to.be.below(500);
        if (created.status !== 201) return;
        for (const values of submissions) {
          await expectBounded('POST', `/public/forms/${created.body.form.id}`, JSON.stringify({ values }));
          const renamed = Object.fromEntries(Object.entries(values).map(([k, v], i) => [created.body.form.fields[i % created.body.form.fields.length]?.id ?? k, v]));
          await expectBounded('POST', `/v1/forms/${created.body.form.id}/submissions`, JSON.stringify({ data: renamed }), tenant.key);
        }
      }), { numRuns: 30 }));
});
