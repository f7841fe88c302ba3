// What a file-upload field accepts, and whether a file's declaration and first bytes agree with it.
// Pure: no I/O, so the rules are unit-tested on their own.
import type { Field } from '../forms/types';

/** Unclaimed uploads are deleted once this old; a submission no longer takes one this old (the hosted
 * page forgets the uploads it kept in the browser before then: src/public/browser/draft.ts). */
export const UPLOAD_UNCLAIMED_HOURS = 24;
export const DEFAULT_FILE_MAX_SIZE = 10 * 1024 * 1024;
export const DEFAULT_MAX_FILES = 1;
/** The most files one field takes, whatever its config says. */
export const MAX_FILES_LIMIT = 20;
/** How many first bytes are read to recognize a file. */
export const SNIFF_BYTES = 64;
export const FILE_NAME_MAX_LENGTH = 255;

const UPLOAD_ID = /^upl_[A-Za-z0-9]{20}$/;

/** An upload's id as the service makes them (`upl_` and 20 base62 characters). */
export function isUploadId(value: unknown): value is string {
  return typeof value === 'string' && UPLOAD_ID.test(value);
}

export interface FileLimits {
  maxSize: number;
  maxFiles: number;
  /** Lower-cased MIME types (`image/png`), wildcards (`image/*`) and extensions (`.pdf`); empty: any. */
  accept: string[];
}

export interface DeclaredFile {
  name: string;
  type: string;
  size: number;
}

/** The field's limits: its config.maxSize (never above `uploadMaxBytes`), maxFiles and accept. */
export function fileLimits(field: Pick<Field, 'config'>, uploadMaxBytes: number): FileLimits {
  const config = field.config ?? {};
  const maxSize = typeof config.maxSize === 'number' && Number.isInteger(config.maxSize) && config.maxSize > 0
    ? config.maxSize : DEFAULT_FILE_MAX_SIZE;
  const maxFiles = typeof config.maxFiles === 'number' && Number.isInteger(config.maxFiles) && config.maxFiles > 0
    ? Math.min(config.maxFiles, MAX_FILES_LIMIT) : DEFAULT_MAX_FILES;
  const list: unknown[] = typeof config.accept === 'string' ? config.accept.split(',') : Array.isArray(config.accept) ? config.accept : [];
  const accept = list.filter((item): item is string => typeof item === 'string').map((item) => item.trim().toLowerCase()).filter(Boolean);
  return { maxSize: Math.min(maxSize, uploadMaxBytes), maxFiles, accept };
}

/** The extension of a file name, lower-cased with its dot (`.pdf`), or '' when it has none. */
export function extensionOf(name: string): string {
  const dot = name.lastIndexOf('.');
  return dot > 0 && dot < name.length - 1 ? name.slice(dot).toLowerCase() : '';
}

/** `image/jpg` and friends, as the types the sniffer names. */
const TYPE_ALIASES: Record<string, string> = {
  'image/jpg': 'image/jpeg', 'image/pjpeg': 'image/jpeg', 'application/x-pdf': 'application/pdf',
  'application/x-zip-compressed': 'application/zip', 'image/x-png': 'image/png', 'audio/mp3': 'audio/mpeg',
};

export function normalizeType(type: string): string {
  const base = type.split(';')[0].trim().toLowerCase();
  return TYPE_ALIASES[base] ?? base;
}

/** Whether a file of this name and type is one the accept list names (by type, wildcard or extension). */
export function typeAccepted(accept: readonly string[], name: string, type: string): boolean {
  if (accept.length === 0) return true;
  const mime = normalizeType(type);
  const ext = extensionOf(name);
  return accept.some((entry) => {
    if (entry.startsWith('.')) return entry === ext;
    if (entry.endsWith('/*')) return mime.startsWith(entry.slice(0, -1));
    return normalizeType(entry) === mime;
  });
}

const MIME = /^[a-z0-9][a-z0-9!#$&^_.+-]*\/[a-z0-9][a-z0-9!#$&^_.+-]*$/i;

/** What is wrong with a declared file for this field, or null when the field takes it. */
export function declaredFileProblem(limits: FileLimits, file: DeclaredFile): string | null {
  if (typeof file.name !== 'string' || file.name.trim() === '' || file.name.length > FILE_NAME_MAX_LENGTH || /[\u0000-\u001f\u007f]/.test(file.name)) {
    return `name must be a file name of 1 to ${FILE_NAME_MAX_LENGTH} characters`;
  }
  if (typeof file.type !== 'string' || !MIME.test(file.type.split(';')[0].trim())) return 'type must be a MIME type';
  if (typeof file.size !== 'number' || !Number.isInteger(file.size) || file.size < 1) return 'size must be a positive whole number of bytes';
  if (file.size > limits.maxSize) return `${file.name} is ${formatBytes(file.size)}, larger than the ${formatBytes(limits.maxSize)} limit`;
  if (!typeAccepted(limits.accept, file.name, file.type)) return `${file.name}: this type of file is not accepted (${limits.accept.join(', ')})`;
  return null;
}

export function formatBytes(bytes: number): string {
  if (bytes < 1024) return `${bytes} bytes`;
  if (bytes < 1024 * 1024) return `${(bytes / 1024).toFixed(1)} KB`;
  return `${(bytes / (1024 * 1024)).toFixed(1)} MB`;
}

const ascii = (text: string) => [...text].map((c) => c.charCodeAt(0));

/** Magic numbers: bytes at an offset, the type they make. */
const SIGNATURES: Array<{ type: string; offset: number; bytes: number[] }> = [
  { type: 'image/jpeg', offset: 0, bytes: [0xff, 0xd8, 0xff] },
  { type: 'image/png', offset: 0, bytes: [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a] },
  { type: 'image/gif', offset: 0, bytes: ascii('GIF87a') },
  { type: 'image/gif', offset: 0, bytes: ascii('GIF89a') },
  { type: 'image/tiff', offset: 0, bytes: [0x49, 0x49, 0x2a, 0x00] },
  { type: 'image/tiff', offset: 0, bytes: [0x4d, 0x4d, 0x00, 0x2a] },
  { type: 'application/pdf', offset: 0, bytes: ascii('%PDF-') },
  { type: 'application/zip', offset: 0, bytes: [0x50, 0x4b, 0x03, 0x04] },
  { type: 'application/zip', offset: 0, bytes: [0x50, 0x4b, 0x05, 0x06] },
  { type: 'application/x-ole-storage', offset: 0, bytes: [0xd0, 0xcf, 0x11, 0xe0, 0xa1, 0xb1, 0x1a, 0xe1] },
  { type: 'application/gzip', offset: 0, bytes: [0x1f, 0x8b] },
  { type: 'application/x-7z-compressed', offset: 0, bytes: [0x37, 0x7a, 0xbc, 0xaf, 0x27, 0x1c] },
  { type: 'application/vnd.rar', offset: 0, bytes: ascii('Rar!\u001a\u0007') },
  { type: 'audio/mpeg', offset: 0, bytes: ascii('ID3') },
  { type: 'audio/ogg', offset: 0, bytes: ascii('OggS') },
  { type: 'audio/flac', offset: 0, bytes: ascii('fLaC') },
  { type: 'video/webm', offset: 0, bytes: [0x1a, 0x45, 0xdf, 0xa3] },
  { type: 'application/x-msdownload', offset: 0, bytes: ascii('MZ') },
  { type: 'application/x-executable', offset: 0, bytes: [0x7f, 0x45, 0x4c, 0x46] },
];

/** ISO base media (`ftyp` at offset 4): the brand tells HEIC/AVIF images from MP4/MOV videos. */
const FTYP_BRANDS: Record<string, string> = {
  heic: 'image/heic', heix: 'image/heic', hevc: 'image/heic', heim: 'image/heic', heis: 'image/heic', mif1: 'image/heif', msf1: 'image/heif',
  avif: 'image/avif', avis: 'image/avif', qt: 'video/quicktime', 'M4A': 'audio/mp4',
};

function startsWith(head: Uint8Array, offset: number, bytes: number[]): boolean {
  if (head.length < offset + bytes.length) return false;
  return bytes.every((b, i) => head[offset + i] === b);
}

/** The type the first bytes show, or null when they match no known signature. */
export function sniffType(head: Uint8Array): string | null {
  if (startsWith(head, 0, ascii('RIFF')) && head.length >= 12) {
    const kind = String.fromCharCode(...head.subarray(8, 12));
    if (kind === 'WEBP') return 'image/webp';
    if (kind === 'WAVE') return 'audio/wav';
    if (kind === 'AVI ') return 'video/x-msvideo';
  }
  if (startsWith(head, 4, ascii('ftyp')) && head.length >= 12) {
    const brand = String.fromCharCode(...head.subarray(8, 12)).trim();
    return FTYP_BRANDS[brand] ?? 'video/mp4';
  }
  for (const signature of SIGNATURES) if (startsWith(head, signature.offset, signature.bytes)) return signature.type;
  return null;
}

/** Declared types whose files are zip archives (Office Open XML, OpenDocument, EPUB, …). */
const ZIP_BASED = /^application\/(zip|vnd\.openxmlformats-officedocument\..+|vnd\.oasis\.opendocument\..+|epub\+zip|java-archive|vnd\.android\.package-archive)$/;
/** The legacy Office formats (OLE compound files). */
const OLE_BASED = /^application\/(msword|vnd\.ms-excel|vnd\.ms-powerpoint|vnd\.ms-outlook|x-ole-storage)$/;
const HEIF_FAMILY = new Set(['image/heic', 'image/heif', 'image/heic-sequence', 'image/heif-sequence']);
const MP4_FAMILY = new Set(['video/mp4', 'video/quicktime', 'audio/mp4', 'video/3gpp', 'audio/x-m4a', 'video/x-m4v']);
const TEXT_TYPES = /^(text\/.+|application\/(json|xml|x-ndjson|ld\+json|csv)|image\/svg\+xml)$/;

/** The signature a declared type's files carry: a sniffed type, `text` (no NUL byte), or null (none known). */
export function expectedSignature(declaredType: string): string | null {
  const type = normalizeType(declaredType);
  if (ZIP_BASED.test(type)) return 'application/zip';
  if (OLE_BASED.test(type)) return 'application/x-ole-storage';
  if (TEXT_TYPES.test(type)) return 'text';
  if (HEIF_FAMILY.has(type)) return 'heif';
  if (MP4_FAMILY.has(type)) return 'mp4';
  if (SIGNATURES.some((s) => s.type === type) || ['image/webp', 'audio/wav', 'video/x-msvideo', 'image/avif'].includes(type)) return type;
  return null;
}

/** Two-letter signatures a text may begin with ("MZ…"): alone they do not make a text binary. */
const WEAK_SIGNATURES = new Set(['application/x-msdownload']);

function sameFamily(expected: string, found: string | null): boolean {
  if (found === null) return false;
  if (expected === 'heif') return found === 'image/heic' || found === 'image/heif';
  if (expected === 'mp4') return MP4_FAMILY.has(found);
  return expected === found;
}

/**
 * Whether a file's first bytes agree with what it was declared as and with what the field takes:
 * a type with a known signature must carry it; a text type must hold no NUL byte and no binary
 * signature; any other type must not turn out to be a known type the field does not accept.
 * Null when they agree, else the problem.
 */
export function contentProblem(limits: FileLimits, file: DeclaredFile, head: Uint8Array): string | null {
  const found = sniffType(head);
  const expected = expectedSignature(file.type);
  const refused = `The content of ${file.name} is not ${normalizeType(file.type)}`;
  if (expected === 'text') return !head.includes(0) && (found === null || WEAK_SIGNATURES.has(found)) ? null : refused;
  if (expected !== null) return sameFamily(expected, found) ? null : refused;
  // By type alone: a name ending in an accepted extension does not make an executable acceptable.
  if (found && !typeAccepted(limits.accept, '', found)) return refused;
  return null;
}
