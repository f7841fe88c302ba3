import { expect } from 'chai';
import { access, mkdtemp, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { call, createPublishedForm, createTenant, fieldInput as field, startTestApp, type TestApp, type TestTenant } from '../support/harness';
import { attemptDelivery } from '../../src/domain/webhooks/deliver';
import { sweepUploads } from '../../src/domain/files/uploads';
import { markFilesOfSubmissionsBefore } from '../../src/domain/files/store';
import type { FileStore } from '../../src/domain/files/file-store';
import { fanoutDeletion } from '../../workers/processors/submissions';
import { maintenance } from '../../workers/processors/usage';
import { startReceiver, type Receiver } from '../support/fakes/receiver';
import { feedSettled } from '../support/change-feed';
import { announce, download, fileServiceEnv, jpegBytes, pdfBytes, putBytes, uploadFile } from '../support/files';

const MB = 1024 * 1024;

describe('files (local driver): uploads, claims and signed links', () => {
  let t: TestApp;
  let tenant: TestTenant;
  let form: any;
  let dir: string;
  let receiver: Receiver;

  const fields = [
    field('fld_name', 'text', 'Name', { order: 0 }),
    field('fld_photo', 'file-upload', 'Photo', { order: 1, config: { accept: ['image/*'], maxSize: 25 * MB } }),
    field('fld_docs', 'file-upload', 'Documents', { order: 2, config: { accept: ['.pdf', 'image/png'], maxFiles: 3 } }),
  ];

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'files-test-'));
    receiver = await startReceiver();
    t = await startTestApp(await fileServiceEnv(dir, { WEBHOOK_ALLOW_PRIVATE_TARGETS: 'true' }));
    tenant = await createTenant(t.app);
    form = await createPublishedForm(t.url, tenant.key, fields);
  });
  after(async () => {
    await t.close();
    await receiver.close();
    await rm(dir, { recursive: true, force: true });
  });

  const submit = (data: unknown, formId = form.id) => call(t.url, 'POST', `/v1/forms/${formId}/submissions`, { key: tenant.key, body: { data } });
  const read = (id: string) => call(t.url, 'GET', `/v1/submissions/${id}`, { key: tenant.key });

  for (const size of [3 * MB, 20 * MB]) {
    it(`stores a ${size / MB} MB file and its link downloads the same bytes`, async () => {
      const bytes = jpegBytes(size);
      const uploadId = await uploadFile(t.url, tenant.key, form.id, 'fld_photo', bytes, { name: 'Fotó "1".jpg' });
      const res = await submit({ fld_photo: { uploadId } });
      expect(res.status, res.text).to.equal(201);
      const { submission } = (await read(res.body.submission.id)).body;
      const shown = submission.rawData.fld_photo;
      expect(shown).to.include({ name: 'Fotó "1".jpg', type: 'image/jpeg', size });
      expect(shown.url).to.match(new RegExp(`^${t.url}/files/${uploadId}\\?expires=\\d+&signature=`));
      expect(submission.data.Photo).to.deep.include({ name: 'Fotó "1".jpg', size });
      const got = await download(shown.url);
      expect(got.status).to.equal(200);
      expect(got.headers.get('content-type')).to.equal('image/jpeg');
      expect(got.headers.get('content-length')).to.equal(String(size));
      expect(got.headers.get('x-content-type-options')).to.equal('nosniff');
      expect(got.headers.get('content-disposition')).to.equal(`attachment; filename="Fot_ _1_.jpg"; filename*=UTF-8''Fot%C3%B3%20%221%22.jpg`);
      expect(got.bytes.equals(bytes)).to.equal(true);
      // The stored value carries what reads show, so no read looks the upload up.
      const [row] = await t.query('select data from submissions where id = ?', [submission.id]);
      expect(row.data.fld_photo).to.deep.equal({ uploadId, name: 'Fotó "1".jpg', type: 'image/jpeg', size });
    });
  }

  it('refuses a declared size or type the field does not accept (400 on that field, public 422)', async () => {
    const tooBig = await announce(t.url, tenant.key, form.id, { fieldId: 'fld_docs', name: 'big.pdf', type: 'application/pdf', size: 11 * MB });
    expect(tooBig.status).to.equal(400);
    expect(tooBig.body.error).to.equal('validation_error');
    expect(tooBig.body.details[0].field).to.equal('fld_docs');
    expect(tooBig.body.details[0].message).to.contain('larger than the 10.0 MB limit');
    const wrongType = await announce(t.url, tenant.key, form.id, { fieldId: 'fld_photo', name: 'a.pdf', type: 'application/pdf', size: 10 });
    expect(wrongType.status).to.equal(400);
    expect(wrongType.body.details[0].field).to.equal('fld_photo');
    const publicRes = await call(t.url, 'POST', `/public/forms/${form.id}/uploads`, {
      body: { fieldId: 'fld_photo', name: 'a.pdf', type: 'application/pdf', size: 10 },
    });
    expect(publicRes.status).to.equal(422);
    expect(publicRes.body.success).to.equal(false);
    expect(publicRes.body.errors).to.have.key('fld_photo');
    const notFileField = await announce(t.url, tenant.key, form.id, { fieldId: 'fld_name', name: 'a.jpg', type: 'image/jpeg', size: 10 });
    expect(notFileField.status).to.equal(404);
    const publicOk = await call(t.url, 'POST', `/public/forms/${form.id}/uploads`, {
      body: { fieldId: 'fld_photo', name: 'a.jpg', type: 'image/jpeg', size: 10 },
    });
    expect(publicOk.status, publicOk.text).to.equal(201);
    expect(publicOk.body).to.include({ method: 'PUT' });
    expect(publicOk.body.uploadId).to.match(/^upl_/);
    expect(publicOk.body.headers).to.deep.equal({ 'Content-Type': 'image/jpeg' });
  });

  it('refuses bytes that are more or fewer than declared, or that are not the declared type', async () => {
    const bytes = jpegBytes(1000);
    const target = (await announce(t.url, tenant.key, form.id, { fieldId: 'fld_photo', name: 'p.jpg', type: 'image/jpeg', size: 1000 })).body;
    expect((await putBytes(target, Buffer.concat([bytes, bytes]))).status).to.equal(413);
    expect((await putBytes(target, bytes.subarray(0, 999))).status).to.equal(400);
    // Bytes never sent: the submission is refused on that field.
    const never = await submit({ fld_photo: { uploadId: target.uploadId } });
    expect(never.status).to.equal(400);
    expect(never.body.details).to.deep.equal([{ field: 'fld_photo', message: 'The file has not been uploaded yet' }]);
    // A text declared as a JPEG: its first bytes are no JPEG.
    const text = Buffer.from('x'.repeat(1000));
    expect((await putBytes(target, text)).status).to.equal(422);
    expect((await putBytes(target, bytes)).status).to.equal(200);
    // A second PUT after success is refused.
    expect((await putBytes(target, bytes)).status).to.equal(409);
    // Nothing of the refused attempts is left behind.
    expect(await readdir(join(dir, '.tmp'))).to.deep.equal([]);
  });

  it('refuses an upload used twice, even by two submissions at the same time: exactly one is stored', async () => {
    const uploadId = await uploadFile(t.url, tenant.key, form.id, 'fld_photo', jpegBytes(2000));
    const [a, b] = await Promise.all([submit({ fld_photo: { uploadId } }), submit({ fld_photo: { uploadId } })]);
    expect([a.status, b.status].sort()).to.deep.equal([201, 400]);
    const refused = a.status === 400 ? a : b;
    expect(refused.body.details).to.deep.equal([{ field: 'fld_photo', message: 'This upload is already used by another submission' }]);
    const again = await submit({ fld_photo: { uploadId } });
    expect(again.status).to.equal(400);
    const [claims] = await t.query('select count(*)::int as n from upload_claims where upload_id = ?', [uploadId]);
    expect(claims.n).to.equal(1);
  });

  it('refuses an upload made for another field or another form', async () => {
    const other = await createPublishedForm(t.url, tenant.key, fields);
    const uploadId = await uploadFile(t.url, tenant.key, other.id, 'fld_photo', jpegBytes(500));
    const otherForm = await submit({ fld_photo: { uploadId } });
    expect(otherForm.status).to.equal(400);
    expect(otherForm.body.details[0]).to.deep.equal({ field: 'fld_photo', message: 'Upload not found for this field' });
    const pngId = await uploadFile(t.url, tenant.key, form.id, 'fld_docs', pdfBytes(600), { name: 'a.pdf', type: 'application/pdf' });
    const otherField = await submit({ fld_photo: { uploadId: pngId } });
    expect(otherField.status).to.equal(400);
    expect(otherField.body.details[0].field).to.equal('fld_photo');
  });

  it('takes a list of uploads up to maxFiles', async () => {
    const ids = [];
    for (let i = 0; i < 4; i++) ids.push(await uploadFile(t.url, tenant.key, form.id, 'fld_docs', pdfBytes(300 + i), { name: `d${i}.pdf`, type: 'application/pdf' }));
    const tooMany = await submit({ fld_docs: ids.map((uploadId) => ({ uploadId })) });
    expect(tooMany.status).to.equal(400);
    expect(tooMany.body.details[0]).to.deep.equal({ field: 'fld_docs', message: 'Takes at most 3 files' });
    const res = await submit({ fld_docs: ids.slice(0, 3).map((uploadId) => ({ uploadId })) });
    expect(res.status, res.text).to.equal(201);
    const shown = (await read(res.body.submission.id)).body.submission.rawData.fld_docs;
    expect(shown.map((f: any) => f.name)).to.deep.equal(['d0.pdf', 'd1.pdf', 'd2.pdf']);
    expect(shown.map((f: any) => f.size)).to.deep.equal([300, 301, 302]);
  });

  it('answers 403 to a tampered or expired link', async () => {
    const bytes = jpegBytes(700);
    const uploadId = await uploadFile(t.url, tenant.key, form.id, 'fld_photo', bytes);
    const res = await submit({ fld_photo: { uploadId } });
    const { url } = (await read(res.body.submission.id)).body.submission.rawData.fld_photo;
    const parsed = new URL(url);
    const expires = Number(parsed.searchParams.get('expires'));
    const tampered = new URL(url);
    tampered.searchParams.set('expires', String(expires + 3600));
    expect((await download(tampered.toString())).status).to.equal(403);
    const otherSignature = new URL(url);
    otherSignature.searchParams.set('signature', parsed.searchParams.get('signature')!.replace(/^./, (c) => (c === 'A' ? 'B' : 'A')));
    expect((await download(otherSignature.toString())).status).to.equal(403);
    const { url: expired } = t.app.files.links.url('download', uploadId, -1);
    const refused = await download(expired);
    expect(refused.status).to.equal(403);
    expect(JSON.parse(refused.bytes.toString())).to.deep.equal({ error: 'forbidden', message: 'This link has expired' });
    expect((await download(url)).status).to.equal(200);
  });

  it('stores batch items with uploads as if each was posted alone', async () => {
    const first = await uploadFile(t.url, tenant.key, form.id, 'fld_photo', jpegBytes(800));
    const second = await uploadFile(t.url, tenant.key, form.id, 'fld_photo', jpegBytes(900));
    const res = await call(t.url, 'POST', `/v1/forms/${form.id}/submissions/batch`, {
      key: tenant.key,
      body: { submissions: [{ data: { fld_photo: { uploadId: first } } }, { data: { fld_photo: { uploadId: second } } }, { data: { fld_photo: { uploadId: first } } }] },
    });
    expect(res.status, res.text).to.equal(200);
    expect(res.body.results.map((r: any) => r.status)).to.deep.equal([201, 201, 400]);
    expect(res.body.results[2].error.details).to.deep.equal([{ field: 'fld_photo', message: 'This upload is already used by another submission' }]);
    const stored = (await read(res.body.results[1].submission.id)).body.submission.rawData.fld_photo;
    expect(stored).to.include({ size: 900 });
  });

  it('shows files as {name, type, size, url} in the list, the export (CSV: the link; NDJSON: the object) and the change feed', async () => {
    const readsForm = await createPublishedForm(t.url, tenant.key, fields);
    const bytes = jpegBytes(1500);
    const uploadId = await uploadFile(t.url, tenant.key, readsForm.id, 'fld_photo', bytes, { name: 'r.jpg' });
    const res = await submit({ fld_name: 'Reads', fld_photo: { uploadId } }, readsForm.id);
    expect(res.status, res.text).to.equal(201);
    const expectLink = async (value: any) => {
      expect(value).to.have.keys('name', 'type', 'size', 'url');
      expect(value).to.include({ name: 'r.jpg', type: 'image/jpeg', size: 1500 });
      expect((await download(value.url)).bytes.equals(bytes)).to.equal(true);
    };

    const list = await call(t.url, 'GET', `/v1/forms/${readsForm.id}/submissions`, { key: tenant.key });
    await expectLink(list.body.submissions[0].data.fld_photo);

    const ndjson = await call(t.url, 'GET', `/v1/forms/${readsForm.id}/submissions/export?format=ndjson`, { key: tenant.key });
    const line = JSON.parse(ndjson.text.trim());
    await expectLink(line.rawData.fld_photo);
    await expectLink(line.data.Photo);

    const csv = await call(t.url, 'GET', `/v1/forms/${readsForm.id}/submissions/export?format=csv`, { key: tenant.key });
    const [header, record] = csv.text.trim().split('\r\n');
    expect(header).to.equal('id,createdAt,submitterEmail,submitterName,formVersion,Name,Photo,Documents');
    const cell = record.split(',')[6];
    expect(cell).to.match(new RegExp(`^${t.url}/files/${uploadId}\\?expires=`));
    expect((await download(cell)).bytes.equals(bytes)).to.equal(true);

    await feedSettled();
    const feed = await call(t.url, 'GET', `/v1/submissions/changes?formId=${readsForm.id}`, { key: tenant.key });
    await expectLink(feed.body.changes[0].submission.data.fld_photo);
  });

  it('sends webhook payloads with a link made at each attempt, the stored payload keeping no link', async () => {
    const hooked = await createPublishedForm(t.url, tenant.key, fields);
    const hook = await call(t.url, 'POST', '/v1/webhooks', {
      key: tenant.key, body: { name: 'files', url: receiver.url, events: ['submission.created'], formId: hooked.id },
    });
    expect(hook.status, hook.text).to.equal(201);
    const bytes = jpegBytes(1200);
    const uploadId = await uploadFile(t.url, tenant.key, hooked.id, 'fld_photo', bytes);
    const res = await submit({ fld_photo: { uploadId } }, hooked.id);
    expect(res.status, res.text).to.equal(201);
    const [delivery] = await t.query('select id, payload from webhook_deliveries where webhook_id = ?', [hook.body.webhook.id]);
    expect(JSON.parse(delivery.payload).data.submission.rawData.fld_photo).to.deep.equal({ uploadId, name: 'photo.jpg', type: 'image/jpeg', size: 1200 });
    const before = receiver.deliveries.length;
    await attemptDelivery(t.app, delivery.id);
    await receiver.waitFor(before + 1);
    const sent = JSON.parse(receiver.deliveries[before].rawBody);
    const file = sent.data.submission.rawData.fld_photo;
    expect(file).to.have.keys('name', 'type', 'size', 'url');
    expect(sent.data.submission.data.Photo.url).to.be.a('string');
    expect((await download(file.url)).bytes.equals(bytes)).to.equal(true);
  });

  const fileExists = (uploadId: string) => access(join(dir, uploadId.slice(4, 6), uploadId)).then(() => true, () => false);
  const uploadRow = async (uploadId: string) => (await t.query('select status from uploads where id = ?', [uploadId]))[0] ?? null;

  it('deletes the files of a deleted submission through the deletion job; a file store outage delays it, never loses it', async () => {
    const uploadId = await uploadFile(t.url, tenant.key, form.id, 'fld_photo', jpegBytes(1000));
    const res = await submit({ fld_photo: { uploadId } });
    const submissionId = res.body.submission.id;
    expect(await fileExists(uploadId)).to.equal(true);
    expect((await call(t.url, 'DELETE', `/v1/submissions/${submissionId}`, { key: tenant.key })).status).to.equal(204);
    expect(await uploadRow(uploadId)).to.deep.equal({ status: 'deleting' });
    const [outbox] = await t.query(`select id::text as id from outbox where payload->>'submissionId' = ?`, [submissionId]);
    const job = { data: { submissionId, outboxId: outbox.id } } as any;

    // The store is down: the job fails (BullMQ retries it) and the file stays marked.
    const store = t.app.files.store;
    const down: FileStore = Object.assign(Object.create(store), { remove: async () => { throw new Error('store unreachable'); } });
    t.app.files.store = down;
    try {
      let failed: unknown = null;
      await fanoutDeletion(t.app, job).catch((err) => { failed = err; });
      expect(String(failed)).to.contain('store unreachable');
      expect(await uploadRow(uploadId)).to.deep.equal({ status: 'deleting' });
      expect(await fileExists(uploadId)).to.equal(true);
    } finally {
      t.app.files.store = store;
    }
    const report = await fanoutDeletion(t.app, job);
    expect(report.filesDeleted).to.equal(1);
    expect(await fileExists(uploadId)).to.equal(false);
    expect(await uploadRow(uploadId)).to.equal(null);
    expect(await t.query('select 1 from upload_claims where upload_id = ?', [uploadId])).to.deep.equal([]);
  });

  it('deletes uploads still unclaimed after 24 hours, in the hourly maintenance job, and keeps claimed ones', async () => {
    const unclaimed = await uploadFile(t.url, tenant.key, form.id, 'fld_photo', jpegBytes(400));
    const neverSent = (await announce(t.url, tenant.key, form.id, { fieldId: 'fld_photo', name: 'n.jpg', type: 'image/jpeg', size: 10 })).body.uploadId;
    const claimed = await uploadFile(t.url, tenant.key, form.id, 'fld_photo', jpegBytes(500));
    const fresh = await uploadFile(t.url, tenant.key, form.id, 'fld_photo', jpegBytes(600));
    expect((await submit({ fld_photo: { uploadId: claimed } })).status).to.equal(201);
    await t.query(`update uploads set created_at = now() - interval '25 hours' where id in (?, ?, ?)`, [unclaimed, neverSent, claimed]);
    // Too old to be claimed now.
    const late = await submit({ fld_photo: { uploadId: unclaimed } });
    expect(late.body.details).to.deep.equal([{ field: 'fld_photo', message: 'This upload has expired; upload the file again' }]);

    const report = await maintenance(t.app);
    expect(report.uploadsExpired).to.be.at.least(2);
    expect(await uploadRow(unclaimed)).to.equal(null);
    expect(await uploadRow(neverSent)).to.equal(null);
    expect(await fileExists(unclaimed)).to.equal(false);
    expect(await uploadRow(claimed)).to.deep.equal({ status: 'claimed' });
    expect(await fileExists(claimed)).to.equal(true);
    expect(await uploadRow(fresh)).to.deep.equal({ status: 'uploaded' });
    expect(await fileExists(fresh)).to.equal(true);
    // A second run finds nothing more to do.
    expect(await sweepUploads(t.app)).to.deep.equal({ uploadsExpired: 0, filesDeleted: 0 });
  });

  // Last: it marks the files of every submission of the run's database.
  it('marks the files of submissions in partitions about to be dropped, for the sweep to delete', async () => {
    const uploadId = await uploadFile(t.url, tenant.key, form.id, 'fld_photo', jpegBytes(300));
    expect((await submit({ fld_photo: { uploadId } })).status).to.equal(201);
    const em = t.app.orm.em.fork();
    expect(await markFilesOfSubmissionsBefore(em, new Date(Date.now() - 86_400_000))).to.equal(0);
    expect(await uploadRow(uploadId)).to.deep.equal({ status: 'uploaded' });
    expect(await markFilesOfSubmissionsBefore(em, new Date(Date.now() + 1000))).to.be.at.least(1);
    expect(await uploadRow(uploadId)).to.deep.equal({ status: 'deleting' });
    await sweepUploads(t.app);
    expect(await fileExists(uploadId)).to.equal(false);
    expect(await uploadRow(uploadId)).to.equal(null);
  });
});
