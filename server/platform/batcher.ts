import { outsideRequest } from './logger.js';

/**
 * Batching by arrival: what is asked while the previous batch is on its way leaves together in the next
 * one. A lone request leaves at once (in the next turn of the event loop, with whatever else that turn
 * asked for), so nothing waits when there is no load; under load, N concurrent requests cost a few round
 * trips instead of N. Database group commits (group-commit.ts) and batched chain reads (chain/payer-reads.ts)
 * are built on it.
 */
export interface Queued<Op, Result> { op: Op; resolve: (result: Result) => void; reject: (err: unknown) => void }

export interface BatchOptions {
  /** Most requests in one batch. */
  maxBatch?: number;
  /** Batches on their way at once; what is asked meanwhile waits for one to come back. */
  maxInFlight?: number;
  /** Called with the size of every batch sent (metrics, tests). */
  onCommand?: (size: number) => void;
}

export abstract class Batcher<Op, Result> {
  private readonly queue: Array<Queued<Op, Result>> = [];
  private inFlight = 0;
  private flushQueued = false;
  protected readonly maxBatch: number;
  private readonly maxInFlight: number;

  constructor(protected readonly options: BatchOptions, defaults: { maxBatch: number; maxInFlight: number }) {
    this.maxBatch = options.maxBatch ?? defaults.maxBatch;
    this.maxInFlight = options.maxInFlight ?? defaults.maxInFlight;
  }

  protected enqueue(op: Op): Promise<Result> {
    return new Promise((resolve, reject) => {
      this.queue.push({ op, resolve, reject });
      this.scheduleFlush();
    });
  }

  private scheduleFlush(): void {
    if (this.flushQueued) return;
    this.flushQueued = true;
    // Whatever the current turn of the event loop asks for goes in the same batch.
    setImmediate(() => {
      this.flushQueued = false;
      outsideRequest(() => this.flush());
    });
  }

  private flush(): void {
    while (this.queue.length > 0 && this.inFlight < this.maxInFlight) {
      const batch = this.queue.splice(0, this.maxBatch);
      this.inFlight++;
      void this.send(batch)
        .catch((err) => { for (const item of batch) item.reject(err); })
        .finally(() => {
          this.inFlight--;
          if (this.queue.length > 0) this.scheduleFlush();
        });
    }
  }

  /** Sends one batch and settles every item's promise. */
  protected abstract send(batch: Array<Queued<Op, Result>>): Promise<void>;
}
