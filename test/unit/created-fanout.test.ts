import { expect } from 'chai';
import type { CachedForm } from '../../src/domain/forms/form-cache';
import type { Field } from '../../src/domain/forms/types';
import { createdFanout } from '../../src/domain/submissions/fanout';
import type { SubmissionRow } from '../../src/domain/submissions/storing-statement';
import { buildSubmissionEvent } from '../../src/domain/webhooks/events';

const fields = [{ id: 'fld_email', label: 'Email' }, { id: 'fld_topic', label: 'Topic' }] as Field[];
const hubspot = (id: string, extra: Record<string, unknown> = {}) => ({ id, type: 'hubspot', accessToken: 'sealed', fieldMap: { fld_email: 'email' }, ...extra });
const form = {
  id: 'form_a', organizationId: 'org_a', title: 'Contact', description: null, status: 'published', updatedAt: new Date(),
  settings: { integrations: [hubspot('int_1'), hubspot('int_off', { enabled: false }), hubspot('int_2')] },
  structure: { pages: [], fields },
} as unknown as CachedForm;
const row = (): SubmissionRow => ({
  id: 'sub_0VbkzQqSGoiI4aDL4Ly2', organizationId: 'org_a', formId: 'form_a', formUpdatedAt: form.updatedAt, month: '2026-11',
  data: { fld_email: 'ada@example.com', fld_topic: 'returns' }, submitterEmail: 'ada@example.com', submitterName: null,
  source: 'api', createdAt: new Date('2026-11-23T01:02:03.456Z'), claims: [], idempotency: null,
});

describe('the created submission\'s fan-out, decided before its statement', () => {
  it('builds no event when no webhook is expected, but a sync per enabled CRM integration', () => {
    const fanout = createdFanout(form, row(), 0);
    expect(fanout.event).to.equal(null);
    expect(fanout.deliveryIds).to.deep.equal([]);
    expect(fanout.syncs.map(({ index, integrationId, provider }) => ({ index, integrationId, provider }))).to.deep.equal([
      { index: 0, integrationId: 'int_1', provider: 'hubspot' }, { index: 2, integrationId: 'int_2', provider: 'hubspot' },
    ]);
    for (const sync of fanout.syncs) expect(sync.id).to.match(/^crm_[0-9A-Za-z]{20}$/);
  });

  it('builds the event the fan-out worker builds, and a distinct delivery id per expected webhook', () => {
    const r = row();
    const fanout = createdFanout(form, r, 3);
    const event = buildSubmissionEvent({ id: form.id, title: form.title }, {
      id: r.id, formId: r.formId, createdAt: r.createdAt, data: r.data, submitterEmail: r.submitterEmail, submitterName: r.submitterName,
    }, fields);
    expect(fanout.event).to.deep.equal({ id: event.id, payload: JSON.stringify(event) });
    expect(JSON.parse(fanout.event!.payload).data.submission.data).to.deep.equal({ Email: 'ada@example.com', Topic: 'returns' });
    expect(new Set(fanout.deliveryIds).size).to.equal(3);
    for (const id of fanout.deliveryIds) expect(id).to.match(/^dlv_[0-9A-Za-z]{20}$/);
  });

  it('keeps a row\'s sync ids when it is decided again for more webhooks', () => {
    const r = row();
    r.fanout = createdFanout(form, r, 0);
    const again = createdFanout(form, r, 2);
    expect(again.syncs).to.equal(r.fanout.syncs);
    expect(again.deliveryIds).to.have.length(2);
  });
});
