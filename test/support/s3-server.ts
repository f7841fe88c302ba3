import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { freePort, waitUntil } from './processes';

/** An S3-compatible server (the npm package s3rver) of a test's own, as its own process on loopback. */
export interface OwnS3 {
  endpoint: string;
  bucket: string;
  /** The env that points the service at it. */
  env: Record<string, string>;
  stop(): Promise<void>;
}

/** `corsOrigins`: the bucket lets pages of these origins PUT to presigned URLs (as a browser upload needs). */
export async function startS3Server(bucket = 'form-files', opts: { corsOrigins?: string[] } = {}): Promise<OwnS3> {
  const port = await freePort();
  const directory = await mkdtemp(join(tmpdir(), 's3rver-'));
  const configs: string[] = [];
  if (opts.corsOrigins?.length) {
    const cors = join(await mkdtemp(join(tmpdir(), 's3rver-cors-')), 'cors.xml');
    const origins = opts.corsOrigins.map((origin) => `<AllowedOrigin>${origin}</AllowedOrigin>`).join('');
    await writeFile(cors, `<CORSConfiguration><CORSRule>${origins}<AllowedMethod>PUT</AllowedMethod><AllowedMethod>GET</AllowedMethod>`
      + '<AllowedHeader>*</AllowedHeader><MaxAgeSeconds>600</MaxAgeSeconds></CORSRule></CORSConfiguration>');
    configs.push(cors);
  }
  const child: ChildProcess = spawn(process.execPath, [
    require.resolve('s3rver/bin/s3rver.js'), '--address', '127.0.0.1', '--port', String(port), '--directory', directory,
    '--configure-bucket', bucket, ...configs, '--silent',
  ], { stdio: 'ignore' });
  const endpoint = `http://127.0.0.1:${port}`;
  await waitUntil(async () => (await fetch(`${endpoint}/${bucket}`)).status === 200, 15_000, 100);
  return {
    endpoint, bucket,
    // s3rver's default credentials.
    env: {
      FILE_STORAGE: 's3', S3_ENDPOINT: endpoint, S3_BUCKET: bucket, S3_REGION: 'us-east-1',
      S3_ACCESS_KEY_ID: 'S3RVER', S3_SECRET_ACCESS_KEY: 'S3RVER', S3_FORCE_PATH_STYLE: 'true',
    },
    async stop() {
      if (child.exitCode === null && child.signalCode === null) {
        const exited = new Promise((resolve) => child.once('exit', resolve));
        child.kill('SIGTERM');
        await exited;
      }
      await rm(directory, { recursive: true, force: true });
      for (const config of configs) await rm(dirname(config), { recursive: true, force: true });
    },
  };
}
