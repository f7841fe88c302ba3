import { expect } from 'chai';
import { annotate, inSpan, jobTraceMetadata, tracingEnabled, tracingRequested, withoutLiterals } from '../../src/lib/tracing';

describe('tracing', () => {
  it('is requested by an OTLP endpoint (all signals or traces only), unless the SDK is disabled', () => {
    expect(tracingRequested({})).to.equal(false);
    expect(tracingRequested({ OTEL_SERVICE_NAME: 'x', OTEL_TRACES_SAMPLER: 'always_on' })).to.equal(false);
    expect(tracingRequested({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318' })).to.equal(true);
    expect(tracingRequested({ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://collector:4318/v1/traces' })).to.equal(true);
    expect(tracingRequested({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318', OTEL_SDK_DISABLED: 'true' })).to.equal(false);
  });

  it('takes every quoted literal out of a statement, escaped quotes and E-strings included', () => {
    expect(withoutLiterals(`select * from api_keys where key_hash = 'ab''c' and id = E'k\\'y' and n = $1`))
      .to.equal(`select * from api_keys where key_hash = '?' and id = '?' and n = $1`);
    expect(withoutLiterals(`update s set data = '{"fld":"private"}'::jsonb where id = 'sub_1'`))
      .to.equal(`update s set data = '?'::jsonb where id = '?'`);
    expect(withoutLiterals('select 1')).to.equal('select 1');
  });

  it('without tracing, runs the work as it is and adds no job metadata', async () => {
    expect(tracingEnabled()).to.equal(false);
    annotate({ 'form_service.submission.id': 'sub_1' });
    expect(await inSpan('work', {}, async () => 42)).to.equal(42);
    let failure: unknown;
    await inSpan('work', {}, async () => { throw new Error('boom'); }).catch((err) => { failure = err; });
    expect((failure as Error).message).to.equal('boom');
    expect(jobTraceMetadata()).to.equal(undefined);
  });
});
