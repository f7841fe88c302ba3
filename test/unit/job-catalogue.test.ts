import { expect } from 'chai';
import { JOB_NAMES, QUEUE_NAMES, jobIds, jobOptions } from '../../src/queues/catalogue';
import { PROCESSORS } from '../../workers/processors';
import { assertEveryJobHasAProcessor } from '../../workers/runtime';

describe('job catalogue', () => {
  it('has a processor for every job of every queue', () => {
    expect(() => assertEveryJobHasAProcessor(QUEUE_NAMES)).to.not.throw();
    for (const queue of QUEUE_NAMES) {
      expect(Object.keys(PROCESSORS[queue]).sort()).to.deep.equal([...JOB_NAMES[queue]].sort());
    }
  });

  it('refuses to start when a job has no processor', () => {
    const { fanout: _dropped, ...withoutFanout } = PROCESSORS.submissions as Record<string, unknown>;
    expect(() => assertEveryJobHasAProcessor(['submissions'], { submissions: withoutFanout as any }))
      .to.throw('job submissions/fanout has no processor');
  });

  it('derives job ids from database ids, without the ":" BullMQ forbids', () => {
    for (const id of [jobIds.fanout('sub_abc'), jobIds.deliver('dlv_x'), jobIds.deliverGroup('grp_x'), jobIds.crmSync('crm_y'), jobIds.fanoutDeletion('sub_abc')]) {
      expect(id).to.not.include(':');
    }
    expect(jobIds.fanout('sub_abc')).to.equal(jobIds.fanout('sub_abc'));
    expect(jobIds.fanoutDeletion('sub_abc')).to.not.equal(jobIds.fanout('sub_abc'));
    expect(jobIds.deliver('dlv_x')).to.equal(jobIds.deliver('dlv_x'));
  });

  it('runs a delivery group once, whatever the retry schedule, and keeps it only when it failed', () => {
    const data = { group: 'grp_x', deliveries: [{ deliveryId: 'dlv_x' }] };
    expect(jobOptions('webhooks', 'deliver-group', data, [1000, 5000])).to.deep.equal({ jobId: 'deliver-group-grp_x', attempts: 1, removeOnComplete: true });
    expect(jobOptions('webhooks', 'deliver', { deliveryId: 'dlv_x' }, [1000, 5000])).to.deep.equal({ jobId: 'deliver-dlv_x', attempts: 3 });
  });
});
