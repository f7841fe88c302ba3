import { randomBytes } from 'node:crypto';
import type { Request, Response, Server } from 'restify';
import type { AppContext } from '../../app';
import { docsPageCsp, REDOC_SCRIPT_PATH, renderDocsPage } from '../docs-page';
import { sendText, serveAssets } from '../static-assets';

/** GET /docs, the API reference, and the renderer it loads. No authentication, like /openapi.yaml. */
export function registerDocsRoutes(server: Server, app: AppContext): void {
  server.get('/docs', async (_req: Request, res: Response) => {
    // A nonce is only worth something if no two responses share it: never cache the page.
    const nonce = randomBytes(18).toString('base64');
    sendText(res, 200, 'text/html; charset=utf-8', renderDocsPage(nonce), {
      'Content-Security-Policy': docsPageCsp(nonce),
      'Cache-Control': 'no-store',
    });
  });
  serveAssets(server, app, [{ route: REDOC_SCRIPT_PATH, file: 'redoc.standalone.js', contentType: 'text/javascript; charset=utf-8' }]);
}
