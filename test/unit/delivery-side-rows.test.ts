import { expect } from 'chai';
import { expectedSideRows, sideRowsDrift } from '../../src/domain/maintenance/delivery-side-rows';
import type { DeliveryWithSideRows } from '../../src/domain/webhooks/store';

const CREATED = '2026-11-26T10:00:00.123456Z';
const DUE = '2026-11-26T10:05:00.654321Z';

function row(status: 'pending' | 'succeeded' | 'failed' | null, owed: string | null, failed: string | null): DeliveryWithSideRows {
  return {
    deliveryId: 'dlv_1', webhookId: 'wh_1', owed, failed,
    delivery: status === null ? null : { status, due: status === 'pending' ? DUE : CREATED, createdAt: CREATED },
  };
}

describe('delivery side rows rule', () => {
  it('expects an owed row due when a pending delivery is, a failed row at a failed one\'s creation, none otherwise', () => {
    expect(expectedSideRows(row('pending', null, null).delivery)).to.deep.equal({ owed: DUE, failed: null });
    expect(expectedSideRows(row('failed', null, null).delivery)).to.deep.equal({ owed: null, failed: CREATED });
    expect(expectedSideRows(row('succeeded', null, null).delivery)).to.deep.equal({ owed: null, failed: null });
    expect(expectedSideRows(null)).to.deep.equal({ owed: null, failed: null });
  });

  it('finds no drift where the side rows say what the delivery says', () => {
    expect(sideRowsDrift(row('pending', DUE, null))).to.equal(null);
    expect(sideRowsDrift(row('failed', null, CREATED))).to.equal(null);
    expect(sideRowsDrift(row('succeeded', null, null))).to.equal(null);
  });

  it('finds side rows filed under another organization or webhook than their delivery\'s, times agreeing', () => {
    expect(sideRowsDrift({ ...row('pending', DUE, null), otherOwner: true })).to.deep.equal({
      deliveryId: 'dlv_1', webhookId: 'wh_1', status: 'pending', owed: DUE, failed: null, expected: { owed: DUE, failed: null }, otherOwner: true,
    });
  });

  const cases: Array<[string, DeliveryWithSideRows, { owed: string | null; failed: string | null }]> = [
    ['a pending delivery without its owed row', row('pending', null, null), { owed: DUE, failed: null }],
    ['an owed row due at another time (a microsecond off)', row('pending', '2026-11-26T10:05:00.654322Z', null), { owed: DUE, failed: null }],
    ['a failed row beside a pending delivery', row('pending', DUE, CREATED), { owed: DUE, failed: null }],
    ['a failed delivery without its failed row', row('failed', null, null), { owed: null, failed: CREATED }],
    ['a failed row of another creation time', row('failed', null, DUE), { owed: null, failed: CREATED }],
    ['an owed row beside a failed delivery', row('failed', CREATED, CREATED), { owed: null, failed: CREATED }],
    ['an owed row beside a succeeded delivery', row('succeeded', DUE, null), { owed: null, failed: null }],
    ['a failed row beside a succeeded delivery', row('succeeded', null, CREATED), { owed: null, failed: null }],
    ['side rows of a delivery that is gone', row(null, DUE, CREATED), { owed: null, failed: null }],
  ];
  for (const [what, given, expected] of cases) {
    it(`finds ${what}`, () => {
      expect(sideRowsDrift(given)).to.deep.equal({
        deliveryId: 'dlv_1', webhookId: 'wh_1', status: given.delivery?.status ?? null, owed: given.owed, failed: given.failed, expected,
      });
    });
  }
});
