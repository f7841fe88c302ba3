// Where the bytes of uploads live. One interface, two drivers: `local` (a directory of this
// machine) and `s3` (any S3-compatible store). Neither PostgreSQL nor Redis ever holds the bytes.
import { randomBytes } from 'node:crypto';
import { createReadStream, createWriteStream } from 'node:fs';
import { mkdir, open, rename, rm, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { Transform, type Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import {
  DeleteObjectCommand, GetObjectCommand, HeadObjectCommand, PutObjectCommand, S3Client, S3ServiceException,
} from '@aws-sdk/client-s3';
import { getSignedUrl } from '@aws-sdk/s3-request-presigner';
import type { Config, S3Settings } from '../../../config';
import { SNIFF_BYTES } from './rules';

/** Where a client sends an upload's bytes. */
export interface UploadTarget {
  url: string;
  method: 'PUT';
  headers: Record<string, string>;
  expiresAt: Date;
}

export interface StoredObject {
  size: number;
  /** What identifies this version of the bytes (S3 ETag); null for local files. */
  etag: string | null;
}

/** A download: the bytes as a stream, and their size. */
export interface OpenedObject {
  stream: Readable;
  size: number;
}

/** Why received bytes were refused: more than declared (413), fewer (400), or content refused (422). */
export class ReceiveRefused extends Error {
  constructor(readonly reason: 'too_large' | 'too_small' | 'content', message: string) {
    super(message);
  }
}

/** Bytes received into a temporary place: kept under the upload's name, or thrown away. */
export interface Received {
  commit(): Promise<void>;
  discard(): Promise<void>;
}

export interface FileStore {
  readonly kind: 'local' | 's3';
  /**
   * Where to send the bytes of an upload of `size` bytes and `type`; `localUrl` is the service's
   * own signed upload URL, used by the drivers that have no URL of their own.
   */
  uploadTarget(id: string, file: { type: string; size: number }, expiresInSeconds: number, localUrl: () => string): Promise<UploadTarget>;
  /** The object's size and version, or null when there is none. */
  stat(id: string): Promise<StoredObject | null>;
  /** Its first bytes (up to SNIFF_BYTES). */
  firstBytes(id: string): Promise<Buffer>;
  /** The bytes, or null when there is no such object (or, with `etag`, it was replaced since). */
  open(id: string, etag: string | null): Promise<OpenedObject | null>;
  /** Deletes it; nothing to delete is not an error. */
  remove(id: string): Promise<void>;
  /**
   * Streams bytes sent to the service itself (the local driver's upload URL) into a temporary
   * place, refusing more or fewer than `size` bytes, and showing the first bytes to `checkHead`
   * (which throws ReceiveRefused to refuse them). Absent on drivers clients upload to directly.
   */
  receive?(id: string, source: Readable, size: number, checkHead: (head: Buffer) => void): Promise<Received>;
}

/** Counts bytes through, refuses more than `limit`, and shows the first SNIFF_BYTES to `onHead` once. */
function guardedCounter(limit: number, onHead: (head: Buffer) => void): Transform & { count(): number } {
  let count = 0;
  let head: Buffer[] | null = [];
  let headLength = 0;
  const flushHead = () => {
    if (!head) return;
    const first = Buffer.concat(head).subarray(0, SNIFF_BYTES);
    head = null;
    onHead(first);
  };
  const counter = new Transform({
    transform(chunk: Buffer, _enc, done) {
      count += chunk.length;
      if (count > limit) return done(new ReceiveRefused('too_large', `more bytes than the ${limit} declared`));
      try {
        if (head) {
          head.push(chunk);
          headLength += chunk.length;
          if (headLength >= SNIFF_BYTES) flushHead();
        }
      } catch (err) {
        return done(err as Error);
      }
      return done(null, chunk);
    },
    flush(done) {
      try {
        flushHead();
      } catch (err) {
        return done(err as Error);
      }
      return done();
    },
  });
  return Object.assign(counter, { count: () => count });
}

/** Files under one directory of this machine: written to a temporary name, then renamed into place. */
export class LocalFileStore implements FileStore {
  readonly kind = 'local' as const;
  private readonly tmpDir: string;

  constructor(private readonly dir: string) {
    this.tmpDir = join(dir, '.tmp');
  }

  private path(id: string): string {
    return join(this.dir, id.slice(4, 6), id);
  }

  async uploadTarget(_id: string, file: { type: string }, expiresInSeconds: number, localUrl: () => string): Promise<UploadTarget> {
    return {
      url: localUrl(), method: 'PUT', headers: { 'Content-Type': file.type },
      expiresAt: new Date(Date.now() + expiresInSeconds * 1000),
    };
  }

  async stat(id: string): Promise<StoredObject | null> {
    try {
      return { size: (await stat(this.path(id))).size, etag: null };
    } catch (err: any) {
      if (err?.code === 'ENOENT') return null;
      throw err;
    }
  }

  async firstBytes(id: string): Promise<Buffer> {
    const handle = await open(this.path(id), 'r');
    try {
      const buffer = Buffer.alloc(SNIFF_BYTES);
      const { bytesRead } = await handle.read(buffer, 0, SNIFF_BYTES, 0);
      return buffer.subarray(0, bytesRead);
    } finally {
      await handle.close();
    }
  }

  async open(id: string): Promise<OpenedObject | null> {
    const found = await this.stat(id);
    if (!found) return null;
    return { stream: createReadStream(this.path(id)), size: found.size };
  }

  async remove(id: string): Promise<void> {
    await rm(this.path(id), { force: true });
  }

  async receive(id: string, source: Readable, size: number, checkHead: (head: Buffer) => void): Promise<Received> {
    await mkdir(this.tmpDir, { recursive: true });
    const tmp = join(this.tmpDir, `${id}.${randomBytes(6).toString('hex')}`);
    const counter = guardedCounter(size, checkHead);
    try {
      await pipeline(source, counter, createWriteStream(tmp, { flags: 'wx' }));
      if (counter.count() < size) throw new ReceiveRefused('too_small', `${counter.count()} bytes arrived, ${size} were declared`);
    } catch (err) {
      await rm(tmp, { force: true });
      throw err;
    }
    return {
      commit: async () => {
        await mkdir(join(this.dir, id.slice(4, 6)), { recursive: true });
        await rename(tmp, this.path(id));
      },
      discard: () => rm(tmp, { force: true }),
    };
  }
}

const notFound = (err: unknown) => err instanceof S3ServiceException
  && (err.$metadata?.httpStatusCode === 404 || err.name === 'NotFound' || err.name === 'NoSuchKey');
const replaced = (err: unknown) => err instanceof S3ServiceException && err.$metadata?.httpStatusCode === 412;

/** An S3-compatible bucket; objects are named by upload id. */
export class S3FileStore implements FileStore {
  readonly kind = 's3' as const;
  private readonly client: S3Client;

  constructor(private readonly settings: S3Settings) {
    this.client = new S3Client({
      region: settings.region,
      endpoint: settings.endpoint ?? undefined,
      forcePathStyle: settings.forcePathStyle,
      credentials: { accessKeyId: settings.accessKeyId, secretAccessKey: settings.secretAccessKey },
      // Checksums are the SDK's default since 2025; a presigned PUT must not require one the browser cannot compute.
      requestChecksumCalculation: 'WHEN_REQUIRED',
      responseChecksumValidation: 'WHEN_REQUIRED',
    });
  }

  async uploadTarget(id: string, file: { type: string; size: number }, expiresInSeconds: number): Promise<UploadTarget> {
    const command = new PutObjectCommand({ Bucket: this.settings.bucket, Key: id, ContentType: file.type, ContentLength: file.size });
    // Length and type are signed: the store itself refuses a body of another size or type.
    const url = await getSignedUrl(this.client, command, {
      expiresIn: expiresInSeconds, signableHeaders: new Set(['content-type', 'content-length']),
    });
    return { url, method: 'PUT', headers: { 'Content-Type': file.type }, expiresAt: new Date(Date.now() + expiresInSeconds * 1000) };
  }

  async stat(id: string): Promise<StoredObject | null> {
    try {
      const head = await this.client.send(new HeadObjectCommand({ Bucket: this.settings.bucket, Key: id }));
      return { size: Number(head.ContentLength ?? 0), etag: head.ETag ?? null };
    } catch (err) {
      if (notFound(err)) return null;
      throw err;
    }
  }

  async firstBytes(id: string): Promise<Buffer> {
    const got = await this.client.send(new GetObjectCommand({ Bucket: this.settings.bucket, Key: id, Range: `bytes=0-${SNIFF_BYTES - 1}` }));
    return Buffer.from(await got.Body!.transformToByteArray()).subarray(0, SNIFF_BYTES);
  }

  async open(id: string, etag: string | null): Promise<OpenedObject | null> {
    try {
      const got = await this.client.send(new GetObjectCommand({ Bucket: this.settings.bucket, Key: id, IfMatch: etag ?? undefined }));
      // Checked again on the answer, for stores that ignore If-Match.
      if (etag && got.ETag !== etag) {
        (got.Body as Readable).destroy();
        return null;
      }
      return { stream: got.Body as Readable, size: Number(got.ContentLength ?? 0) };
    } catch (err) {
      if (notFound(err) || replaced(err)) return null;
      throw err;
    }
  }

  async remove(id: string): Promise<void> {
    await this.client.send(new DeleteObjectCommand({ Bucket: this.settings.bucket, Key: id }));
  }
}

export function createFileStore(config: Pick<Config, 'fileStorage' | 'fileStorageDir' | 's3'>): FileStore {
  return config.fileStorage === 's3' ? new S3FileStore(config.s3!) : new LocalFileStore(config.fileStorageDir);
}
