import { expect } from 'chai';
import { itemOutcome, type ItemAnswer, type SubmissionRow } from '../../src/domain/submissions/storing-statement';
import { causedByAnItem } from '../../src/domain/submissions/submission-writer';

const row = (over: Partial<SubmissionRow> = {}): SubmissionRow => ({
  id: 'sub_1', organizationId: 'org_1', formId: 'frm_1', formUpdatedAt: new Date(0), month: '2026-11', data: {},
  submitterEmail: null, submitterName: null, source: 'api', createdAt: new Date(0), claims: [], idempotency: null,
  ...over,
});
const answer = (over: Partial<ItemAnswer> = {}): ItemAnswer => ({
  seq: 0, form_ok: 1, idem_held: 1, listeners_ok: 1, webhooks: 0, deferred: 0, quota_ok: 1, taken: null, stored: 1, claimed: 0, idem: 0,
  slots_ready: true, slots_room: 10, ...over,
});

describe('the storing statement: what each item gets', () => {
  it('answers as a statement of its own would, in the same order of checks', () => {
    expect(itemOutcome(row(), answer({ form_ok: 0, idem_held: 0, quota_ok: 0, stored: 0 }))).to.deep.equal({ kind: 'form_changed' });
    expect(itemOutcome(row(), answer({ idem_held: 0, listeners_ok: 0, quota_ok: 0, stored: 0 }))).to.deep.equal({ kind: 'idempotency_lost' });
    expect(itemOutcome(row(), answer({ listeners_ok: 0, webhooks: 2, quota_ok: 0, stored: 0 })))
      .to.deep.equal({ kind: 'listeners_unknown', webhooks: 2 });
  });

  it('answers the quota before a claim taken, and names the kind of claim lost', () => {
    expect(itemOutcome(row(), answer({ quota_ok: 0, taken: 'payment', stored: 0, slots_room: 0 })))
      .to.deep.equal({ kind: 'uncounted', slots_ready: true, slots_room: 0 });
    expect(itemOutcome(row(), answer({ taken: 'payment', stored: 0 }))).to.deep.equal({ kind: 'claim_taken', claim: 'payment' });
    expect(itemOutcome(row(), answer({ taken: 'idempotency', stored: 0 }))).to.deep.equal({ kind: 'idempotency_conflict' });
  });

  it('leaves an item the quota did not count, or deferred behind an item claiming the same, to a further statement', () => {
    expect(itemOutcome(row(), answer({ quota_ok: 0, stored: 0, slots_ready: false, slots_room: 0 })))
      .to.deep.equal({ kind: 'uncounted', slots_ready: false, slots_room: 0 });
    expect(itemOutcome(row(), answer({ deferred: 1, quota_ok: 0, stored: 0 }))).to.deep.equal({ kind: 'again' });
  });

  it('names the deliveries of the matching webhooks (unused spare ids left out) and every sync', () => {
    const fanned = row({
      fanout: {
        event: { id: 'evt_1', payload: '{}' }, deliveryIds: ['dlv_1', 'dlv_2', 'dlv_3'],
        syncs: [{ id: 'crm_1', index: 0, integrationId: 'int_1', provider: 'hubspot' }],
      },
    });
    expect(itemOutcome(fanned, answer({ webhooks: 2 }))).to.deep.equal(
      { kind: 'created', deliveryIds: ['dlv_1', 'dlv_2'], jobGroup: null, syncIds: ['crm_1'], webhooks: 2 });
    expect(itemOutcome(row(), answer())).to.deep.equal({ kind: 'created', deliveryIds: [], jobGroup: null, syncIds: [], webhooks: 0 });
  });

  it('names the job group its deliveries were written with, and none when it has no deliveries', () => {
    const fanned = row({ fanout: { event: { id: 'evt_1', payload: '{}' }, deliveryIds: ['dlv_1'], syncs: [] } });
    expect(itemOutcome(fanned, answer({ webhooks: 1 }), 'grp_1')).to.include({ jobGroup: 'grp_1' });
    expect(itemOutcome(fanned, answer({ webhooks: 0 }), 'grp_1')).to.include({ jobGroup: null });
  });

  it('never takes an item neither stored nor refused for a stored one', () => {
    expect(() => itemOutcome(row(), answer({ stored: 0 }))).to.throw();
  });
});

describe('the storing statement: a failed run', () => {
  it('is tried again item by item only when an item may have caused it', () => {
    expect(causedByAnItem({ code: '23505' })).to.equal(true); // unique violation
    expect(causedByAnItem({ code: '22P02' })).to.equal(true); // a value refused
    expect(causedByAnItem({ code: '57014' })).to.equal(false); // statement timeout
    expect(causedByAnItem({ code: '55P03' })).to.equal(false); // lock timeout
    expect(causedByAnItem(new Error('Connection terminated unexpectedly'))).to.equal(false);
    expect(causedByAnItem(undefined)).to.equal(false);
  });
});
