import { expect } from 'chai';
import { causedByAnItem, groupable, groupOutcome } from '../../src/domain/submissions/group-store';
import type { SubmissionRow } from '../../src/domain/submissions/store';

const row = (over: Partial<SubmissionRow> = {}): SubmissionRow => ({
  id: 'sub_1', organizationId: 'org_1', formId: 'frm_1', formUpdatedAt: new Date(0), month: '2026-11', data: {},
  submitterEmail: null, submitterName: null, source: 'api', createdAt: new Date(0), paymentIntentId: null, idempotency: null,
  ...over,
});
const answer = (over: Record<string, number> = {}) =>
  ({ seq: 0, form_ok: 1, idem_held: 1, listeners_ok: 1, webhooks: 0, quota_ok: 1, ...over });

describe('submissions stored together: which and what', () => {
  it('groups only rows that cannot fail a unique key (no payment intent, no idempotency key left to insert)', () => {
    expect(groupable(row())).to.equal(true);
    expect(groupable(row({ idempotency: { key: 'k', requestHash: 'h', responseBody: {}, claimToken: 'tok' } }))).to.equal(true);
    expect(groupable(row({ idempotency: { key: 'k', requestHash: 'h', responseBody: {} } }))).to.equal(false);
    expect(groupable(row({ paymentIntentId: 'pi_1' }))).to.equal(false);
  });

  it('answers as a statement of its own would, in the same order of checks', () => {
    expect(groupOutcome(row(), answer({ form_ok: 0, idem_held: 0, quota_ok: 0 }))).to.deep.equal({ kind: 'form_changed' });
    expect(groupOutcome(row(), answer({ idem_held: 0, listeners_ok: 0, quota_ok: 0 }))).to.deep.equal({ kind: 'idempotency_lost' });
    expect(groupOutcome(row(), answer({ listeners_ok: 0, webhooks: 2, quota_ok: 0 }))).to.deep.equal({ kind: 'listeners_unknown', webhooks: 2 });
  });

  it('leaves a row the quota did not count to be stored alone', () => {
    expect(groupOutcome(row(), answer({ quota_ok: 0 }))).to.equal(null);
  });

  it('names the deliveries of the matching webhooks (unused spare ids left out) and every sync', () => {
    const fanned = row({
      fanout: {
        event: { id: 'evt_1', payload: '{}' }, deliveryIds: ['dlv_1', 'dlv_2', 'dlv_3'],
        syncs: [{ id: 'crm_1', index: 0, integrationId: 'int_1', provider: 'hubspot' }],
      },
    });
    expect(groupOutcome(fanned, answer({ webhooks: 2 }))).to.deep.equal(
      { kind: 'created', deliveryIds: ['dlv_1', 'dlv_2'], syncIds: ['crm_1'], webhooks: 2 });
    expect(groupOutcome(row(), answer())).to.deep.equal({ kind: 'created', deliveryIds: [], syncIds: [], webhooks: 0 });
  });
});

describe('submissions stored together: a failed statement', () => {
  it('is tried again row by row only when a row may have caused it', () => {
    expect(causedByAnItem({ code: '23505' })).to.equal(true); // unique violation
    expect(causedByAnItem({ code: '22P02' })).to.equal(true); // a value refused
    expect(causedByAnItem({ code: '57014' })).to.equal(false); // statement timeout
    expect(causedByAnItem({ code: '55P03' })).to.equal(false); // lock timeout
    expect(causedByAnItem(new Error('Connection terminated unexpectedly'))).to.equal(false);
    expect(causedByAnItem(undefined)).to.equal(false);
  });
});
