import { expect } from 'chai';
import { execFile } from 'node:child_process';
import * as path from 'node:path';
import { openapiPath } from '../support/openapi-webhooks';

const REDOCLY = path.join(path.dirname(openapiPath()), 'node_modules', '.bin', 'redocly');

describe('openapi.yaml under @redocly/cli lint', () => {
  it('has no errors', async function () {
    this.timeout(60_000);
    const { code, output } = await new Promise<{ code: number; output: string }>((resolve) => {
      execFile(REDOCLY, ['lint', openapiPath(), '--format=stylish'], {
        // Offline and quiet: no telemetry, no update check.
        env: { ...process.env, REDOCLY_TELEMETRY: 'off', REDOCLY_SUPPRESS_UPDATE_NOTICE: 'true', NO_COLOR: '1' },
        timeout: 50_000,
      }, (err, stdout, stderr) => resolve({ code: err ? Number((err as any).code ?? 1) : 0, output: `${stdout}${stderr}` }));
    });
    // stylish lines read `  <line>:<col>  <severity>  <rule>  <message>`
    const errors = output.split('\n').filter((line) => /^\s*\d+:\d+\s+error\s/.test(line));
    expect(errors, output).to.deep.equal([]);
    expect(code, output).to.equal(0);
  });
});
