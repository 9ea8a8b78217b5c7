/**
 * One task at a time per key in this process, in the order asked: a key's next task starts when the one
 * before it has settled (whatever its outcome). For what one process must not do concurrently on one
 * thing (a channel's calls, an owner key's nonce sequence); across processes the database decides.
 */
export class Turns {
  private readonly last = new Map<string, Promise<unknown>>();

  run<T>(key: string, task: () => Promise<T>): Promise<T> {
    const previous = this.last.get(key) ?? Promise.resolve();
    const mine = previous.catch(() => undefined).then(task);
    this.last.set(key, mine);
    // Forgotten once it is the key's last task and has settled: the map holds only keys with work.
    const forget = () => { if (this.last.get(key) === mine) this.last.delete(key); };
    mine.then(forget, forget);
    return mine;
  }
}
