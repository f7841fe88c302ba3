/** `fn` over `items`, at most `atOnce` running at a time; the results in item order. */
export async function mapAtMost<T, R>(items: readonly T[], atOnce: number, fn: (item: T) => Promise<R>): Promise<R[]> {
  const out: R[] = new Array(items.length);
  let next = 0;
  await Promise.all(Array.from({ length: Math.min(atOnce, items.length) }, async () => {
    while (next < items.length) {
      const i = next++;
      out[i] = await fn(items[i]);
    }
  }));
  return out;
}
