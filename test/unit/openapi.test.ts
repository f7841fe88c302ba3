import { expect } from 'chai';
import * as fs from 'fs';
import { load } from 'js-yaml';
import { openapiPath } from '../support/openapi-webhooks';

type Node = Record<string, any>;

interface Operation {
  name: string;
  path: string;
  op: Node;
}

const HTTP_METHODS = ['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace'];
const AUTHENTICATED_STATUSES = ['401', '403', '429'];
const SCOPE_PATTERN = /^(forms|submissions|webhooks):(read|write)$/;

function readDocumentText(): string {
  return fs.readFileSync(openapiPath(), 'utf8');
}

function resolvePointer(doc: unknown, ref: string): unknown {
  if (!ref.startsWith('#/')) return undefined;
  let node: unknown = doc;
  for (const raw of ref.slice(2).split('/')) {
    const key = raw.replace(/~1/g, '/').replace(/~0/g, '~');
    if (node === null || typeof node !== 'object' || !(key in node)) return undefined;
    node = (node as Node)[key];
  }
  return node;
}

function collectRefs(node: unknown, found: string[] = []): string[] {
  if (Array.isArray(node)) node.forEach((item) => collectRefs(item, found));
  else if (node !== null && typeof node === 'object') {
    for (const [key, value] of Object.entries(node)) {
      if (key === '$ref' && typeof value === 'string') found.push(value);
      else collectRefs(value, found);
    }
  }
  return found;
}

function danglingRefs(doc: Node): string[] {
  return collectRefs(doc).filter((ref) => resolvePointer(doc, ref) === undefined);
}

function operationsOf(doc: Node): Operation[] {
  const fromItems = (items: Node | undefined, prefix: string): Operation[] =>
    Object.entries(items ?? {}).flatMap(([itemPath, item]) =>
      HTTP_METHODS.filter((method) => method in (item as Node)).map((method) => ({
        name: `${prefix}${method.toUpperCase()} ${itemPath}`,
        path: itemPath,
        op: (item as Node)[method] as Node,
      })),
    );
  return [...fromItems(doc.paths, ''), ...fromItems(doc.webhooks, 'webhook ')];
}

function operationIdProblems(ops: Operation[]): string[] {
  const seen = new Map<string, string>();
  const problems: string[] = [];
  for (const { name, op } of ops) {
    const id = op.operationId;
    if (typeof id !== 'string' || id === '') problems.push(`${name}: no operationId`);
    else if (seen.has(id)) problems.push(`${name}: operationId ${id} also used by ${seen.get(id)}`);
    else seen.set(id, name);
  }
  return problems;
}

function hasSuccessResponse(op: Node): boolean {
  return Object.keys(op.responses ?? {}).some((status) => /^[23]/.test(status));
}

function securityRequirements(doc: Node, op: Node): Node[] {
  return (op.security ?? doc.security ?? []) as Node[];
}

function authenticatedProblems(doc: Node, { name, op }: Operation): string[] {
  const problems = AUTHENTICATED_STATUSES.filter((status) => !(status in (op.responses ?? {})))
    .map((status) => `${name}: no ${status} response`);
  const requirements = securityRequirements(doc, op);
  if (requirements.length === 0 || requirements.some((req) => Object.keys(req).length === 0)) {
    problems.push(`${name}: no mandatory security requirement`);
  }
  const scope = op['x-required-scope'];
  if (typeof scope !== 'string' || !SCOPE_PATTERN.test(scope)) {
    problems.push(`${name}: x-required-scope missing or not a scope`);
  } else if (!String(op.description ?? '').includes(`Required scope: \`${scope}\``)) {
    problems.push(`${name}: description does not state scope ${scope}`);
  }
  return problems;
}

function isAuthenticated(operation: Operation): boolean {
  return operation.path.startsWith('/v1/');
}

function allAuthenticatedProblems(doc: Node): string[] {
  return operationsOf(doc).filter(isAuthenticated).flatMap((operation) => authenticatedProblems(doc, operation));
}

describe('openapi.yaml checks', () => {
  const v1Operation = (extra: Node = {}): Node => ({
    operationId: 'listThings',
    description: 'Lists things.\n\nRequired scope: `forms:read`.',
    'x-required-scope': 'forms:read',
    security: [{ bearerAuth: [] }],
    responses: { 200: { description: 'ok' }, 401: {}, 403: {}, 429: {} },
    ...extra,
  });
  const docWith = (op: Node, extra: Node = {}): Node => ({ paths: { '/v1/things': { get: op } }, ...extra });

  it('finds refs that do not resolve, including escaped pointers', () => {
    const doc = {
      components: { schemas: { A: { type: 'string' } }, x: { 'a/b': { c: 1 } } },
      refs: [{ $ref: '#/components/schemas/A' }, { $ref: '#/components/x/a~1b/c' }],
      broken: [{ $ref: '#/components/schemas/B' }, { $ref: 'other.yaml#/A' }],
    };
    expect(danglingRefs(doc)).to.deep.equal(['#/components/schemas/B', 'other.yaml#/A']);
  });

  it('finds missing and duplicate operationIds', () => {
    const doc = { paths: { '/a': { get: { operationId: 'x' }, post: {} }, '/b': { get: { operationId: 'x' } } } };
    expect(operationIdProblems(operationsOf(doc))).to.deep.equal([
      'POST /a: no operationId',
      'GET /b: operationId x also used by GET /a',
    ]);
  });

  const successCases: [string, Node, boolean][] = [
    ['200', { 200: {} }, true],
    ['2XX range', { '2XX': {} }, true],
    ['302', { 302: {} }, true],
    ['errors only', { 400: {}, default: {} }, false],
    ['no responses', {}, false],
  ];
  for (const [label, responses, expected] of successCases) {
    it(`success response detection: ${label} → ${expected}`, () => {
      expect(hasSuccessResponse({ responses })).to.equal(expected);
    });
  }

  const authCases: [string, Node, Node, string[]][] = [
    ['complete operation', v1Operation(), {}, []],
    ['security inherited from the document', v1Operation({ security: undefined }), { security: [{ apiKey: [] }] }, []],
    ['missing 403', v1Operation({ responses: { 200: {}, 401: {}, 429: {} } }), {}, ['GET /v1/things: no 403 response']],
    ['no security', v1Operation({ security: [] }), {}, ['GET /v1/things: no mandatory security requirement']],
    ['optional security', v1Operation({ security: [{}, { bearerAuth: [] }] }), {},
      ['GET /v1/things: no mandatory security requirement']],
    ['no scope', v1Operation({ 'x-required-scope': undefined }), {},
      ['GET /v1/things: x-required-scope missing or not a scope']],
    ['scope not in description', v1Operation({ description: 'Lists things.' }), {},
      ['GET /v1/things: description does not state scope forms:read']],
  ];
  for (const [label, op, extra, expected] of authCases) {
    it(`authenticated operation check: ${label}`, () => {
      expect(allAuthenticatedProblems(docWith(op, extra))).to.deep.equal(expected);
    });
  }
});

describe('openapi.yaml', () => {
  let doc: Node;

  before(() => {
    doc = load(readDocumentText()) as Node;
  });

  it('parses to an object', () => {
    expect(doc).to.be.an('object');
  });

  it('is OpenAPI 3.1 at version 1.0.0', () => {
    expect(doc.openapi).to.match(/^3\.1\.\d+$/);
    expect(doc.info.version).to.equal('1.0.0');
  });

  it('has every $ref resolving inside the document', () => {
    expect(collectRefs(doc)).to.not.be.empty;
    expect(danglingRefs(doc)).to.deep.equal([]);
  });

  it('gives every operation a unique operationId', () => {
    expect(operationIdProblems(operationsOf(doc))).to.deep.equal([]);
  });

  it('gives every operation a 2xx or 3xx response', () => {
    const without = operationsOf(doc).filter(({ op }) => !hasSuccessResponse(op)).map(({ name }) => name);
    expect(without).to.deep.equal([]);
  });

  it('gives every /v1 operation 401, 403 and 429 responses, a security requirement and a scope', () => {
    expect(operationsOf(doc).filter(isAuthenticated)).to.not.be.empty;
    expect(allAuthenticatedProblems(doc)).to.deep.equal([]);
  });
});
