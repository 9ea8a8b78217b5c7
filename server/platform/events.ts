import { EventEmitter } from 'node:events';

/** Something worth a line in the terminal of `agentgate dev`: a payment, a mail in or out, a webhook attempt, a chat message. */
export interface ServiceEvent {
  category: string;
  line: string;
}

/**
 * A process-local tap on what the service does, for people watching it (agentgate dev prints each event
 * in one line). Emitting never waits and never fails the work that emits; nothing listens in production.
 */
export class ServiceEvents {
  private readonly emitter = new EventEmitter();

  emit(event: ServiceEvent): void {
    if (this.emitter.listenerCount('event') === 0) return;
    try {
      this.emitter.emit('event', event);
    } catch {
      // A listener's failure is not the emitting work's failure.
    }
  }

  on(listener: (event: ServiceEvent) => void): () => void {
    this.emitter.on('event', listener);
    return () => this.emitter.off('event', listener);
  }
}
