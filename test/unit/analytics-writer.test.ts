import { expect } from 'chai';
import { AnalyticsEventWriter } from '../../src/domain/forms/analytics';
import type { DailyCounts, PageCounts } from '../../src/domain/forms/store';

/** The public events endpoint's group commit: concurrent events become one write per form-day row. */
describe('AnalyticsEventWriter', () => {
  const at = new Date('2026-11-26T23:59:59Z');

  function recorder() {
    const writes: Array<{ daily: DailyCounts[]; pages: PageCounts[] }> = [];
    let release: () => void = () => undefined;
    let gate = Promise.resolve();
    const writer = new AnalyticsEventWriter(async (daily, pages) => {
      writes.push({ daily, pages });
      await gate;
    });
    return { writes, writer, hold: () => { gate = new Promise<void>((resolve) => { release = resolve; }); }, release: () => release() };
  }

  it('writes a lone event at once, and merges the events that arrive meanwhile into one row per key', async () => {
    const { writes, writer, hold, release } = recorder();
    hold();
    const first = writer.record('form_a', 'view', { at });
    const rest = [
      ...Array.from({ length: 50 }, () => writer.record('form_a', 'view', { at })),
      ...Array.from({ length: 20 }, () => writer.record('form_a', 'start', { at })),
      ...Array.from({ length: 30 }, () => writer.record('form_a', 'page', { at, pageId: 'pg_two' })),
      writer.record('form_b', 'complete', { at: new Date('2026-11-27T00:00:00Z') }),
    ];
    expect(writes).to.have.length(1);
    expect(writes[0]).to.deep.equal({ daily: [{ formId: 'form_a', day: '2026-11-26', views: 1, starts: 0, completions: 0 }], pages: [] });
    release();
    await Promise.all([first, ...rest]);
    expect(writes).to.have.length(2);
    expect(writes[1].daily).to.have.deep.members([
      { formId: 'form_a', day: '2026-11-26', views: 50, starts: 20, completions: 0 },
      { formId: 'form_b', day: '2026-11-27', views: 0, starts: 0, completions: 1 },
    ]);
    expect(writes[1].pages).to.deep.equal([{ formId: 'form_a', day: '2026-11-26', pageId: 'pg_two', reached: 30 }]);
  });

  it('answers each event only once its own write is done, and a failed write fails only its events', async () => {
    let fail = true;
    const seen: number[] = [];
    const writer = new AnalyticsEventWriter(async (daily) => {
      seen.push(daily[0].views);
      if (fail) {
        fail = false;
        throw new Error('database refused');
      }
    });
    const outcomes = await Promise.allSettled([writer.record('form_a', 'view', { at }), writer.record('form_a', 'view', { at }), writer.record('form_a', 'view', { at })]);
    expect(outcomes.map((o) => o.status)).to.deep.equal(['rejected', 'fulfilled', 'fulfilled']);
    expect(seen).to.deep.equal([1, 2]);
    await writer.record('form_a', 'view', { at });
    expect(seen).to.deep.equal([1, 2, 1]);
  });

  it('refuses a page event without its page', async () => {
    const writer = new AnalyticsEventWriter(async () => undefined);
    let refused: unknown = null;
    await writer.record('form_a', 'page', { at }).catch((err) => { refused = err; });
    expect(refused).to.be.instanceOf(Error);
  });
});
