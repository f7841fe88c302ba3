import { expect } from 'chai';
import { jsonBodyProblem, MAX_JSON_DEPTH } from '../../src/lib/json-guard';

function nested(levels: number): unknown {
  let value: unknown = 'leaf';
  for (let i = 0; i < levels; i++) value = i % 2 ? { a: value } : [value];
  return value;
}

describe('jsonBodyProblem', () => {
  it('accepts ordinary bodies, paired surrogates included', () => {
    expect(jsonBodyProblem({ values: { a: 'héllo 😀', b: [1, true, null, { c: 'd' }] } })).to.equal(null);
  });

  const refused: [string, unknown][] = [
    ['a NUL in a value', { values: { a: 'a\u0000' } }],
    ['a NUL in a key', { values: { ['k\u0000']: 'x' } }],
    ['a lone high surrogate', { submitterName: 'x\uD800' }],
    ['a lone low surrogate deep in an array', { values: { a: [[['\uDC00y']]] } }],
    ['a reversed surrogate pair', ['\uDC00\uD800']],
  ];
  for (const [label, body] of refused) {
    it(`refuses ${label}`, () => expect(jsonBodyProblem(body)).to.be.a('string'));
  }

  it(`accepts ${MAX_JSON_DEPTH} levels of nesting and refuses one more`, () => {
    expect(jsonBodyProblem(nested(MAX_JSON_DEPTH))).to.equal(null);
    expect(jsonBodyProblem(nested(MAX_JSON_DEPTH + 1))).to.match(/nested deeper/);
  });

  it('walks 100,000 levels without exhausting the stack', () => {
    const deep = JSON.parse(`${'['.repeat(100_000)}${']'.repeat(100_000)}`);
    expect(jsonBodyProblem(deep)).to.match(/nested deeper/);
  });
});
