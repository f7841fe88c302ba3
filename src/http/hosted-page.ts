// HTML shell of the hosted form page (GET /f/{formId}); the browser bundle renders the form itself.
import type { PublicFormJson, PublicTheme } from '../domain/public/types';
import { CATALOGUES, DEFAULT_LANGUAGE, isLanguage, textDirection, type Language } from '../domain/public/messages';

export interface HostedPageOptions {
  form: PublicFormJson;
  /** Prefix of the `/assets/...` paths, e.g. '' when the assets are served by the same origin. */
  assetBase: string;
  turnstileScriptUrl: string;
  /** STRIPE_JS_URL; loaded only when the form takes payments (`form.payments`). */
  stripeJsUrl?: string;
  cspNonce: string;
}

export const THEME_PRESETS = ['default', 'dark', 'minimal', 'rounded'] as const;

type TokenKind = 'color' | 'length' | 'font';

/** Theme token → the CSS variable it sets and the kind of value it may hold. */
const THEME_TOKENS: Record<string, { variable: string; kind: TokenKind }> = {
  primaryColor: { variable: '--fs-primary', kind: 'color' },
  primaryTextColor: { variable: '--fs-on-primary', kind: 'color' },
  backgroundColor: { variable: '--fs-background', kind: 'color' },
  surfaceColor: { variable: '--fs-surface', kind: 'color' },
  textColor: { variable: '--fs-text', kind: 'color' },
  mutedTextColor: { variable: '--fs-muted', kind: 'color' },
  borderColor: { variable: '--fs-border', kind: 'color' },
  errorColor: { variable: '--fs-error', kind: 'color' },
  borderRadius: { variable: '--fs-radius', kind: 'length' },
  fontSize: { variable: '--fs-font-size', kind: 'length' },
  fontFamily: { variable: '--fs-font', kind: 'font' },
};

const FONT_NAME = String.raw`(?:"[\w -]{1,60}"|'[\w -]{1,60}'|[A-Za-z][\w -]{0,59})`;

// Only values that cannot leave their declaration: no `;`, braces, backslashes, `<` or unbalanced quotes.
const SAFE_VALUE: Record<TokenKind, RegExp> = {
  color: /^(?:#(?:[0-9a-fA-F]{3,4}|[0-9a-fA-F]{6}|[0-9a-fA-F]{8})|(?:rgb|rgba|hsl|hsla)\([\d\s.,%/+-]{1,60}\)|[a-zA-Z]{3,30})$/,
  length: /^(?:0|\d{1,4}(?:\.\d{1,3})?(?:px|rem|em|%))$/,
  font: new RegExp(`^${FONT_NAME}(?:\\s*,\\s*${FONT_NAME}){0,7}$`),
};

const NONCE = /^[A-Za-z0-9+/=_-]{8,200}$/;

export function escapeHtml(text: string): string {
  return text
    .replace(/&/g, '&amp;')
    .replace(/</g, '&lt;')
    .replace(/>/g, '&gt;')
    .replace(/"/g, '&quot;')
    .replace(/'/g, '&#39;');
}

/** JSON that is safe inside a `<script>` element: no `</script>`, `<!--` or line separators can appear. */
export function jsonForScript(value: unknown): string {
  return JSON.stringify(value)
    .replace(/</g, '\\u003c')
    .replace(/>/g, '\\u003e')
    .replace(/&/g, '\\u0026')
    .replace(/\u2028/g, '\\u2028')
    .replace(/\u2029/g, '\\u2029');
}

export function themePreset(theme: PublicTheme | null): (typeof THEME_PRESETS)[number] {
  const preset = theme?.preset;
  return THEME_PRESETS.find((name) => name === preset) ?? 'default';
}

/** The CSS variables a theme's tokens set; unknown tokens and unsafe values are dropped. */
export function themeVariables(theme: PublicTheme | null): Record<string, string> {
  const variables: Record<string, string> = {};
  for (const [token, raw] of Object.entries(theme?.tokens ?? {})) {
    const spec = Object.prototype.hasOwnProperty.call(THEME_TOKENS, token) ? THEME_TOKENS[token] : undefined;
    const value = typeof raw === 'string' ? raw.trim() : '';
    if (spec && SAFE_VALUE[spec.kind].test(value)) variables[spec.variable] = value;
  }
  return variables;
}

function themeStyle(theme: PublicTheme | null, nonce: string): string {
  const declarations = Object.entries(themeVariables(theme)).map(([name, value]) => `  ${name}: ${value};`);
  if (!declarations.length) return '';
  // `:root[data-theme]` outranks the preset rules of form.css, so tokens refine a preset.
  return `<style nonce="${escapeHtml(nonce)}">\n:root[data-theme] {\n${declarations.join('\n')}\n}\n</style>`;
}

function assertNonce(nonce: string): void {
  if (!NONCE.test(nonce)) throw new Error('CSP nonce must be 8-200 base64 characters');
}

/** The origin of the challenge script as a CSP source; 'self' when it is served by this service. */
function scriptSource(scriptUrl: string): string {
  const url = new URL(scriptUrl, 'http://self.invalid');
  return url.origin === 'http://self.invalid' ? "'self'" : url.origin;
}

const STRIPE_JS_ORIGIN = 'https://js.stripe.com';

/**
 * The origins Stripe.js and its Payment Element need, as Stripe documents them for a CSP: scripts
 * from js.stripe.com, its frames (the element, 3-D Secure) from js.stripe.com and hooks.stripe.com,
 * and calls to api.stripe.com. A Stripe.js served from elsewhere (a stand-in in tests, a proxy)
 * gets its own origin for all three and nothing more.
 */
export function stripeCspSources(stripeJsUrl: string): { script: string[]; frame: string[]; connect: string[] } {
  const origin = new URL(stripeJsUrl).origin;
  if (origin === STRIPE_JS_ORIGIN) {
    return {
      script: [STRIPE_JS_ORIGIN, 'https://*.js.stripe.com'],
      frame: [STRIPE_JS_ORIGIN, 'https://*.js.stripe.com', 'https://hooks.stripe.com'],
      connect: ['https://api.stripe.com'],
    };
  }
  return { script: [origin], frame: [origin], connect: [origin] };
}

/**
 * `stripeJsUrl` only for a page that takes payments: other pages allow no Stripe origin.
 * `uploadOrigin` only for a page with a file-upload field: where its files' bytes are sent.
 */
export function hostedPageCsp(nonce: string, turnstileScriptUrl: string, stripeJsUrl: string | null = null, uploadOrigin: string | null = null): string {
  assertNonce(nonce);
  const turnstile = scriptSource(turnstileScriptUrl);
  const stripe = stripeJsUrl ? stripeCspSources(stripeJsUrl) : { script: [], frame: [], connect: [] };
  const scripts = ["'self'", `'nonce-${nonce}'`, ...(turnstile === "'self'" ? [] : [turnstile]), ...stripe.script];
  return [
    "default-src 'self'",
    `script-src ${scripts.join(' ')}`,
    `style-src 'self' 'nonce-${nonce}'`,
    "img-src 'self' data: blob:",
    `connect-src ${[...new Set(["'self'", ...stripe.connect, ...(uploadOrigin ? [uploadOrigin] : [])])].join(' ')}`,
    `frame-src ${[turnstile, ...stripe.frame].join(' ')}`,
    'frame-ancestors *',
    "form-action 'self'",
    "base-uri 'none'",
    "object-src 'none'",
  ].join('; ');
}

/** A page's opening up to its title (`title` already escaped); notice pages stay out of search results. */
function pageStart(theme: string, title: string, opts: { noindex: boolean; language?: Language }): string {
  const robots = opts.noindex ? '<meta name="robots" content="noindex">\n' : '';
  const language = opts.language ?? DEFAULT_LANGUAGE;
  return `<!doctype html>
<html lang="${language}" dir="${textDirection(language)}" data-theme="${theme}">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
${robots}<link rel="icon" href="data:,">
<title>${title}</title>`;
}

export function renderHostedPage(opts: HostedPageOptions): string {
  const { form, assetBase, turnstileScriptUrl, stripeJsUrl, cspNonce } = opts;
  assertNonce(cspNonce);
  const nonce = escapeHtml(cspNonce);
  const assets = escapeHtml(assetBase.replace(/\/+$/, ''));
  const title = escapeHtml(form.title);
  const language: Language = isLanguage(form.language) ? form.language : DEFAULT_LANGUAGE;
  // The bundle holds English; another language's words come with the page (src/public/browser/i18n.ts).
  const words = language === DEFAULT_LANGUAGE ? ''
    : `\n<script type="application/json" id="form-words">${jsonForScript(CATALOGUES[language])}</script>`;
  const challengeScript = form.botProtection
    ? `\n<script nonce="${nonce}" id="fs-turnstile-script" src="${escapeHtml(turnstileScriptUrl)}" async defer></script>`
    : '';
  const stripeScript = form.payments && stripeJsUrl
    ? `\n<script nonce="${nonce}" id="fs-stripe-script" src="${escapeHtml(stripeJsUrl)}" async></script>`
    : '';
  return `${pageStart(themePreset(form.theme), title, { noindex: false, language })}
<link rel="stylesheet" href="${assets}/assets/form.css">
${themeStyle(form.theme, cspNonce)}
<script nonce="${nonce}" src="${assets}/assets/form.js" defer></script>${challengeScript}${stripeScript}
</head>
<body>
<main id="fs-app" class="fs-shell">
<noscript>
<div class="fs-card">
<h1 class="fs-title">${title}</h1>
<p>${escapeHtml(CATALOGUES[language].noScript)}</p>
</div>
</noscript>
</main>
<script type="application/json" id="form-data">${jsonForScript(form)}</script>${words}
</body>
</html>
`;
}

function renderNoticePage(title: string, heading: string, text: string, language: Language): string {
  return `${pageStart('default', escapeHtml(title), { noindex: true, language })}
<link rel="stylesheet" href="/assets/form.css">
</head>
<body>
<main class="fs-shell">
<div class="fs-card fs-notice">
<h1 class="fs-title">${escapeHtml(heading)}</h1>
<p>${escapeHtml(text)}</p>
</div>
</main>
</body>
</html>
`;
}

export function renderNotFoundPage(language: Language = DEFAULT_LANGUAGE): string {
  const words = CATALOGUES[language];
  return renderNoticePage(words.notFoundTitle, words.notFoundHeading, words.notFoundText, language);
}

export function renderRateLimitedPage(language: Language = DEFAULT_LANGUAGE): string {
  const words = CATALOGUES[language];
  return renderNoticePage(words.rateLimitedTitle, words.rateLimitedTitle, words.rateLimitedText, language);
}

/** What a person sees when the page could not be made (the details are in the log). */
export function renderFailedPage(language: Language = DEFAULT_LANGUAGE): string {
  const text = escapeHtml(CATALOGUES[language].pageFailed);
  return `<!doctype html><html lang="${language}" dir="${textDirection(language)}"><title>${text}</title><p>${text}</p>`;
}
