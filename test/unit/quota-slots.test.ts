import { expect } from 'chai';
import fc from 'fast-check';
import { splitAllowances } from '../../src/domain/quotas/quota';
import { afterUncounted } from '../../src/domain/submissions/submission-writer';

describe('quota slots', () => {
  it('split a fresh month evenly, the remainder to the lowest slots, adding up to the quota', () => {
    expect(splitAllowances(37, new Array(16).fill(0))).to.deep.equal([3, 3, 3, 3, 3, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2]);
    expect(splitAllowances(5, new Array(16).fill(0))).to.deep.equal([1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
    expect(splitAllowances(0, [0, 0])).to.deep.equal([0, 0]);
  });

  it('keep what each slot used and spread only what the quota leaves; below it, every slot is full', () => {
    expect(splitAllowances(10, [8, 0, 0, 0])).to.deep.equal([9, 1, 0, 0]);
    expect(splitAllowances(24, [8, 0, 0, 0])).to.deep.equal([12, 4, 4, 4]);
    expect(splitAllowances(10, [6, 5, 0, 0])).to.deep.equal([6, 5, 0, 0]);
  });

  it('for any quota and usage: no slot below its use, the total the quota (or the use when above it)', () => {
    fc.assert(fc.property(fc.nat(2_000_000), fc.array(fc.nat(100_000), { minLength: 1, maxLength: 32 }), (quota, used) => {
      const allowances = splitAllowances(quota, used);
      const total = used.reduce((a, b) => a + b, 0);
      expect(allowances.reduce((a, b) => a + b, 0)).to.equal(Math.max(quota, total));
      allowances.forEach((allowance, i) => expect(allowance).to.be.at.least(used[i]));
      const shares = allowances.map((a, i) => a - used[i]);
      expect(Math.max(...shares) - Math.min(...shares)).to.be.at.most(1);
    }));
  });

  it('for items a statement counted not: split unsplit slots, wait in turn when it saw room, else refuse', () => {
    expect(afterUncounted({ slots_ready: false, slots_room: 0 }, false, 0)).to.equal('split');
    expect(afterUncounted({ slots_ready: true, slots_room: 3 }, false, 0)).to.equal('decisive');
    expect(afterUncounted({ slots_ready: true, slots_room: 0 }, false, 0)).to.equal('refuse');
    expect(afterUncounted({ slots_ready: true, slots_room: 3 }, true, 0)).to.equal('refuse');
    expect(() => afterUncounted({ slots_ready: false, slots_room: 0 }, true, 3)).to.throw();
  });
});
