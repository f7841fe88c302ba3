import { expect } from 'chai';
import { randomBytes } from 'node:crypto';
import { isSealed, seal, sha256Hex, unseal } from '../../src/lib/crypto';

describe('sealed values', () => {
  const [a, b, c] = [randomBytes(32), randomBytes(32), randomBytes(32)];

  it('round-trip, with a fresh IV each time', () => {
    const first = seal('secret', a);
    expect(isSealed(first)).to.equal(true);
    expect(first).to.not.include('secret');
    expect(seal('secret', a)).to.not.equal(first);
    expect(unseal(first, a)).to.equal('secret');
  });

  it('open with whichever of several keys sealed them', () => {
    expect(unseal(seal('old', a), [b, a])).to.equal('old');
    expect(unseal(seal('new', b), [b, a])).to.equal('new');
  });

  it('refuse when no key opens them, or when they were tampered with', () => {
    expect(() => unseal(seal('x', a), [b, c])).to.throw('no encryption key opens this value');
    const sealed = seal('payload', a);
    const tampered = sealed.slice(0, -4) + (sealed.endsWith('AAAA') ? 'BBBB' : 'AAAA');
    expect(() => unseal(tampered, a)).to.throw();
    expect(() => unseal('plain text', a)).to.throw('not a sealed value');
  });
});

describe('sha256Hex', () => {
  it('is SHA-256 in hex, UTF-8 encoded', () => {
    expect(sha256Hex('abc')).to.equal('ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad');
    expect(sha256Hex('é')).to.equal('4a99557e4033c3539de2eb65472017cad5f9557f7a0625a09f1c3f6e2ba69c4c');
  });
});
