/**
 * Gathers the calls made within one turn of the event loop and runs them as one batch on the next
 * (setImmediate): many concurrent jobs then share one round trip instead of one each. `run` gets the
 * items in call order and answers one result per item, in the same order; if it throws, every call
 * of the batch rejects with that error. An item's result may also be a promise of it, settled on its
 * own (a batch split into several round trips): its caller then waits for that one alone. Such a
 * promise must not reject before `run`'s own promise resolves, or the rejection is seen unhandled.
 */
export class TickBatch<I, R> {
  private pending: Array<{ item: I; resolve: (r: R | PromiseLike<R>) => void; reject: (err: unknown) => void }> = [];

  constructor(private readonly run: (items: I[]) => Promise<ReadonlyArray<R | PromiseLike<R>>>) {}

  call(item: I): Promise<R> {
    return new Promise<R>((resolve, reject) => {
      if (this.pending.push({ item, resolve, reject }) === 1) setImmediate(() => this.flush());
    });
  }

  private flush(): void {
    const batch = this.pending;
    this.pending = [];
    this.run(batch.map((b) => b.item)).then(
      (results) => batch.forEach((b, i) => b.resolve(results[i])),
      (err) => batch.forEach((b) => b.reject(err)),
    );
  }
}
