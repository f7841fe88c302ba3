import { expect } from 'chai';
import { randomBytes } from 'node:crypto';
import { loadConfig } from '../../config';
import { prepareDatabase } from '../../src/app';
import { reencryptSecrets } from '../../src/domain/secrets/reencrypt';
import { verifySignature } from '../../src/domain/webhooks/signing';
import { unseal } from '../../src/lib/crypto';
import { dropDatabase, sideDatabaseUrl } from '../support/databases';
import { startReceiver, type Receiver } from '../support/fakes/receiver';
import { call, createPublishedForm, createTenant, fieldInput as field, startTestApp, type TestApp } from '../support/harness';

/** Rotating ENCRYPTION_KEY: the old key keeps opening old secrets until `secrets reencrypt` ran. */
describe('encryption key rotation', function () {
  this.timeout(30_000);
  // A database of its own: re-encryption rewrites every sealed value it holds.
  const databaseUrl = sideDatabaseUrl('rotation');
  const [oldKey, newKey] = [randomBytes(32), randomBytes(32)];
  const b64 = (key: Buffer) => key.toString('base64');
  let receiver: Receiver;
  let app: TestApp | null = null;

  before(async () => {
    await prepareDatabase(loadConfig({ ...process.env, DATABASE_URL: databaseUrl }));
    receiver = await startReceiver();
  });
  after(async () => {
    await app?.close();
    await receiver.close();
    await dropDatabase(databaseUrl);
  });

  async function restart(env: Record<string, string>): Promise<TestApp> {
    await app?.close();
    app = await startTestApp({ DATABASE_URL: databaseUrl, ...env });
    return app;
  }

  it('opens old secrets with ENCRYPTION_KEYS_PREVIOUS, re-seals them with the new key, then needs only it', async () => {
    let t = await restart({ ENCRYPTION_KEY: b64(oldKey) });
    const tenant = await createTenant(t.app);
    const form = await createPublishedForm(t.url, tenant.key, [field('fld_nm', 'name', 'Patient', { config: { sensitive: true } })], {
      settings: { integrations: [{ type: 'hubspot', accessToken: 'pat-rotation', fieldMap: { fld_nm: 'firstname' } }] },
    });
    const hook = await call(t.url, 'POST', '/v1/webhooks', { key: tenant.key, body: { name: 'r', url: receiver.url, events: ['submission.created'] } });
    const { id: webhookId, secret } = hook.body.webhook;
    expect((await call(t.url, 'POST', `/v1/forms/${form.id}/submissions`, {
      key: tenant.key, body: { data: { fld_nm: { format: 'full', fullName: 'Grace Hopper' } } },
    })).status).to.equal(201);

    const ping = async (server: TestApp) => {
      const before = receiver.deliveries.length;
      const res = await call(server.url, 'POST', `/v1/webhooks/${webhookId}/test`, { key: tenant.key });
      const delivery = receiver.deliveries[before];
      return { res, valid: !!delivery && verifySignature({
        secret, signature: delivery.headers['x-service-signature'], timestamp: delivery.headers['x-service-timestamp'], rawBody: delivery.rawBody,
      }) };
    };

    // New key current, old key still accepted for what it sealed.
    t = await restart({ ENCRYPTION_KEY: b64(newKey), ENCRYPTION_KEYS_PREVIOUS: b64(oldKey) });
    const during = await ping(t);
    expect(during.res.body.delivered).to.equal(true);
    expect(during.valid).to.equal(true);

    const counts = await reencryptSecrets(t.app.orm.em.fork(), { current: newKey, all: [newKey, oldKey] });
    expect(counts).to.deep.equal({ webhooks: 1, forms: 1, submissions: 1, unopenable: [] });
    expect(await reencryptSecrets(t.app.orm.em.fork(), { current: newKey, all: [newKey, oldKey] }))
      .to.deep.equal({ webhooks: 0, forms: 0, submissions: 0, unopenable: [] });

    const conn = t.app.orm.em.getConnection();
    const [form$] = await conn.execute('select settings from forms where id = ?', [form.id]);
    expect(unseal(form$.settings.integrations[0].accessToken, newKey)).to.equal('pat-rotation');
    const [submission] = await conn.execute('select data from submissions where form_id = ?', [form.id]);
    expect(JSON.parse(unseal(submission.data.fld_nm.$sealed, newKey))).to.deep.equal({ format: 'full', fullName: 'Grace Hopper' });

    // The old key is gone: everything still opens.
    t = await restart({ ENCRYPTION_KEY: b64(newKey) });
    const after = await ping(t);
    expect(after.res.body.delivered).to.equal(true);
    expect(after.valid).to.equal(true);
  });

  it('re-seals the rotated-out webhook secret as well, so the previous signature survives the old key', async () => {
    let t = await restart({ ENCRYPTION_KEY: b64(oldKey) });
    const tenant = await createTenant(t.app);
    const hook = await call(t.url, 'POST', '/v1/webhooks', { key: tenant.key, body: { name: 'r', url: receiver.url, events: ['submission.created'] } });
    const { id: webhookId, secret: first } = hook.body.webhook;
    const rotated = await call(t.url, 'POST', `/v1/webhooks/${webhookId}/rotate-secret`, { key: tenant.key, body: { graceSeconds: 3600 } });
    expect(rotated.status).to.equal(200);

    t = await restart({ ENCRYPTION_KEY: b64(newKey), ENCRYPTION_KEYS_PREVIOUS: b64(oldKey) });
    expect(await reencryptSecrets(t.app.orm.em.fork(), { current: newKey, all: [newKey, oldKey] }))
      .to.deep.equal({ webhooks: 2, forms: 0, submissions: 0, unopenable: [] });

    t = await restart({ ENCRYPTION_KEY: b64(newKey) });
    const before = receiver.deliveries.length;
    expect((await call(t.url, 'POST', `/v1/webhooks/${webhookId}/test`, { key: tenant.key })).body.delivered).to.equal(true);
    const delivery = receiver.deliveries[before];
    const check = (secret: string, header: string) => verifySignature({
      secret, signature: delivery.headers[header], timestamp: delivery.headers['x-service-timestamp'], rawBody: delivery.rawBody,
    });
    expect(check(rotated.body.webhook.secret, 'x-service-signature')).to.equal(true);
    expect(check(first, 'x-service-signature-previous')).to.equal(true);
  });
});
