import { expect } from 'chai';
import { execFile } from 'node:child_process';
import path from 'node:path';
import { promisify } from 'node:util';
import type { Em } from '../../src/db/orm';
import { walkDeliverySideRows, type SideRowsDrift } from '../../src/domain/maintenance/delivery-side-rows';
import { failDelivery, findDeliveryForAttempt, recordDeliveryAttempt } from '../../src/domain/webhooks/store';
import { attemptResult, expectSideRowsExact, startDeliveriesStage, type DeliveriesStage } from '../support/deliveries';
import { call, type TestApp, type TestTenant } from '../support/harness';
import { DIST_ROOT } from '../support/processes';

const execFileAsync = promisify(execFile);

/**
 * `deliveries check` and `deliveries repair` (deploy/README.md, "Backups and restore"): deliveries
 * changed by hand without their owed or failed rows (src/README.md, "Webhook deliveries and HOT
 * updates"), and side rows left beside deliveries that ended or are gone, are found and made what
 * each delivery says, on a database of its own; and a repair racing a worker that changes the delivery keeps what the worker wrote.
 */
describe('deliveries check and repair', function () {
  this.timeout(120_000);
  let stage: DeliveriesStage;
  let api: TestApp;
  let tenant: TestTenant;
  let formId: string;
  let formHook: string;
  let orgHook: string;
  const em = (): Em => api.app.orm.em.fork();

  before(async () => {
    stage = await startDeliveriesStage('sidefix');
    ({ api, tenant, formId } = stage);
    [formHook, orgHook] = [await stage.createWebhook(true), await stage.createWebhook(false)];
  });
  after(async () => {
    await stage?.close();
  });

  /** `n` submissions, each a pending delivery to both webhooks; answers the new deliveries of `webhookId`, oldest first. */
  async function newDeliveries(n: number, webhookId: string): Promise<string[]> {
    const [{ before }] = await api.query('select coalesce(max(created_at), now()) as before from webhook_deliveries');
    for (let i = 0; i < n; i++) {
      const res = await call(api.url, 'POST', `/v1/forms/${formId}/submissions`, { key: tenant.key, body: { data: { fld_email: 'a@example.com' } } });
      expect(res.status, res.text).to.equal(201);
    }
    const rows = await api.query(`select id from webhook_deliveries where webhook_id = ? and created_at > ? order by created_at, id`, [webhookId, before]);
    expect(rows).to.have.length(n);
    return rows.map((r: { id: string }) => r.id);
  }

  async function cli(...args: string[]): Promise<{ code: number; lines: any[]; stderr: string }> {
    try {
      const { stdout, stderr } = await execFileAsync(process.execPath, [path.join(DIST_ROOT, 'src/cli/index.js'), ...args],
        { env: { ...process.env, DATABASE_URL: stage.databaseUrl, NODE_NO_WARNINGS: '1' } });
      return { code: 0, lines: stdout.trim().split('\n').map((l) => JSON.parse(l)), stderr };
    } catch (err: any) {
      return { code: err.code, lines: err.stdout?.trim() ? err.stdout.trim().split('\n').map((l: string) => JSON.parse(l)) : [], stderr: err.stderr };
    }
  }

  const expectExact = (after: string) => expectSideRowsExact(api.query, after);

  /** A delivery's times as the command prints them: ISO 8601 UTC to the microsecond. */
  async function timesOf(id: string): Promise<{ created: string; due: string }> {
    const [row] = await api.query(`select to_char(created_at at time zone 'utc', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') as created,
      to_char(coalesce(next_attempt_at, created_at) at time zone 'utc', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') as due from webhook_deliveries where id = ?`, [id]);
    return row;
  }

  const byDelivery = (a: { deliveryId?: string }, b: { deliveryId?: string }) => String(a.deliveryId).localeCompare(String(b.deliveryId));

  it('finds every kind of drift a hand edit leaves, one line each, repairs it, and a clean database checks clean', async () => {
    const ids = await newDeliveries(5, formHook);
    const orgIds = (await api.query(`select id from webhook_deliveries where webhook_id = ? order by created_at, id`, [orgHook]))
      .map((r: { id: string }) => r.id);
    await expectExact('the submissions');
    const clean = await cli('deliveries', 'check');
    expect(clean.code, clean.stderr).to.equal(0);
    expect(clean.lines).to.deep.equal([{ deliveries: 10, drifted: 0 }]);

    const t = await Promise.all([...ids, ...orgIds].map(timesOf));
    const [tf, to] = [t.slice(0, 5), t.slice(5)];
    // by hand, in SQL, as an operator might: the deliveries' rows without their side rows, and side rows alone
    await api.query(`update webhook_deliveries set status = 'succeeded', next_attempt_at = null where id = ?`, [ids[0]]);
    const [{ later }] = await api.query(`update webhook_delivery_owed set next_attempt_at = next_attempt_at + interval '1 hour' where delivery_id = ?
      returning to_char(next_attempt_at at time zone 'utc', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') as later`, [ids[1]]);
    await api.query(`update webhook_deliveries set status = 'failed', next_attempt_at = null where id = ?`, [ids[2]]);
    await api.query(`delete from webhook_delivery_owed where delivery_id = ?`, [ids[2]]);
    await api.query(`insert into webhook_delivery_failed (delivery_id, organization_id, webhook_id, created_at)
      select id, organization_id, webhook_id, created_at from webhook_deliveries where id = ?`, [ids[3]]);
    await api.query(`insert into webhook_delivery_failed (delivery_id, organization_id, webhook_id, created_at)
      select id, organization_id, webhook_id, created_at from webhook_deliveries where id = ?`, [ids[4]]);
    await api.query(`delete from webhook_deliveries where id = ?`, [ids[4]]);
    await api.query(`delete from webhook_delivery_owed where delivery_id = ?`, [orgIds[0]]);
    await api.query(`delete from webhook_deliveries where id = ?`, [orgIds[1]]);
    await api.query(`update webhook_deliveries set status = 'failed', next_attempt_at = null where id = ?`, [orgIds[2]]);
    await api.query(`delete from webhook_delivery_owed where delivery_id = ?`, [orgIds[2]]);
    await api.query(`insert into webhook_delivery_failed (delivery_id, organization_id, webhook_id, created_at)
      select id, organization_id, webhook_id, created_at from webhook_deliveries where id = ?`, [orgIds[2]]);
    await api.query(`delete from webhook_deliveries where id = ?`, [orgIds[2]]);

    const formDrifts = [
      { deliveryId: ids[0], webhookId: formHook, status: 'succeeded', owed: tf[0].due, failed: null, expected: { owed: null, failed: null } },
      { deliveryId: ids[1], webhookId: formHook, status: 'pending', owed: later, failed: null, expected: { owed: tf[1].due, failed: null } },
      { deliveryId: ids[2], webhookId: formHook, status: 'failed', owed: null, failed: null, expected: { owed: null, failed: tf[2].created } },
      { deliveryId: ids[3], webhookId: formHook, status: 'pending', owed: tf[3].due, failed: tf[3].created, expected: { owed: tf[3].due, failed: null } },
      { deliveryId: ids[4], webhookId: formHook, status: null, owed: tf[4].due, failed: tf[4].created, expected: { owed: null, failed: null } },
    ];
    const orgDrifts = [
      { deliveryId: orgIds[0], webhookId: orgHook, status: 'pending', owed: null, failed: null, expected: { owed: to[0].due, failed: null } },
      { deliveryId: orgIds[1], webhookId: orgHook, status: null, owed: to[1].due, failed: null, expected: { owed: null, failed: null } },
      { deliveryId: orgIds[2], webhookId: orgHook, status: null, owed: null, failed: to[2].created, expected: { owed: null, failed: null } },
    ];

    // page by page: deliveries of one submission share their created_at, so pages of two split ties by id
    for (const webhookId of [undefined, formHook, orgHook]) {
      const paged: SideRowsDrift[] = [];
      const summary = await walkDeliverySideRows(em(), { repair: false, webhookId, pageSize: 2 }, (d) => { paged.push(d); });
      const expected = webhookId === formHook ? formDrifts : webhookId === orgHook ? orgDrifts : [...formDrifts, ...orgDrifts];
      expect(paged.sort(byDelivery), `pages of 2, webhook ${webhookId}`).to.deep.equal([...expected].sort(byDelivery));
      expect(summary.deliveries).to.equal(webhookId === formHook ? 4 : webhookId === orgHook ? 3 : 7);
    }

    const drift = await cli('deliveries', 'check');
    expect(drift.code, drift.stderr).to.equal(1);
    expect(drift.lines.slice(0, -1).sort(byDelivery)).to.deep.equal([...formDrifts, ...orgDrifts].sort(byDelivery));
    expect(drift.lines[drift.lines.length - 1]).to.deep.equal({ deliveries: 7, drifted: 8 });

    // --webhook: that webhook's deliveries and side rows only
    const orgCheck = await cli('deliveries', 'check', '--webhook', orgHook);
    expect(orgCheck.code, orgCheck.stderr).to.equal(1);
    expect(orgCheck.lines).to.deep.equal([...orgDrifts, { deliveries: 3, drifted: 3 }]);
    const orgRepair = await cli('deliveries', 'repair', '--webhook', orgHook);
    expect(orgRepair.code, orgRepair.stderr).to.equal(0);
    expect(orgRepair.lines).to.deep.equal([...orgDrifts, { deliveries: 3, repaired: 3, locked: 0 }]);
    const [orgClean, formStill] = await Promise.all([cli('deliveries', 'check', '--webhook', orgHook), cli('deliveries', 'check', '--webhook', formHook)]);
    expect(orgClean.lines).to.deep.equal([{ deliveries: 3, drifted: 0 }]);
    expect(orgClean.code).to.equal(0);
    expect(formStill.code).to.equal(1);
    expect(formStill.lines).to.deep.equal([...formDrifts, { deliveries: 4, drifted: 5 }]);

    const repaired = await cli('deliveries', 'repair');
    expect(repaired.code, repaired.stderr).to.equal(0);
    expect(repaired.lines).to.deep.equal([...formDrifts, { deliveries: 7, repaired: 5, locked: 0 }]);
    await expectExact('deliveries repair');
    const after = await cli('deliveries', 'check');
    expect(after.code, after.stderr).to.equal(0);
    expect(after.lines).to.deep.equal([{ deliveries: 7, drifted: 0 }]);

    const unknown = await cli('deliveries', 'check', '--webhook', 'wh_nope');
    expect(unknown.code).to.equal(1);
    expect(unknown.stderr).to.include('no webhook wh_nope');
  });

  it('keeps what a worker recorded between the repair\'s read and its write', async () => {
    for (const outcome of ['succeeded', 'failed', 'retry'] as const) {
      const [id] = await newDeliveries(1, formHook);
      await api.query(`delete from webhook_delivery_owed where delivery_id = ?`, [id]);
      const seen: SideRowsDrift[] = [];
      // The repair reads the delivery pending without its owed row; a worker records an attempt before the repair writes.
      await walkDeliverySideRows(em(), { repair: true, webhookId: formHook }, async (drift) => {
        seen.push(drift);
        if (drift.deliveryId !== id) return;
        const row = await findDeliveryForAttempt(em(), id);
        const { result, decision } = attemptResult(outcome);
        await recordDeliveryAttempt(em(), row!, result, decision, new Date());
      });
      expect(seen.map((d) => [d.deliveryId, d.status, d.owed]), outcome).to.deep.equal([[id, 'pending', null]]);
      await expectExact(`a ${outcome} attempt recorded during the repair`);
      const [{ status }] = await api.query('select status from webhook_deliveries where id = ?', [id]);
      expect(status, outcome).to.equal(outcome === 'retry' ? 'pending' : outcome);
    }
  });

  it('waits out a delivery another transaction holds, and keeps what that transaction wrote', async () => {
    const [id] = await newDeliveries(1, formHook);
    await api.query(`delete from webhook_delivery_owed where delivery_id = ?`, [id]);
    let release!: () => void;
    const released = new Promise<void>((resolve) => { release = resolve; });
    let locked!: () => void;
    const holding = new Promise<void>((resolve) => { locked = resolve; });
    // A worker fails the delivery (its webhook disabled) in a transaction still open while the repair runs.
    const worker = em().transactional(async (tx) => {
      await failDelivery(tx, id, 'Webhook is disabled');
      locked();
      await released;
    });
    await holding;
    let settled = false;
    const repair = walkDeliverySideRows(em(), { repair: true, webhookId: formHook }, () => {}).finally(() => { settled = true; });
    await new Promise((resolve) => setTimeout(resolve, 500));
    const settledWhileLocked = settled;
    release();
    await worker;
    const summary = await repair;
    await expectExact('a repair that waited for a worker');
    const [{ status }] = await api.query('select status from webhook_deliveries where id = ?', [id]);
    expect(status).to.equal('failed');
    expect(settledWhileLocked, 'the repair waits for the delivery locked').to.equal(false);
    expect(summary).to.deep.include({ drifted: 1, locked: 0 });
  });
});
