import { expect } from 'chai';
import { TickBatch } from '../../src/lib/tick-batch';

describe('TickBatch', () => {
  it('runs the calls of one turn together and answers each caller its own result', async () => {
    const batches: number[][] = [];
    const batch = new TickBatch(async (items: number[]) => { batches.push(items); return items.map((n) => n * 10); });
    const first = await Promise.all([batch.call(1), batch.call(2), batch.call(3)]);
    const second = await batch.call(4);
    expect(first).to.deep.equal([10, 20, 30]);
    expect(second).to.equal(40);
    expect(batches).to.deep.equal([[1, 2, 3], [4]]);
  });

  it('rejects every call of a batch that fails, and the next batch runs afresh', async () => {
    let fail = true;
    const batch = new TickBatch(async (items: number[]) => { if (fail) throw new Error('down'); return items; });
    const results = await Promise.allSettled([batch.call(1), batch.call(2)]);
    expect(results.map((r) => r.status)).to.deep.equal(['rejected', 'rejected']);
    fail = false;
    expect(await batch.call(3)).to.equal(3);
  });
});

describe('TickBatch with a result per item settled on its own', () => {
  it('answers each caller when its own part settles, a failed part failing only its callers', async () => {
    let failSecond!: (err: Error) => void;
    const second = new Promise<number>((_, reject) => { failSecond = reject; });
    const batch = new TickBatch(async (items: number[]) => items.map((n) => (n === 2 ? second : Promise.resolve(n * 10))));
    const calls = [batch.call(1), batch.call(2), batch.call(3)];
    expect(await calls[0]).to.equal(10);
    expect(await calls[2]).to.equal(30);
    failSecond(new Error('its part failed'));
    const [settled] = await Promise.allSettled([calls[1]]);
    expect(settled.status).to.equal('rejected');
    expect((settled as PromiseRejectedResult).reason.message).to.equal('its part failed');
  });
});
