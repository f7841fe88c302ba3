import { execFile } from 'node:child_process';
import path from 'node:path';
import { promisify } from 'node:util';
import { expect } from 'chai';
import { createLogger, jobLogger } from '../../src/lib/logger';
import { call, createPublishedForm, createTenant, startTestApp, type TestApp, type TestTenant, fieldInput as field } from '../support/harness';

interface LogLine {
  msg: string;
  [key: string]: unknown;
}

/** Every line the service writes, as text and parsed. */
function captureLogs() {
  const raw: string[] = [];
  return {
    stream: { write: (line: string) => { raw.push(line); } },
    text: () => raw.join(''),
    lines: (): LogLine[] => raw.map((line) => JSON.parse(line)),
  };
}


describe('structured logs', () => {
  const logs = captureLogs();
  let t: TestApp;
  let tenant: TestTenant;
  let form: any;
  const hubspotToken = 'pat-na1-LOGTEST-hubspot-token-0f3a';
  const values = { name: 'Ada-LOGTEST-name-7781', secret: 'LOGTEST-sensitive-value-4410', email: 'ada.logtest.9911@example.com' };
  const injectedSecret = 'whsec_LOGTEST_injected_5d2c9e';
  let webhookSecret: string;

  before(async () => {
    t = await startTestApp({}, { logger: createLogger('trace', logs.stream) });
    tenant = await createTenant(t.app);
    form = await createPublishedForm(t.url, tenant.key, [
      field('fld_name', 'text', 'Name'),
      field('fld_secret', 'text', 'Secret', { order: 1, config: { sensitive: true } }),
      field('fld_email', 'email', 'Email', { order: 2 }),
    ], { settings: { integrations: [{ type: 'hubspot', accessToken: hubspotToken, fieldMap: { fld_email: 'email' } }] } });

    const data = { fld_name: values.name, fld_secret: values.secret, fld_email: values.email };
    const submitted = await call(t.url, 'POST', `/v1/forms/${form.id}/submissions`, {
      key: tenant.key, body: { data, submitterEmail: values.email }, headers: { 'X-Request-Id': 'req-logtest-submit' },
    });
    expect(submitted.status, submitted.text).to.equal(201);
    const viaHeader = await call(t.url, 'GET', `/v1/submissions/${submitted.body.submission.id}`, { headers: { 'X-Api-Key': tenant.key } });
    expect(viaHeader.status).to.equal(200);
    const publicSubmission = await call(t.url, 'POST', `/public/forms/${form.id}`, { body: { values: data } });
    expect(publicSubmission.status).to.equal(200);
    const notJson = await call(t.url, 'POST', `/v1/forms/${form.id}/submissions`, { key: tenant.key, body: `{"data": {"fld_name": "${values.name}"` });
    expect(notJson.status).to.equal(400);

    const webhook = await call(t.url, 'POST', '/v1/webhooks', {
      key: tenant.key, body: { name: 'log test', url: 'http://127.0.0.1:9/hook', events: ['submission.created'] },
    });
    expect(webhook.status, webhook.text).to.equal(201);
    webhookSecret = webhook.body.webhook.secret;
    const refused = await call(t.url, 'POST', '/v1/webhooks', {
      key: tenant.key, body: { name: 'log test', url: 'http://127.0.0.1:9/hook', events: ['submission.created'], secret: injectedSecret },
    });
    expect(refused.status).to.equal(400);

    expect((await call(t.url, 'GET', `/v1/forms?apiKey=${tenant.key}`, { key: tenant.key })).status).to.equal(200);
    expect((await call(t.url, 'GET', '/v1/forms', { key: 'fs_live_LOGTEST_wrong_key_000000000000' })).status).to.equal(401);
    expect((await call(t.url, 'GET', '/no/such/path')).status).to.equal(404);
  });
  after(async () => t.close());

  it('never writes API keys, submitted values, webhook secrets or CRM tokens', () => {
    const text = logs.text();
    expect(logs.lines().length).to.be.greaterThan(8);
    const secrets = [
      tenant.key, tenant.key.slice(-16), ...Object.values(values), hubspotToken, webhookSecret, injectedSecret,
      'fs_live_LOGTEST_wrong_key',
    ];
    for (const secret of secrets) expect(text, `log contains ${secret}`).to.not.include(secret);
  });

  it('writes one line per request with method, route pattern, status, duration, request id and organization', () => {
    const requests = logs.lines().filter((line) => line.msg === 'request');
    const submit = requests.find((line) => line.reqId === 'req-logtest-submit');
    expect(submit).to.deep.include({
      method: 'POST', route: '/v1/forms/:formId/submissions', status: 201, organizationId: tenant.organizationId, level: 30,
    });
    expect(submit!.durationMs).to.be.a('number').at.least(0);
    const summary = requests.map((line) => `${line.method} ${line.route} ${line.status}`);
    expect(summary).to.include.members([
      'GET /v1/submissions/:submissionId 200', 'POST /public/forms/:formId 200', 'POST /v1/forms/:formId/submissions 400',
      'POST /v1/webhooks 201', 'POST /v1/webhooks 400', 'GET /v1/forms 200', 'GET /v1/forms 401', 'GET unmatched 404',
    ]);
    for (const line of requests) expect(line.reqId).to.be.a('string').that.is.not.empty;
    const authenticated = requests.filter((line) => String(line.route).startsWith('/v1/') && line.status !== 401);
    for (const line of authenticated) expect(line.organizationId).to.equal(tenant.organizationId);
    // A public submission is logged under the organization that owns the form.
    const publicSubmit = requests.find((line) => line.route === '/public/forms/:formId' && line.status === 200);
    expect(publicSubmit!.organizationId).to.equal(tenant.organizationId);
  });

  it('names the job and the attempt in job logs, without the job\'s data', () => {
    const jobLogs = captureLogs();
    const job = { id: 'deliver-dlv_1', name: 'deliver', queueName: 'webhooks', attemptsMade: 2, data: { secret: injectedSecret } };
    jobLogger(createLogger('info', jobLogs.stream), job).info('delivering');
    const [line] = jobLogs.lines();
    expect(line).to.deep.include({ msg: 'delivering', queue: 'webhooks', job: 'deliver', jobId: 'deliver-dlv_1', attempt: 3 });
    expect(jobLogs.text()).to.not.include(injectedSecret);
  });

  it('writes stdout lines in blocks, not one write per line, and loses none at exit', async () => {
    // 200 request-sized lines, each logged in its own turn of the event loop, counting fs.write calls.
    const script = `
      const fs = require('node:fs');
      let writes = 0;
      const write = fs.write;
      fs.write = function (...args) { writes++; return write.apply(this, args); };
      const { createLogger } = require(${JSON.stringify(path.resolve(__dirname, '../../src/lib/logger.js'))});
      const logger = createLogger('info');
      let n = 0;
      (function next() {
        if (n === 200) return process.stderr.write(String(writes)); // then exits with lines still buffered
        logger.info({ reqId: 'r' + n++, method: 'POST', route: '/v1/forms/:formId/submissions', status: 201, durationMs: 3 }, 'request');
        setImmediate(next);
      })();`;
    const { stdout, stderr } = await promisify(execFile)(process.execPath, ['-e', script]);
    expect(stdout.trim().split('\n').map((line) => JSON.parse(line).reqId)).to.deep.equal(Array.from({ length: 200 }, (_, i) => `r${i}`));
    expect(Number(stderr)).to.be.within(1, 20);
  });

  it('redacts credentials and values a log call passes by mistake, at the top level or one level down', () => {
    const leaks = captureLogs();
    const logger = createLogger('info', leaks.stream);
    logger.info({ secret: injectedSecret, token: webhookSecret, data: values }, 'top level');
    logger.info({ webhook: { secret: injectedSecret }, request: { headers: { authorization: `Bearer ${tenant.key}` }, body: values } }, 'nested');
    expect(leaks.lines()).to.have.length(2);
    for (const secret of [injectedSecret, webhookSecret, tenant.key, ...Object.values(values)]) expect(leaks.text()).to.not.include(secret);
  });
});
