import type { Request, Response, Server } from 'restify';
import type { AppContext } from '../../app';
import { isUploadId } from '../../domain/files/rules';
import { createUpload, openDownload, receiveUpload, type CreateUploadResult } from '../../domain/files/uploads';
import { submittableForm } from '../../domain/submissions/create-submission';
import { metrics } from '../../lib/metrics';
import { ApiError, errors } from '../errors';
import { authenticated, parseJsonBody, sendApiError, sendReply, streamReply } from '../pipeline';
import { refusalToApiError } from '../presenters/refusals';
import { PUBLIC_CORS_HEADERS, PublicError, publicErrors, publicPreflight, publicRoute } from '../public-pipeline';
import { publicClientKey } from '../public-admission';
import { admittedFormOrRefusal } from './public';
import { formIdParam } from './schemas';

/**
 * Uploads one form may announce per minute, whoever asks: many client addresses still cannot fill
 * the file store without bound.
 */
export const UPLOADS_PER_FORM_PER_MINUTE = 1_200;

/** A file name as a Content-Disposition: an ASCII fallback and the exact name (RFC 6266, RFC 8187). */
export function attachmentDisposition(name: string): string {
  const fallback = name.replace(/[^\x20-\x7e]|["\\]/g, '_');
  return `attachment; filename="${fallback}"; filename*=UTF-8''${encodeURIComponent(name).replace(/['()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`)}`;
}

/** Headers of the service's own upload URL and download links, which a page of any origin may use. */
const FILE_CORS_HEADERS = {
  ...PUBLIC_CORS_HEADERS,
  'Access-Control-Allow-Methods': 'GET, PUT, OPTIONS',
  'Access-Control-Allow-Headers': 'Content-Type',
  'Access-Control-Max-Age': '600',
};

function uploadIdParam(req: Request): string | null {
  const id = req.params?.uploadId;
  return isUploadId(id) ? id : null;
}

function apiAnswer(result: Exclude<CreateUploadResult, { ok: true }>): ApiError {
  if (result.kind === 'not_found') return errors.notFound('Form has no file-upload field with this id');
  return errors.validation(result.errors, 'The file was refused');
}

export function registerFileRoutes(server: Server, app: AppContext): void {
  const clientKeyOf = publicClientKey(app);

  server.post('/v1/forms/:formId/uploads', authenticated(app, 'submissions:write', async ({ organizationId, req, json }) => {
    const body = json();
    const formId = formIdParam(req);
    if (!formId) throw errors.notFound('Form not found');
    const found = await submittableForm(app, organizationId, formId, false);
    if ('refusal' in found) throw refusalToApiError(found.refusal);
    const result = await createUpload(app, found.form, body);
    if (!result.ok) throw apiAnswer(result);
    return { status: 201, body: result.upload, headers: { 'Cache-Control': 'no-store' } };
  }));

  server.opts('/public/forms/:formId/uploads', publicPreflight);
  server.post('/public/forms/:formId/uploads', publicRoute(app, async (req: Request, res: Response) => {
    const form = await admittedFormOrRefusal(app, req, res, clientKeyOf(req), { name: 'pub-upl', limit: app.config.publicRateLimitPost });
    const perForm = await app.rateLimiter.hit(`upl-form:${form.id}`, UPLOADS_PER_FORM_PER_MINUTE);
    if (!perForm.allowed) {
      metrics.rateLimitRejections.inc({ scope: 'public' });
      throw publicErrors.rateLimited(perForm.retryAfter);
    }
    const result = await createUpload(app, form, parseJsonBody(req));
    if (!result.ok && result.kind === 'not_found') throw new PublicError(404, { success: false, error: 'not_found', message: 'Form has no file-upload field with this id' });
    if (!result.ok) {
      throw new PublicError(422, { success: false, errors: Object.fromEntries(result.errors.map((e) => [e.field, e.message])) });
    }
    return { status: 201, body: result.upload, headers: { 'Cache-Control': 'no-store' } };
  }));

  // The local driver's upload URL: the body is the file, streamed (server.ts reads no body here).
  server.opts('/uploads/:uploadId', fileCorsPreflight);
  server.put('/uploads/:uploadId', async (req: Request, res: Response) => {
    setHeaders(res, FILE_CORS_HEADERS);
    try {
      const uploadId = uploadIdParam(req);
      if (!uploadId) throw errors.notFound('Upload not found');
      const length = req.header('content-length');
      const result = await receiveUpload(app, uploadId, req.query ?? {}, length !== undefined && /^\d+$/.test(length) ? Number(length) : null, req);
      if (!result.ok) {
        // A refused body may still be arriving: the connection is closed rather than read to the end.
        if (!req.complete) res.setHeader('Connection', 'close');
        throw new ApiError(result.status, result.code, result.message);
      }
      sendReply(res, { status: 200, body: { uploadId, status: 'uploaded' } });
    } catch (err) {
      sendApiError(app, req, res, err);
    }
  });

  server.opts('/files/:uploadId', fileCorsPreflight);
  server.get('/files/:uploadId', async (req: Request, res: Response) => {
    setHeaders(res, FILE_CORS_HEADERS);
    try {
      const uploadId = uploadIdParam(req);
      if (!uploadId) throw errors.notFound('File not found');
      const download = await openDownload(app, uploadId, req.query ?? {});
      if (!download.ok) throw new ApiError(download.status, download.status === 403 ? 'forbidden' : 'not_found', download.message);
      await streamReply(app, req, res, {
        status: 200,
        headers: {
          'Content-Type': download.type,
          'Content-Length': download.size,
          'Content-Disposition': attachmentDisposition(download.name),
          'X-Content-Type-Options': 'nosniff',
          // Opened in a tab anyway, the file runs no script and loads nothing.
          'Content-Security-Policy': "default-src 'none'; sandbox",
          'Cache-Control': 'private, no-store',
        },
        stream: [download.stream],
      });
    } catch (err) {
      sendApiError(app, req, res, err);
    }
  });
}

function setHeaders(res: Response, headers: Record<string, string>): void {
  for (const [name, value] of Object.entries(headers)) res.setHeader(name, value);
}

async function fileCorsPreflight(_req: Request, res: Response): Promise<void> {
  setHeaders(res, { ...FILE_CORS_HEADERS, 'X-Content-Type-Options': 'nosniff' });
  res.status(204);
  res.end();
}
