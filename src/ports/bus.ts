// The bus port: what the services publish after a unit of work commits, for whoever delivers it
// (the device hub today; webhooks and other nodes next). One node: src/adapters/memory/bus.ts,
// which calls its listeners at once, in order, in the publisher's turn.
import type { EventView } from './incidents.js';

export interface BusEvents {
  /** pushes were written and are durable */
  written: readonly EventView[];
  /** a device was deleted or its tokens revoked: its socket must close */
  deviceGone: number;
  /**
   * Several nodes: these devices have pushes written (through any node) that their socket may
   * not have been sent; whichever node holds one sends what is pending.
   */
  pending: readonly number[];
  /** Several nodes: a credential may have been withdrawn on another node; caches and sockets check again */
  credentialsChanged: null;
  /** Several nodes: the device connected to another node, which now holds it; this node's socket closes (this node only) */
  deviceElsewhere: number;
  /** Several nodes: a node's device connected or left (presence, adapters/postgres/presence.ts) */
  presence: {
    nodeId: string;
    deviceId: number;
    online: boolean;
    /** the epoch of the session row the node wrote (online only): the highest holds the device */
    epoch?: number;
  };
}

export interface Bus {
  publish<K extends keyof BusEvents>(topic: K, message: BusEvents[K]): void;
  /** returns a function that unsubscribes */
  subscribe<K extends keyof BusEvents>(topic: K, listener: (message: BusEvents[K]) => void): () => void;
}
