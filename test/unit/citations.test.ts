import { expect } from 'chai';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';

const ROOT = path.resolve(__dirname, '../../..');
/** What ships in the repository and may cite: code, tests, docs, the API description. */
const PLACES = ['src', 'workers', 'config', 'test', 'deploy', 'scripts', 'README.md', 'openapi.yaml', '.ci'];
/** A citation of a document outside the repository; built from parts so this file does not match itself. */
const OUTSIDE = [new RegExp(`\\b${'CONT'}${'RACT'}\\b`), new RegExp(`shared/${'design'}`)];

function files(place: string): string[] {
  const full = path.join(ROOT, place);
  let stat;
  try { stat = statSync(full); } catch { return []; }
  if (stat.isFile()) return [full];
  return readdirSync(full).flatMap((name) => (name === 'node_modules' ? [] : files(path.join(place, name))));
}

/**
 * Code, tests and docs cite the repository's own documents (openapi.yaml, a README.md section,
 * deploy/README.md, src/README.md, test/bench/README.md), which a reader of the repository has,
 * never a design document that is not in it.
 */
describe('citations', () => {
  it('cite only documents in the repository', () => {
    const found: string[] = [];
    for (const file of PLACES.flatMap(files)) {
      if (!/\.(ts|js|md|ya?ml|json|sh|html|css)$|\/run$/.test(file)) continue;
      readFileSync(file, 'utf8').split('\n').forEach((line, i) => {
        if (OUTSIDE.some((re) => re.test(line))) found.push(`${path.relative(ROOT, file)}:${i + 1}: ${line.trim().slice(0, 120)}`);
      });
    }
    expect(found).to.deep.equal([]);
  });
});
