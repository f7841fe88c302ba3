import { readFileSync } from 'node:fs';
import path from 'node:path';
import type { Request, Response, Server } from 'restify';
import type { AppContext } from '../app';
import { PUBLIC_SECURITY_HEADERS } from './public-pipeline';

// The files `npm run build` puts in dist/public (the hosted page's bundles, the API reference's
// renderer), and the one way pages and files outside the JSON API are answered.

/** Where scripts/build-browser.js puts the bundles (dist/public, next to dist/src). */
const ASSET_DIR = path.resolve(__dirname, '../../public');
const ASSET_CACHE_CONTROL = 'public, max-age=300';

export interface Asset {
  route: string;
  file: string;
  contentType: string;
}

export function sendText(res: Response, status: number, contentType: string, body: string | Buffer, headers: Record<string, string> = {}): void {
  for (const [name, value] of Object.entries({ ...PUBLIC_SECURITY_HEADERS, ...headers })) res.setHeader(name, value);
  res.setHeader('Content-Type', contentType);
  res.writeHead(status);
  res.end(body);
}

function readAsset(app: AppContext, file: string): Buffer | null {
  try {
    return readFileSync(path.join(ASSET_DIR, file));
  } catch {
    app.logger.warn({ file: path.join(ASSET_DIR, file) }, 'browser asset missing: run `npm run build`');
    return null;
  }
}

/** GET routes answering each asset, read once: the bundles do not change while the process runs. */
export function serveAssets(server: Server, app: AppContext, assets: Asset[]): void {
  for (const asset of assets) {
    const content = readAsset(app, asset.file);
    server.get(asset.route, async (_req: Request, res: Response) => {
      if (!content) return sendText(res, 404, 'text/plain; charset=utf-8', 'Not found', { 'Cache-Control': 'no-store' });
      sendText(res, 200, asset.contentType, content, { 'Cache-Control': ASSET_CACHE_CONTROL });
    });
  }
}
