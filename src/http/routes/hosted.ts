import { randomBytes } from 'node:crypto';
import type { Request, Response, Server } from 'restify';
import type { AppContext } from '../../app';
import { hostedPageCsp, renderFailedPage, renderHostedPage, renderNotFoundPage, renderRateLimitedPage } from '../hosted-page';
import { describeError } from '../pipeline';
import { metrics } from '../../lib/metrics';
import { admitPublicRequest, publicClientKey, publicFormBuilder, requestLanguage, requestLanguageTag } from '../public-admission';
import { formIdParam } from './schemas';
import { requestState } from '../request-state';
import { serveAssets, sendText, type Asset } from '../static-assets';

const ASSETS: Asset[] = [
  { route: '/embed.js', file: 'embed.js', contentType: 'text/javascript; charset=utf-8' },
  { route: '/assets/form.js', file: 'form.js', contentType: 'text/javascript; charset=utf-8' },
  { route: '/assets/form.css', file: 'form.css', contentType: 'text/css; charset=utf-8' },
];

/**
 * The origin a page's uploads are sent to: the service's own upload URL (PUBLIC_URL) or the store's
 * presigned URLs (an S3 endpoint, maybe with the bucket in the host name). Presigning is local work,
 * so one URL is made to learn it rather than working out each store's addressing here.
 */
async function uploadOrigin(app: AppContext): Promise<string> {
  const probe = `upl_${'0'.repeat(20)}`;
  const target = await app.files.store.uploadTarget(probe, { type: 'application/octet-stream', size: 1 }, 60,
    () => app.files.links.url('upload', probe, 60).url);
  return new URL(target.url).origin;
}

export function registerHostedRoutes(server: Server, app: AppContext): void {
  const toPublicForm = publicFormBuilder(app);
  let uploads: Promise<string> | null = null;
  const uploadsGoTo = () => (uploads ??= uploadOrigin(app).catch((err) => {
    uploads = null;
    throw err;
  }));
  const scriptUrl = app.config.turnstileScriptUrl;
  const clientKeyOf = publicClientKey(app);
  const { publicRateLimitGet } = app.config;

  server.get('/f/:formId', async (req: Request, res: Response) => {
    const notFound = () => sendText(res, 404, 'text/html; charset=utf-8', renderNotFoundPage(requestLanguage(req, null)), { 'Cache-Control': 'no-store' });
    try {
      const { admission, headers } = await admitPublicRequest(app, clientKeyOf(req), formIdParam(req), { name: 'pub-page', limit: publicRateLimitGet });
      for (const [name, value] of Object.entries(headers)) res.setHeader(name, value);
      if (!admission.ok && admission.kind === 'rate_limited') {
        metrics.rateLimitRejections.inc({ scope: 'public' });
        return sendText(res, 429, 'text/html; charset=utf-8', renderRateLimitedPage(requestLanguage(req, null)), {
          'Cache-Control': 'no-store', 'Retry-After': String(admission.decision.retryAfter),
        });
      }
      if (!admission.ok) return notFound();
      const { form } = admission;
      // A nonce is only worth something if no two responses share it: never cache the page.
      const nonce = randomBytes(18).toString('base64');
      const asked = requestLanguageTag(req, form);
      const publicForm = toPublicForm(form, asked.language, asked.tag);
      const stripeJsUrl = publicForm.payments ? app.config.stripeJsUrl : null;
      const takesFiles = publicForm.fields.some((field) => field.type === 'file-upload' && !field.hidden);
      const html = renderHostedPage({
        form: publicForm, assetBase: '', turnstileScriptUrl: scriptUrl, stripeJsUrl: stripeJsUrl ?? undefined, cspNonce: nonce,
      });
      sendText(res, 200, 'text/html; charset=utf-8', html, {
        'Content-Security-Policy': hostedPageCsp(nonce, scriptUrl, stripeJsUrl, takesFiles ? await uploadsGoTo() : null),
        'Cache-Control': 'no-store',
        'Content-Language': publicForm.language,
      });
    } catch (err) {
      app.logger.error({ err: describeError(err), reqId: requestState(req).requestId }, 'hosted page failed');
      sendText(res, 500, 'text/html; charset=utf-8', renderFailedPage(requestLanguage(req, null)), { 'Cache-Control': 'no-store' });
    }
  });

  serveAssets(server, app, ASSETS);
}
