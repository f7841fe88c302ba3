import { expect } from 'chai';
import { GroupCommit, TickBatch } from '../../src/lib/tick-batch';

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

describe('GroupCommit', () => {
  /** A run per batch that ends when the test says so. */
  function controlledRuns() {
    const runs: Array<{ items: number[]; finish: () => void; fail: (err: Error) => void }> = [];
    const run = (items: number[]) => new Promise<number[]>((resolve, reject) => {
      runs.push({ items, finish: () => resolve(items.map((n) => n * 10)), fail: reject });
    });
    return { runs, run };
  }
  const turn = () => new Promise((resolve) => setImmediate(resolve));
  /** A few turns of the event loop: a batch that ended lets the next start within them. */
  const turns = async () => { for (let i = 0; i < 3; i++) await turn(); };

  it('runs one batch at a time: calls made while one runs go together in the next, once it ends', async () => {
    const { runs, run } = controlledRuns();
    const group = new GroupCommit(run, 10_000);
    const first = group.call(1);
    await turn();
    expect(runs.map((r) => r.items)).to.deep.equal([[1]]);
    const waiting = [group.call(2), group.call(3)];
    await turn();
    const later = group.call(4);
    await turn();
    expect(runs.map((r) => r.items), 'nothing starts while the first batch runs').to.deep.equal([[1]]);
    runs[0].finish();
    expect(await first).to.equal(10);
    await turns();
    expect(runs.map((r) => r.items)).to.deep.equal([[1], [2, 3, 4]]);
    runs[1].finish();
    expect(await Promise.all([...waiting, later])).to.deep.equal([20, 30, 40]);
  });

  it('a failed batch rejects its own calls only and lets the next batch start', async () => {
    const { runs, run } = controlledRuns();
    const group = new GroupCommit(run, 10_000);
    const failed = group.call(1);
    await turn();
    const next = group.call(2);
    runs[0].fail(new Error('statement failed'));
    const [settled] = await Promise.allSettled([failed]);
    expect(settled.status).to.equal('rejected');
    await turns();
    expect(runs.map((r) => r.items)).to.deep.equal([[1], [2]]);
    runs[1].finish();
    expect(await next).to.equal(20);
  });

  it('a batch running past stallMs stops holding back the next one, which still gets its own answer', async () => {
    const { runs, run } = controlledRuns();
    const group = new GroupCommit(run, 30);
    const stuck = group.call(1);
    await turn();
    const next = group.call(2);
    await turn();
    expect(runs).to.have.length(1);
    await new Promise((resolve) => setTimeout(resolve, 60));
    expect(runs.map((r) => r.items), 'the next batch started beside the stuck one').to.deep.equal([[1], [2]]);
    runs[1].finish();
    expect(await next).to.equal(20);
    runs[0].finish();
    expect(await stuck).to.equal(10);
    // Both ended: a new call starts at once again.
    await turns();
    const after = group.call(3);
    await turn();
    expect(runs.map((r) => r.items)).to.deep.equal([[1], [2], [3]]);
    runs[2].finish();
    expect(await after).to.equal(30);
  });
});
