// Signed links to a file: `${publicUrl}/files/{uploadId}?expires=<unix s>&signature=<base64url>` to
// download it, and the local driver's `${publicUrl}/uploads/{uploadId}?…` to send its bytes. The
// signature is HMAC-SHA256 over (purpose, upload id, expiry) with a key derived from the service's
// encryption key for this use alone, so neither link can stand in for the other or for any other
// token signed with that key.
import { hmacSha256, purposeKey, signatureMatches } from '../../lib/crypto';
import { isPlainObject } from '../../lib/objects';
import { isUploadId } from './rules';

export type LinkPurpose = 'download' | 'upload';
export type LinkCheck = 'ok' | 'expired' | 'invalid';

const PATHS: Record<LinkPurpose, string> = { download: '/files/', upload: '/uploads/' };

/** The key links are signed with, derived from the encryption key. */
export function fileLinkKey(encryptionKey: Buffer): Buffer {
  return purposeKey(encryptionKey, 'file-links');
}

function signature(key: Buffer, purpose: LinkPurpose, uploadId: string, expires: number): Buffer {
  return hmacSha256(key, `${purpose}\n${uploadId}\n${expires}`);
}

/** A link to the file valid until `expires` (Unix seconds). */
export function signedFileUrl(key: Buffer, publicUrl: string, purpose: LinkPurpose, uploadId: string, expires: number): string {
  const sig = signature(key, purpose, uploadId, expires).toString('base64url');
  return `${publicUrl}${PATHS[purpose]}${uploadId}?expires=${expires}&signature=${sig}`;
}

/** Whether a link's expiry and signature are the ones this service signed, and still valid. */
export function verifyFileLink(
  key: Buffer, purpose: LinkPurpose, uploadId: string, expires: unknown, sig: unknown, nowMs = Date.now(),
): LinkCheck {
  if (!isUploadId(uploadId) || typeof expires !== 'string' || !/^\d{1,12}$/.test(expires) || typeof sig !== 'string' || sig.length > 64) {
    return 'invalid';
  }
  if (!signatureMatches(sig, signature(key, purpose, uploadId, Number(expires)))) return 'invalid';
  return Number(expires) * 1000 > nowMs ? 'ok' : 'expired';
}

/** A file value as stored in a submission: what reads show, without a lookup. */
export interface StoredFile {
  uploadId: string;
  name: string;
  type: string;
  size: number;
}

/** A file value as every read shows it. */
export interface FileLink {
  name: string;
  type: string;
  size: number;
  url: string;
}

export function isStoredFile(value: unknown): value is StoredFile {
  return isPlainObject(value) && isUploadId(value.uploadId) && typeof value.name === 'string'
    && typeof value.type === 'string' && typeof value.size === 'number' && Object.keys(value).length === 4;
}

/** Makes the download links of reads, valid `ttlSeconds` from the moment each read is made. */
export class FileLinks {
  constructor(private readonly key: Buffer, private readonly publicUrl: string, private readonly ttlSeconds: number) {}

  static fromEncryptionKey(encryptionKey: Buffer, publicUrl: string, ttlSeconds: number): FileLinks {
    return new FileLinks(fileLinkKey(encryptionKey), publicUrl, ttlSeconds);
  }

  url(purpose: LinkPurpose, uploadId: string, ttlSeconds = this.ttlSeconds, nowMs = Date.now()): { url: string; expires: number } {
    const expires = Math.floor(nowMs / 1000) + ttlSeconds;
    return { url: signedFileUrl(this.key, this.publicUrl, purpose, uploadId, expires), expires };
  }

  verify(purpose: LinkPurpose, uploadId: string, expires: unknown, sig: unknown): LinkCheck {
    return verifyFileLink(this.key, purpose, uploadId, expires, sig);
  }

  /** A stored file value as reads show it: `{name, type, size, url}`. */
  present(file: StoredFile): FileLink {
    return { name: file.name, type: file.type, size: file.size, url: this.url('download', file.uploadId).url };
  }

  /**
   * Submission values (keyed by field id or label) with every stored file, alone or in a list,
   * shown as a link; other values unchanged. One place for every read: detail, list, export,
   * change feed and webhook payloads.
   */
  presentValues(data: Record<string, unknown>): Record<string, unknown> {
    let out: Record<string, unknown> | null = null;
    for (const [key, value] of Object.entries(data)) {
      const shown = isStoredFile(value) ? this.present(value)
        : Array.isArray(value) && value.length > 0 && value.every(isStoredFile) ? value.map((file) => this.present(file))
          : value;
      if (shown !== value) (out ??= { ...data })[key] = shown;
    }
    return out ?? data;
  }
}

/**
 * A stored submission event payload (webhook deliveries keep what the storing statement built) with
 * its files as links made now: each delivery attempt carries a link valid from the moment it is sent.
 */
export function withFileLinks(payload: string, links: FileLinks): string {
  if (!payload.includes('"upl_')) return payload;
  const event = JSON.parse(payload);
  const submission = event?.data?.submission;
  if (!isPlainObject(submission)) return payload;
  for (const key of ['data', 'rawData']) {
    if (isPlainObject(submission[key])) submission[key] = links.presentValues(submission[key]);
  }
  return JSON.stringify(event);
}
