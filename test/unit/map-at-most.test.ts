import { expect } from 'chai';
import { mapAtMost } from '../../src/lib/map-at-most';

describe('mapAtMost', () => {
  it('runs at most `atOnce` calls at a time and answers in item order', async () => {
    let running = 0;
    let most = 0;
    const items = [30, 5, 20, 1, 10, 0, 15];
    const out = await mapAtMost(items, 3, async (ms) => {
      most = Math.max(most, ++running);
      await new Promise((r) => setTimeout(r, ms));
      running--;
      return ms * 2;
    });
    expect(out).to.deep.equal(items.map((ms) => ms * 2));
    expect(most).to.equal(3);
  });

  it('answers an empty list without calling', async () => {
    expect(await mapAtMost([], 5, async () => { throw new Error('called'); })).to.deep.equal([]);
  });
});
