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
  private scheduled = false;

  constructor(private readonly run: (items: I[]) => Promise<ReadonlyArray<R | PromiseLike<R>>>) {}

  call(item: I): Promise<R> {
    return new Promise<R>((resolve, reject) => {
      this.pending.push({ item, resolve, reject });
      this.schedule();
    });
  }

  /** Whether a batch may start now; when it may not, a subclass calls `schedule()` once it may. */
  protected mayStart(): boolean {
    return true;
  }

  /** Called with a run's promise as it starts. */
  protected started(_run: Promise<unknown>): void {}

  /** Runs the waiting calls on the next turn, if there are any and a batch may start. */
  protected schedule(): void {
    if (this.scheduled || this.pending.length === 0 || !this.mayStart()) return;
    this.scheduled = true;
    setImmediate(() => {
      this.scheduled = false;
      const batch = this.pending;
      this.pending = [];
      const run = this.run(batch.map((b) => b.item)).then(
        (results) => batch.forEach((b, i) => b.resolve(results[i])),
        (err) => batch.forEach((b) => b.reject(err)),
      );
      this.started(run);
    });
  }
}

/**
 * A TickBatch that runs one batch at a time (group commit): the calls made while a batch runs wait
 * for it and go together in the next, so under load a batch grows with the wait instead of the round
 * trips growing with the load; alone, a call still goes on the next turn. A batch that runs longer
 * than `stallMs` (a statement waiting on a lock, a slow database) stops holding back the next one,
 * so one stuck batch delays the others by at most that long.
 */
export class GroupCommit<I, R> extends TickBatch<I, R> {
  /** Runs under way that still hold back the next one. */
  private holding = 0;

  constructor(run: (items: I[]) => Promise<ReadonlyArray<R | PromiseLike<R>>>, private readonly stallMs: number) {
    super(run);
  }

  protected override mayStart(): boolean {
    return this.holding === 0;
  }

  protected override started(run: Promise<unknown>): void {
    this.holding++;
    let holds = true;
    const release = () => {
      if (!holds) return;
      holds = false;
      clearTimeout(stalled);
      this.holding--;
      this.schedule();
    };
    const stalled = setTimeout(release, this.stallMs);
    stalled.unref();
    void run.finally(release);
  }
}
