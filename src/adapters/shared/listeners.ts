// The listeners of a bus's topics, shared by the buses of one node and of several: called at
// once, in the order they subscribed; one that throws does not keep the others from the message.
import type { BusEvents } from '../../ports/bus.js';

export class Listeners {
  private readonly byTopic = new Map<keyof BusEvents, ((message: never) => void)[]>();

  constructor(private readonly onError: (err: unknown, topic: string) => void) {}

  deliver<K extends keyof BusEvents>(topic: K, message: BusEvents[K]): void {
    for (const listener of [...(this.byTopic.get(topic) ?? [])]) {
      try {
        (listener as (m: BusEvents[K]) => void)(message);
      } catch (err) {
        this.onError(err, topic);
      }
    }
  }

  /** returns a function that unsubscribes */
  subscribe<K extends keyof BusEvents>(topic: K, listener: (message: BusEvents[K]) => void): () => void {
    const list = this.byTopic.get(topic) ?? [];
    list.push(listener as (m: never) => void);
    this.byTopic.set(topic, list);
    return () => {
      const i = list.indexOf(listener as (m: never) => void);
      if (i >= 0) list.splice(i, 1);
    };
  }
}
