import { randomBytes } from 'node:crypto';
import { spawn } from 'node:child_process';
import path from 'node:path';
import { expect } from 'chai';
import { hashApiKey } from '../../src/domain/auth/api-keys';
import { startOtlpReceiver, SPAN_KIND, type OtlpReceiver, type ReceivedSpan } from '../support/fakes/otlp-receiver';
import { startFakeHubspot, type FakeHubspot } from '../support/fakes/hubspot';
import { startReceiver, type Receiver } from '../support/fakes/receiver';
import { call, createPublishedForm, createTenant, startTestApp, type TestApp } from '../support/harness';
import { deleteQueueKeys } from '../support/databases';
import { DIST_ROOT, freePort, spawnApi, type ServiceProcess } from '../support/processes';
import { FAST_RETRIES, freshQueuePrefix, spawnWorker, waitUntil, type WorkerChild } from '../support/worker-stack';

const FIELDS = [
  { id: 'fld_email', type: 'email', label: 'Email', required: true, config: {}, validationRules: {}, order: 0 },
  { id: 'fld_note', type: 'text', label: 'Note', required: false, config: {}, validationRules: {}, order: 1 },
];

const hex = (bytes: number) => randomBytes(bytes).toString('hex');

function tracingEnv(receiver: OtlpReceiver, prefix: string): Record<string, string> {
  return {
    QUEUE_PREFIX: prefix, WEBHOOK_RETRY_DELAYS_MS: FAST_RETRIES,
    OTEL_EXPORTER_OTLP_ENDPOINT: receiver.endpoint, OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
    OTEL_SERVICE_NAME: 'form-service-under-test', OTEL_BSP_SCHEDULE_DELAY: '100',
  };
}

describe('tracing (OpenTelemetry, one trace per submission)', function () {
  this.timeout(60_000);
  let setupApp: TestApp;
  let otlp: OtlpReceiver;
  let webhookReceiver: Receiver;
  let api: ServiceProcess & { url: string };
  let worker: WorkerChild;
  let crmWorker: WorkerChild;
  let hubspot: FakeHubspot;
  const prefix = freshQueuePrefix();

  before(async () => {
    otlp = await startOtlpReceiver();
    // The first attempt fails, so the trace also holds a retry.
    webhookReceiver = await startReceiver({ respond: (attempt) => ({ status: attempt === 1 ? 500 : 200 }) });
    setupApp = await startTestApp({ QUEUE_PREFIX: prefix });
    api = await spawnApi(tracingEnv(otlp, prefix));
    worker = spawnWorker('webhooks', { ...tracingEnv(otlp, prefix), LOG_LEVEL: 'info' });
    hubspot = await startFakeHubspot();
    crmWorker = spawnWorker('crm', { ...tracingEnv(otlp, prefix), HUBSPOT_API_BASE: hubspot.url, LOG_LEVEL: 'info' });
    await waitUntil('the webhook worker to start', async () => worker.output().includes('workers started'), 30_000);
    await waitUntil('the CRM worker to start', async () => crmWorker.output().includes('workers started'), 30_000);
  });
  after(async () => {
    await api?.stop();
    await worker?.stop();
    await crmWorker?.stop();
    await hubspot?.close();
    await webhookReceiver?.close();
    await otlp?.close();
    await setupApp?.close();
    await deleteQueueKeys(prefix);
  });

  it('gives each of concurrent submissions, whose jobs are added together, a delivery in its own trace', async () => {
    const tenant = await createTenant(setupApp.app);
    const form = await createPublishedForm(setupApp.url, tenant.key, FIELDS);
    const receiver = await startReceiver();
    try {
      const hook = await call(setupApp.url, 'POST', '/v1/webhooks', { key: tenant.key, body: { name: 'hook', url: receiver.url, events: ['submission.created'] } });
      expect(hook.status).to.equal(201);
      const traces = Array.from({ length: 6 }, () => hex(16));
      const submitted = await Promise.all(traces.map((traceId) => call(api.url, 'POST', `/v1/forms/${form.id}/submissions`, {
        key: tenant.key, headers: { traceparent: `00-${traceId}-${hex(8)}-01` }, body: { data: { fld_email: `c-${hex(4)}@example.com` } },
      })));
      expect(submitted.map((r) => r.status)).to.deep.equal(traces.map(() => 201));
      await receiver.waitFor(traces.length, 15_000);
      const traceOfSubmission = new Map(submitted.map((r, i) => [r.body.submission.id, traces[i]]));
      for (const received of receiver.deliveries) {
        const submissionId = JSON.parse(received.rawBody).data.submission.id;
        expect(received.headers.traceparent.split('-')[1], submissionId).to.equal(traceOfSubmission.get(submissionId));
      }
    } finally {
      await receiver.close();
    }
  });

  it('follows a CRM sync in the submission\'s trace, sending traceparent but never the access token', async () => {
    const tenant = await createTenant(setupApp.app);
    const token = `pat-${hex(12)}`;
    const form = await createPublishedForm(setupApp.url, tenant.key, FIELDS, {
      settings: { integrations: [{ type: 'hubspot', accessToken: token, fieldMap: { fld_email: 'email' } }] },
    });
    const traceId = hex(16);
    const submitted = await call(api.url, 'POST', `/v1/forms/${form.id}/submissions`, {
      key: tenant.key, headers: { traceparent: `00-${traceId}-${hex(8)}-01` }, body: { data: { fld_email: `crm-${hex(4)}@example.com` } },
    });
    expect(submitted.status).to.equal(201);
    const submissionId: string = submitted.body.submission.id;

    const sync = (await waitUntil('the sync span to be exported', async () => otlp.spans.find((s) => s.traceId === traceId && s.name === 'crm sync attempt'), 15_000))!;
    expect(sync.resource['form_service.worker.queues']).to.deep.equal(['crm']);
    expect(sync.attributes).to.include({
      'form_service.organization.id': tenant.organizationId, 'form_service.form.id': form.id, 'form_service.submission.id': submissionId,
      'form_service.crm_sync.attempt': 1, 'http.response.status_code': 200,
    });
    const call_ = hubspot.requests.find((r) => r.authorization === `Bearer ${token}`)!;
    expect(call_.traceparent?.split('-')[1]).to.equal(traceId);
    const upsert = otlp.spans.find((s) => s.traceId === traceId && s.kind === SPAN_KIND.client && s.parentSpanId === sync.spanId && s.name === 'POST')!;
    expect(call_.traceparent?.split('-')[2]).to.equal(upsert.spanId);
    expect(otlp.rawBodies.some((body) => body.includes(token))).to.equal(false);
  });

  it('follows a submission from the caller through the storing statement and the queue to each delivery attempt, exporting no secret', async () => {
    const tenant = await createTenant(setupApp.app);
    const form = await createPublishedForm(setupApp.url, tenant.key, FIELDS);
    const hook = await call(setupApp.url, 'POST', '/v1/webhooks', {
      key: tenant.key, body: { name: 'hook', url: `${webhookReceiver.url}/hook?token=receiver-${hex(8)}`, events: ['submission.created'] },
    });
    expect(hook.status).to.equal(201);
    const webhookSecret: string = hook.body.webhook.secret;
    const receiverToken = new URL(hook.body.webhook.url).searchParams.get('token')!;

    const callerTraceId = hex(16);
    const callerSpanId = hex(8);
    const email = `traced-${hex(6)}@example.com`;
    const note = `private note ${hex(8)}`;
    const submitted = await call(api.url, 'POST', `/v1/forms/${form.id}/submissions`, {
      key: tenant.key,
      headers: { traceparent: `00-${callerTraceId}-${callerSpanId}-01` },
      body: { data: { fld_email: email, fld_note: note } },
    });
    expect(submitted.status).to.equal(201);
    const submissionId: string = submitted.body.submission.id;

    await webhookReceiver.waitFor(2, 15_000);
    const [delivery] = await setupApp.app.orm.em.fork().execute(
      'select id, job_group from webhook_deliveries where organization_id = ? and webhook_id = ?', [tenant.organizationId, hook.body.webhook.id],
    );
    await waitUntil('the delivery to succeed', async () => {
      const [row] = await setupApp.app.orm.em.fork().execute('select status from webhook_deliveries where id = ?', [delivery.id]);
      return row.status === 'succeeded';
    }, 10_000);
    // SIGTERM flushes what each process still buffers.
    expect(await api.stop()).to.equal(0);
    expect(await worker.stop()).to.equal(0);

    const trace = otlp.spans.filter((s) => s.traceId === callerTraceId);
    const byId = new Map(trace.map((s) => [s.spanId, s]));
    const named = (predicate: (s: ReceivedSpan) => boolean) => trace.filter(predicate);

    // The request continues the caller's trace; every other span of it hangs from a span of the trace.
    const [server] = named((s) => s.kind === SPAN_KIND.server);
    expect(server, 'the HTTP server span').to.not.equal(undefined);
    expect(server.parentSpanId).to.equal(callerSpanId);
    expect(server.name).to.equal('POST /v1/forms/:formId/submissions');
    expect(server.resource).to.include({ 'service.name': 'form-service-under-test', 'form_service.process.role': 'api' });
    expect(server.attributes).to.include({
      'form_service.organization.id': tenant.organizationId, 'form_service.form.id': form.id, 'form_service.submission.id': submissionId,
    });
    for (const span of trace.filter((s) => s !== server)) {
      expect(byId.has(span.parentSpanId), `parent of ${span.name}`).to.equal(true);
    }

    // The storing statement, in the API process.
    const dbSystem = (s: ReceivedSpan) => s.attributes['db.system.name'] ?? s.attributes['db.system'];
    const statements = named((s) => s.resource['form_service.process.role'] === 'api' && dbSystem(s) === 'postgresql');
    expect(statements.map((s) => String(s.attributes['db.query.text'] ?? s.attributes['db.statement'])).join('\n'))
      .to.match(/insert into submissions/i);
    expect(named((s) => dbSystem(s) === 'redis').length, 'Redis calls').to.be.greaterThan(0);

    // The enqueue (into its storing group's job, which holds the first attempt), and the delivery's
    // processing in the worker as a child of it, once per attempt.
    const [enqueue] = named((s) => s.name === 'enqueue webhooks.deliver');
    expect(enqueue.kind).to.equal(SPAN_KIND.producer);
    expect(enqueue.attributes).to.include({ 'bullmq.job.id': `deliver-group-${delivery.job_group}`, 'form_service.delivery.id': delivery.id });
    const processing = named((s) => s.kind === SPAN_KIND.consumer && s.resource['form_service.process.role'] === 'worker');
    expect(processing).to.have.length(2);
    const underEnqueue = (span: ReceivedSpan): boolean => {
      for (let at: ReceivedSpan | undefined = span; at; at = byId.get(at.parentSpanId)) if (at === enqueue) return true;
      return false;
    };
    for (const job of processing) expect(underEnqueue(job), 'the job continues its enqueue').to.equal(true);

    // Each delivery attempt, with its attributes, as a child of its job's processing.
    const attempts = named((s) => s.name === 'webhook delivery attempt')
      .sort((a, b) => Number(a.attributes['form_service.delivery.attempt']) - Number(b.attributes['form_service.delivery.attempt']));
    expect(attempts.map((a) => [a.attributes['form_service.delivery.attempt'], a.attributes['http.response.status_code']]))
      .to.deep.equal([[1, 500], [2, 200]]);
    for (const attempt of attempts) {
      expect(attempt.attributes).to.include({ 'form_service.delivery.id': delivery.id, 'form_service.organization.id': tenant.organizationId });
      expect(processing).to.include(byId.get(attempt.parentSpanId));
    }

    // Each POST to the receiver carried the trace, from the client span of its attempt.
    const clientSpans = named((s) => s.kind === SPAN_KIND.client && dbSystem(s) === undefined
      && attempts.includes(byId.get(s.parentSpanId)!));
    expect(clientSpans).to.have.length(2);
    for (const received of webhookReceiver.deliveries) {
      const [, traceId, parentId] = received.headers.traceparent.split('-');
      expect(traceId).to.equal(callerTraceId);
      expect(clientSpans.map((s) => s.spanId)).to.include(parentId);
    }

    // Nothing exported names a credential or a submitted value.
    const exported = otlp.rawBodies.join('\n');
    for (const secret of [tenant.key, hashApiKey(tenant.key), webhookSecret, receiverToken, email, note]) {
      expect(exported.includes(secret), `exported spans contain ${secret}`).to.equal(false);
    }
  });

});

describe('tracing left off', function () {
  this.timeout(30_000);

  /**
   * Starts the API entry in a process of its own and lists, once it answers, the tracing modules it
   * loaded; then it serves one request and stops with SIGTERM, as a deployment would stop it.
   */
  async function tracingModulesLoaded(env: Record<string, string>): Promise<string[]> {
    const port = await freePort();
    const script = `
      require(${JSON.stringify(path.join(DIST_ROOT, 'src/api.js'))});
      const poll = async () => {
        const up = await fetch('http://127.0.0.1:${port}/healthz').then((r) => r.ok, () => false);
        if (!up) return setTimeout(poll, 100);
        const loaded = Object.keys(require.cache).filter((file) => /[\\\\/](@opentelemetry|bullmq-otel)[\\\\/]/.test(file));
        process.stdout.write('LOADED ' + JSON.stringify(loaded) + '\\n');
        await fetch('http://127.0.0.1:${port}/v1/forms').catch(() => undefined);
        process.kill(process.pid, 'SIGTERM');
      };
      poll();`;
    const clean = Object.fromEntries(Object.entries(process.env).filter(([name]) => !name.startsWith('OTEL_'))) as Record<string, string>;
    const child = spawn(process.execPath, ['-e', script], {
      env: { ...clean, LOG_LEVEL: 'warn', HOST: '127.0.0.1', PORT: String(port), ...env }, stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    child.stdout.on('data', (c) => { output += c; });
    child.stderr.on('data', (c) => { output += c; });
    await new Promise((resolve) => child.once('exit', resolve));
    const line = output.split('\n').find((l) => l.startsWith('LOADED '));
    if (!line) throw new Error(`the API did not start:\n${output}`);
    return JSON.parse(line.slice('LOADED '.length));
  }

  // prom-client always loads @opentelemetry/api (for exemplars): a no-op facade without an SDK.
  const beyondTheApi = (files: string[]) => files.filter((file) => !/[\\/]@opentelemetry[\\/]api[\\/]/.test(file));

  it('loads no OpenTelemetry SDK, instrumentation or context manager without OTEL_EXPORTER_OTLP_ENDPOINT, and does with it', async () => {
    expect(beyondTheApi(await tracingModulesLoaded({}))).to.deep.equal([]);
    const otlp = await startOtlpReceiver();
    try {
      const loaded = await tracingModulesLoaded({ OTEL_EXPORTER_OTLP_ENDPOINT: otlp.endpoint });
      expect(loaded.some((file) => file.includes('sdk-node'))).to.equal(true);
      // The request's span went out on shutdown, in the default protocol.
      expect(otlp.contentTypes).to.include('application/x-protobuf');
    } finally {
      await otlp.close();
    }
  });
});
