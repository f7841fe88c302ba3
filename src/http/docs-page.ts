// The API reference at GET /docs: openapi.yaml rendered in the browser by Redoc's standalone
// bundle, which the build copies from the `redoc` package into dist/public and this service serves
// itself (no CDN).

/** Where the page loads the renderer from (served by routes/docs.ts). */
export const REDOC_SCRIPT_PATH = '/docs/redoc.standalone.js';

const NONCE = /^[A-Za-z0-9+/=]{16,200}$/;

/**
 * The one stylesheet the renderer injects as it loads, before it knows the nonce (perfect-scrollbar's,
 * first empty, then filled): allowed by its hashes, which hold for the pinned `redoc` version
 * (test/e2e/api-reference.test.ts fails on any refused style).
 */
const REDOC_LOAD_STYLE_HASHES = [
  "'sha256-47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU='",
  "'sha256-QMIg+bpjm3JdElJ388KYke01izlUW0UoNOeKjpMxdgc='",
];

/**
 * The page's own policy: scripts and styles only with the response's nonce (Redoc takes it and
 * puts it on the style elements it injects) or REDOC_LOAD_STYLE_HASHES, the document fetched from
 * this origin, the search index's worker from a blob. Nothing else loads (Redoc's footer logo from
 * its maker's CDN is refused, and hides itself), and no other site may frame the page.
 */
export function docsPageCsp(nonce: string): string {
  if (!NONCE.test(nonce)) throw new Error('CSP nonce must be 16-200 base64 characters');
  return [
    "default-src 'none'",
    `script-src 'nonce-${nonce}'`,
    `style-src 'nonce-${nonce}' ${REDOC_LOAD_STYLE_HASHES.join(' ')}`,
    "img-src 'self' data:",
    "font-src 'self' data:",
    "connect-src 'self'",
    'worker-src blob:',
    "frame-ancestors 'none'",
    "form-action 'none'",
    "base-uri 'none'",
  ].join('; ');
}

/** The page: an empty element Redoc renders `/openapi.yaml` into, with the response's nonce. */
export function renderDocsPage(nonce: string): string {
  if (!NONCE.test(nonce)) throw new Error('CSP nonce must be 16-200 base64 characters');
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<link rel="icon" href="data:,">
<title>Form Service API reference</title>
<style nonce="${nonce}">body { margin: 0; }</style>
</head>
<body>
<div id="redoc"></div>
<script nonce="${nonce}" src="${REDOC_SCRIPT_PATH}"></script>
<script nonce="${nonce}">
Redoc.init('/openapi.yaml', { nonce: document.currentScript.nonce }, document.getElementById('redoc'));
</script>
</body>
</html>
`;
}
