import { expect } from 'chai';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PutObjectCommand, S3Client } from '@aws-sdk/client-s3';
import { fanoutDeletion } from '../../workers/processors/submissions';
import { call, createPublishedForm, createTenant, fieldInput as field, startTestApp, type TestApp, type TestTenant } from '../support/harness';
import { announce, download, fileServiceEnv, jpegBytes, putBytes } from '../support/files';
import { startS3Server, type OwnS3 } from '../support/s3-server';

const MB = 1024 * 1024;

describe('files (s3 driver, against s3rver on loopback)', () => {
  let s3: OwnS3;
  let t: TestApp;
  let tenant: TestTenant;
  let form: any;
  let dir: string;

  before(async () => {
    s3 = await startS3Server();
    dir = await mkdtemp(join(tmpdir(), 'files-s3-test-'));
    t = await startTestApp(await fileServiceEnv(dir, s3.env));
    tenant = await createTenant(t.app);
    form = await createPublishedForm(t.url, tenant.key, [
      field('fld_photo', 'file-upload', 'Photo', { config: { accept: ['image/*'], maxSize: 25 * MB } }),
    ]);
  });
  after(async () => {
    await t?.close();
    await s3?.stop();
    await rm(dir, { recursive: true, force: true });
  });

  const submit = (data: unknown) => call(t.url, 'POST', `/v1/forms/${form.id}/submissions`, { key: tenant.key, body: { data } });
  const target = async (size: number, type = 'image/jpeg') => {
    const res = await announce(t.url, tenant.key, form.id, { fieldId: 'fld_photo', name: 'p.jpg', type, size });
    expect(res.status, res.text).to.equal(201);
    return res.body;
  };
  const linkOf = async (submissionId: string) =>
    (await call(t.url, 'GET', `/v1/submissions/${submissionId}`, { key: tenant.key })).body.submission.rawData.fld_photo.url as string;

  it('uploads straight to the store with a presigned PUT; the submission checks it there, and its link streams the same bytes', async () => {
    const bytes = jpegBytes(3 * MB);
    const upload = await target(bytes.length);
    expect(upload.url).to.match(new RegExp(`^${s3.endpoint}/${s3.bucket}/${upload.uploadId}\\?`));
    expect(upload.url).to.contain('X-Amz-SignedHeaders=content-length%3Bcontent-type%3Bhost');
    expect((await putBytes(upload, bytes)).status).to.equal(200);
    const res = await submit({ fld_photo: { uploadId: upload.uploadId } });
    expect(res.status, res.text).to.equal(201);
    const [row] = await t.query('select status, etag from uploads where id = ?', [upload.uploadId]);
    expect(row.status).to.equal('uploaded');
    expect(row.etag).to.be.a('string');
    const got = await download(await linkOf(res.body.submission.id));
    expect(got.status).to.equal(200);
    expect(got.headers.get('content-disposition')).to.equal(`attachment; filename="p.jpg"; filename*=UTF-8''p.jpg`);
    expect(got.headers.get('x-content-type-options')).to.equal('nosniff');
    expect(got.bytes.equals(bytes)).to.equal(true);
  });

  it('refuses bytes never sent, a size other than declared, and content that is not the declared type', async () => {
    const never = await target(1000);
    const neverRes = await submit({ fld_photo: { uploadId: never.uploadId } });
    expect(neverRes.status).to.equal(400);
    expect(neverRes.body.details).to.deep.equal([{ field: 'fld_photo', message: 'The file has not been uploaded yet' }]);

    // AWS S3 refuses a body of another length than the signed Content-Length; s3rver stores it, and
    // the submission's HEAD finds the size it lied about.
    const lying = await target(1000);
    expect((await putBytes(lying, jpegBytes(2000))).status).to.equal(200);
    const lyingRes = await submit({ fld_photo: { uploadId: lying.uploadId } });
    expect(lyingRes.status).to.equal(400);
    expect(lyingRes.body.details).to.deep.equal([{ field: 'fld_photo', message: 'The uploaded file is 2000 bytes, not the 1000 declared' }]);

    const text = await target(1000);
    expect((await putBytes(text, Buffer.from('y'.repeat(1000)))).status).to.equal(200);
    const textRes = await submit({ fld_photo: { uploadId: text.uploadId } });
    expect(textRes.status).to.equal(400);
    expect(textRes.body.details).to.deep.equal([{ field: 'fld_photo', message: 'The content of p.jpg is not image/jpeg' }]);
  });

  it('never serves an object replaced after it was checked, and deletes it with its submission', async () => {
    const bytes = jpegBytes(5000);
    const upload = await target(bytes.length);
    await putBytes(upload, bytes);
    const res = await submit({ fld_photo: { uploadId: upload.uploadId } });
    expect(res.status, res.text).to.equal(201);
    const link = await linkOf(res.body.submission.id);
    expect((await download(link)).status).to.equal(200);

    const client = new S3Client({
      region: 'us-east-1', endpoint: s3.endpoint, forcePathStyle: true, credentials: { accessKeyId: 'S3RVER', secretAccessKey: 'S3RVER' },
    });
    await client.send(new PutObjectCommand({ Bucket: s3.bucket, Key: upload.uploadId, Body: Buffer.from('<script>alert(1)</script>') }));
    expect((await download(link)).status).to.equal(404);
    client.destroy();

    const submissionId = res.body.submission.id;
    expect((await call(t.url, 'DELETE', `/v1/submissions/${submissionId}`, { key: tenant.key })).status).to.equal(204);
    expect(await t.app.files.store.stat(upload.uploadId)).to.not.equal(null);
    const [outbox] = await t.query(`select id::text as id from outbox where payload->>'submissionId' = ?`, [submissionId]);
    await fanoutDeletion(t.app, { data: { submissionId, outboxId: outbox.id } } as any);
    expect(await t.app.files.store.stat(upload.uploadId)).to.equal(null);
    expect(await t.query('select 1 from uploads where id = ?', [upload.uploadId])).to.deep.equal([]);
  });
});
