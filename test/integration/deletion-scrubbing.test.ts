import { expect } from 'chai';
import { eventIdForSubmission } from '../../src/domain/webhooks/events';
import { call, createPublishedForm, createTenant, fieldInput, type TestTenant } from '../support/harness';
import { keepSideRows } from '../support/deliveries';
import { startStack, type Stack } from '../support/worker-stack';

describe('deleting a submission scrubs its values from ended deliveries', () => {
  let stack: Stack;
  let tenant: TestTenant;
  before(async () => {
    stack = await startStack([]);
    tenant = await createTenant(stack.api.app);
  });
  after(async () => stack.close());
  const em = () => stack.api.app.orm.em.fork();

  it('empties data, rawData, submitterEmail and submitterName of ended deliveries; a pending one still carries them', async () => {
    const form = await createPublishedForm(stack.api.url, tenant.key, [fieldInput('fld_secret', 'text', 'Secret')]);
    for (const name of ['ended', 'pending']) {
      const res = await call(stack.api.url, 'POST', '/v1/webhooks', {
        key: tenant.key, body: { name, url: `http://127.0.0.1:9/${name}`, events: ['submission.created'], formId: form.id },
      });
      expect(res.status).to.equal(201);
    }
    const created = await call(stack.api.url, 'POST', `/v1/forms/${form.id}/submissions`, {
      key: tenant.key, body: { data: { fld_secret: 'the value' }, submitterEmail: 'who@example.com', submitterName: 'Who' },
    });
    const submissionId = created.body.submission.id;
    // The storing statement wrote both deliveries.
    const deliveryIds = (await em().execute(`select id from webhook_deliveries where event_id = ? order by id`, [eventIdForSubmission(submissionId)]))
      .map((r: any) => r.id as string);
    expect(deliveryIds).to.have.length(2);
    const [ended, pending] = deliveryIds;
    await em().execute(`update webhook_deliveries set status = 'succeeded' where id = ?`, [ended]);
    await keepSideRows((sql, params) => em().execute(sql, params), 'id = ?', [ended]);

    expect((await call(stack.api.url, 'DELETE', `/v1/submissions/${submissionId}`, { key: tenant.key })).status).to.equal(204);

    const payloadOf = async (id: string) => {
      const [row] = await em().execute('select payload from webhook_deliveries where id = ?', [id]);
      return JSON.parse(row.payload);
    };
    const scrubbed = await payloadOf(ended);
    expect(scrubbed.data.submission).to.deep.include({ id: submissionId, data: {}, rawData: {}, submitterEmail: null, submitterName: null });
    expect(JSON.stringify(scrubbed)).to.not.include('the value').and.not.include('who@example.com');
    const kept = await payloadOf(pending);
    expect(kept.data.submission.rawData).to.deep.equal({ fld_secret: 'the value' });
    expect(kept.data.submission.submitterEmail).to.equal('who@example.com');
  });
});
