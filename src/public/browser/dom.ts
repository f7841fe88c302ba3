// Minimal element builder: no framework, no innerHTML (every text is set as text).
type AttrValue = string | number | boolean | null | undefined;
export type Child = Node | string | null | undefined | false;

export function h<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  attrs: Record<string, AttrValue> = {},
  ...children: Child[]
): HTMLElementTagNameMap[K] {
  const element = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (value === null || value === undefined || value === false) continue;
    element.setAttribute(name, value === true ? '' : String(value));
  }
  append(element, children);
  return element;
}

export function append(parent: Node, children: Child[]): void {
  for (const child of children) {
    if (child === null || child === undefined || child === false) continue;
    parent.appendChild(typeof child === 'string' ? document.createTextNode(child) : child);
  }
}

/** A DOM id derived from a field id (ids may hold any character but whitespace). */
export function domId(fieldId: string, suffix: string): string {
  return `fs-${fieldId.replace(/\s/g, '_')}-${suffix}`;
}

export function visuallyHidden(text: string): HTMLSpanElement {
  return h('span', { class: 'fs-sr-only' }, text);
}

/**
 * Waits for a third-party script the page's HTML already includes (by element id) to define its
 * global: the global at once if it is there, else after the script's load event, within `timeoutMs`.
 */
export function scriptGlobal<T>(scriptId: string, read: () => T | undefined, what: string, timeoutMs: number): Promise<T> {
  return new Promise((resolve, reject) => {
    const ready = read();
    if (ready) return resolve(ready);
    const script = document.getElementById(scriptId);
    if (!script) return reject(new Error(`${what} missing`));
    const timer = setTimeout(() => reject(new Error(`${what} timed out`)), timeoutMs);
    script.addEventListener('load', () => {
      clearTimeout(timer);
      const loaded = read();
      if (loaded) resolve(loaded);
      else reject(new Error(`${what} did not define its global`));
    });
    script.addEventListener('error', () => {
      clearTimeout(timer);
      reject(new Error(`${what} failed to load`));
    });
  });
}
