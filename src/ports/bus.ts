// The bus port: what the services publish after a unit of work commits, for whoever delivers it
// (the device hub today; webhooks and other nodes next). One node: src/adapters/memory/bus.ts,
// which calls its listeners at once, in order, in the publisher's turn.
import type { EventView } from './incidents.js';

export interface BusEvents {
  /** pushes were written and are durable */
  written: readonly EventView[];
  /** a device was deleted or its tokens revoked: its socket must close */
  deviceGone: number;
}

export interface Bus {
  publish<K extends keyof BusEvents>(topic: K, message: BusEvents[K]): void;
  /** returns a function that unsubscribes */
  subscribe<K extends keyof BusEvents>(topic: K, listener: (message: BusEvents[K]) => void): () => void;
}
