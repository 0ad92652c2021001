// The bus of one node: listeners are called at once, in the order they subscribed, in the turn
// of the publisher. A listener that throws does not keep the others from their message.
import type { Bus, BusEvents } from '../../ports/bus.js';
import { Listeners } from '../shared/listeners.js';

export class MemoryBus implements Bus {
  private readonly listeners: Listeners;

  constructor(onListenerError: (err: unknown, topic: string) => void = () => {}) {
    this.listeners = new Listeners(onListenerError);
  }

  publish<K extends keyof BusEvents>(topic: K, message: BusEvents[K]): void {
    this.listeners.deliver(topic, message);
  }

  subscribe<K extends keyof BusEvents>(topic: K, listener: (message: BusEvents[K]) => void): () => void {
    return this.listeners.subscribe(topic, listener);
  }
}
