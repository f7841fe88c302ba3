import { randomBytes } from 'node:crypto';
import { call } from './harness';
import { freePort } from './processes';

/** Bytes that start like a JPEG (the magic number the service sniffs), `size` in all. */
export function jpegBytes(size: number): Buffer {
  const bytes = randomBytes(size);
  bytes[0] = 0xff;
  bytes[1] = 0xd8;
  bytes[2] = 0xff;
  return bytes;
}

export function pdfBytes(size: number): Buffer {
  const bytes = randomBytes(size);
  bytes.write('%PDF-1.7\n', 0, 'latin1');
  return bytes;
}

export interface UploadTarget {
  uploadId: string;
  url: string;
  method: 'PUT';
  headers: Record<string, string>;
  expiresAt: string;
}

/** Announces an upload through the API; answers the response (201: the target). */
export function announce(baseUrl: string, key: string, formId: string, file: { fieldId: string; name: string; type: string; size: number }) {
  return call(baseUrl, 'POST', `/v1/forms/${formId}/uploads`, { key, body: file });
}

/** Sends the bytes where the upload target says. */
export async function putBytes(target: UploadTarget, bytes: Buffer, headers: Record<string, string> = {}) {
  const res = await fetch(target.url, { method: 'PUT', headers: { ...target.headers, ...headers }, body: new Uint8Array(bytes) });
  return { status: res.status, text: await res.text() };
}

/** Announces and sends a file; answers the upload id. */
export async function uploadFile(
  baseUrl: string, key: string, formId: string, fieldId: string, bytes: Buffer, file: { name?: string; type?: string } = {},
): Promise<string> {
  const res = await announce(baseUrl, key, formId, { fieldId, name: file.name ?? 'photo.jpg', type: file.type ?? 'image/jpeg', size: bytes.length });
  if (res.status !== 201) throw new Error(`upload refused: ${res.status} ${res.text}`);
  const put = await putBytes(res.body, bytes);
  if (put.status !== 200) throw new Error(`bytes refused: ${put.status} ${put.text}`);
  return res.body.uploadId;
}

/** Downloads a link; answers the status, headers and bytes. */
export async function download(url: string) {
  const res = await fetch(url);
  return { status: res.status, headers: res.headers, bytes: Buffer.from(await res.arrayBuffer()) };
}

/** The env of a test service with local files under `dir`, on a port chosen first so that its links (PUBLIC_URL) can name it. */
export async function fileServiceEnv(dir: string, env: Record<string, string> = {}): Promise<Record<string, string>> {
  const port = await freePort();
  return { PORT: String(port), PUBLIC_URL: `http://127.0.0.1:${port}`, FILE_STORAGE_DIR: dir, ...env };
}
