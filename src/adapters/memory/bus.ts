// The bus of one node: listeners are called at once, in the order they subscribed, in the turn
// of the publisher. A listener that throws does not keep the others from their message.
import type { Bus, BusEvents } from '../../ports/bus.js';

export class MemoryBus implements Bus {
  private readonly listeners = new Map<keyof BusEvents, ((message: never) => void)[]>();

  constructor(private readonly onListenerError: (err: unknown, topic: string) => void = () => {}) {}

  publish<K extends keyof BusEvents>(topic: K, message: BusEvents[K]): void {
    for (const listener of this.listeners.get(topic) ?? []) {
      try {
        (listener as (m: BusEvents[K]) => void)(message);
      } catch (err) {
        this.onListenerError(err, topic);
      }
    }
  }

  subscribe<K extends keyof BusEvents>(topic: K, listener: (message: BusEvents[K]) => void): () => void {
    const list = this.listeners.get(topic) ?? [];
    list.push(listener as (m: never) => void);
    this.listeners.set(topic, list);
    return () => {
      const i = list.indexOf(listener as (m: never) => void);
      if (i >= 0) list.splice(i, 1);
    };
  }
}
