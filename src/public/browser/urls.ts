// Where the page may send a person: its own module, so the embed script (embed.ts) uses it without
// the page's words.

/** Only http(s) destinations are followed after a submission. */
export function safeRedirectUrl(url: string | null | undefined, base: string): string | null {
  if (!url) return null;
  try {
    const target = new URL(url, base);
    return target.protocol === 'http:' || target.protocol === 'https:' ? target.href : null;
  } catch {
    return null;
  }
}
