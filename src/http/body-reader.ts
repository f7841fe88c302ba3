import { createHash } from 'node:crypto';
import type { Request, Response } from 'restify';

const TEXT_TYPES = new Set(['application/json', 'application/x-www-form-urlencoded', 'multipart/form-data']);

function httpError(statusCode: number, message: string): Error {
  return Object.assign(new Error(message), { statusCode });
}

/**
 * Reads the request body into `req.body` (a string for JSON, form and text types, else a Buffer),
 * as restify's bodyReader plugin does and with its answers (413 once the body exceeds
 * `maxBodySize`, 415 for a content encoding, 400 for a Content-MD5 that does not match), without
 * its deprecated `new Buffer()` call: Node checks the caller's stack on each of the first 10,000
 * calls of a process, a cost every request paid. Compressed bodies never get here (guardRequestBody).
 */
export function bodyReader(maxBodySize: number) {
  return function readBody(req: Request, res: Response, originalNext: (err?: unknown) => void): void {
    let called = false;
    const next = (err?: unknown) => {
      if (called) return;
      called = true;
      originalNext(err);
    };
    const state = req as unknown as { _readBody?: boolean; body?: unknown };
    if (state._readBody) return next();
    state._readBody = true;

    const contentType = req.contentType();
    if ((req.getContentLength() === 0 && !req.isChunked()) || contentType === 'multipart/form-data' || contentType === 'application/octet-stream') {
      return next();
    }
    const isText = TEXT_TYPES.has(contentType) || contentType.startsWith('text/');
    const md5 = req.headers['content-md5'];
    const hash = md5 ? createHash('md5') : null;
    const encoding = req.headers['content-encoding'];
    if (encoding !== undefined) res.setHeader('Accept-Encoding', 'gzip');
    const chunks: Buffer[] = [];
    let received = 0;
    state.body = EMPTY;

    req.on('data', (chunk: Buffer) => {
      received += chunk.length;
      if (received > maxBodySize) return;
      hash?.update(chunk);
      chunks.push(chunk);
    });
    req.once('end', () => {
      const raw = chunks.length === 1 ? chunks[0] : Buffer.concat(chunks);
      const body = isText ? raw.toString('utf8') : raw;
      state.body = body;
      if (encoding !== undefined) return next(httpError(415, 'content encoding not supported'));
      if (received > maxBodySize) return next(httpError(413, `Request body size exceeds ${maxBodySize}`));
      if (!body.length) return next();
      const digest = hash?.digest('base64');
      if (hash && md5 !== digest) return next(httpError(400, `Content-MD5 '${md5}' didn't match '${digest}'`));
      return next();
    });
    req.once('error', next);
    // A client that stops sending half way must not leave the request (and its memory) behind.
    res.once('close', next);
    req.once('aborted', next);
    req.resume();
  };
}

const EMPTY = Buffer.alloc(0);
