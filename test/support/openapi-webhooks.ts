import * as fs from 'node:fs';
import * as path from 'node:path';
import Ajv2020 from 'ajv/dist/2020';
import addFormats from 'ajv-formats';
import { load } from 'js-yaml';
import type { Delivery } from './fakes/receiver';

type Node = Record<string, any>;

const DOC_ID = 'openapi.yaml';

function projectRoot(from: string): string {
  let dir = from;
  while (!fs.existsSync(path.join(dir, 'package.json'))) {
    const parent = path.dirname(dir);
    if (parent === dir) throw new Error(`no package.json above ${from}`);
    dir = parent;
  }
  return dir;
}

export function openapiPath(): string {
  return path.join(projectRoot(__dirname), 'openapi.yaml');
}

let cached: { doc: Node; ajv: Ajv2020 } | null = null;

/** The document once, with Ajv (JSON Schema 2020-12, as OpenAPI 3.1 uses) able to resolve its `$ref`s. */
function contract(): { doc: Node; ajv: Ajv2020 } {
  if (cached) return cached;
  const doc = load(fs.readFileSync(openapiPath(), 'utf8')) as Node;
  // OpenAPI keywords (example, discriminator, …) are not JSON Schema: ignore them rather than fail.
  const ajv = new Ajv2020({ strict: false, allErrors: true, validateSchema: false });
  addFormats(ajv);
  ajv.addSchema(doc, DOC_ID);
  cached = { doc, ajv };
  return cached;
}

function resolve(doc: Node, node: Node): Node {
  if (typeof node?.$ref !== 'string') return node;
  return node.$ref.slice(2).split('/').reduce((n: Node, key: string) => n[key.replace(/~1/g, '/').replace(/~0/g, '~')], doc);
}

/** The `webhooks` operation whose `X-Service-Event` header names this event type. */
function operationFor(doc: Node, eventType: string): { name: string; op: Node } | null {
  for (const [name, item] of Object.entries(doc.webhooks as Node)) {
    const op = (item as Node).post;
    const eventHeader = (op.parameters as Node[]).map((p) => resolve(doc, p)).find((p) => p.in === 'header' && p.name === 'X-Service-Event');
    if (eventHeader?.schema?.const === eventType) return { name, op };
  }
  return null;
}

function schemaErrors(ajv: Ajv2020, pointer: string, value: unknown): string[] {
  const validate = ajv.getSchema(`${DOC_ID}#${pointer}`);
  if (!validate) return [`no schema at ${pointer}`];
  if (validate(value)) return [];
  return (validate.errors ?? []).map((e) => `${e.instancePath || '/'} ${e.message}`);
}

function pointerOf(parts: (string | number)[]): string {
  return `/${parts.map((p) => String(p).replace(/~/g, '~0').replace(/\//g, '~1')).join('/')}`;
}

/**
 * Everything wrong with one delivery as the receiver got it, measured against the document's
 * `webhooks` section: the operation for its event type, every documented header (required ones
 * present, each value valid), no undocumented `X-Service-*` header, and the body's schema.
 */
export function deliveryProblems(delivery: Delivery): string[] {
  const { doc, ajv } = contract();
  const eventType = delivery.headers['x-service-event'];
  const found = operationFor(doc, eventType);
  if (!found) return [`no webhook in openapi.yaml for X-Service-Event ${JSON.stringify(eventType)}`];
  const problems: string[] = [];
  const params = (found.op.parameters as Node[]).map((p, i) => ({ p: resolve(doc, p), i }));
  for (const { p, i } of params) {
    if (p.in !== 'header') continue;
    const value = delivery.headers[p.name.toLowerCase()];
    if (value === undefined) {
      if (p.required) problems.push(`header ${p.name} missing`);
      continue;
    }
    const pointer = typeof found.op.parameters[i].$ref === 'string'
      ? `${found.op.parameters[i].$ref.slice(1)}/schema`
      : pointerOf(['webhooks', found.name, 'post', 'parameters', i, 'schema']);
    problems.push(...schemaErrors(ajv, pointer, value).map((e) => `header ${p.name}: ${e}`));
  }
  const documented = new Set(params.map(({ p }) => String(p.name).toLowerCase()));
  for (const name of Object.keys(delivery.headers)) {
    if (name.startsWith('x-service-') && !documented.has(name)) problems.push(`header ${name} is not documented`);
  }
  let body: unknown;
  try {
    body = JSON.parse(delivery.rawBody);
  } catch {
    return [...problems, 'body is not JSON'];
  }
  const bodyPointer = pointerOf(['webhooks', found.name, 'post', 'requestBody', 'content', 'application/json', 'schema']);
  problems.push(...schemaErrors(ajv, bodyPointer, body).map((e) => `body ${e}`));
  return problems;
}

/** Why `value` does not match the schema at `pointer` of openapi.yaml (`/components/schemas/PublicForm`); none when it does. */
export function schemaProblems(pointer: string, value: unknown): string[] {
  return schemaErrors(contract().ajv, pointer, value);
}
