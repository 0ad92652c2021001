// The acks of one device socket (DESIGN sections 5 and 7; issue 36, 2026-11-29), as a pure rule:
// which ack frames are written, and which are frames that did nothing useful.
//  - An ack is cumulative and acknowledges at most what this socket has sent: a pushId above the
//    highest sent counts as that one (the pushes after it are not the device's to acknowledge yet).
//  - An ack that does not move the socket's acknowledged position (written, being written or
//    waiting to be) writes nothing: it is stale.
//  - At most one ack write is in flight per socket. Acks that move the position while one is in
//    flight merge into one waiting write (the highest wins), started when the one in flight ends.
//  - One ack frame per push frame sent on the socket (resends too) comes free, whether it moves
//    the position or not: a device that acks every push it receives, a resent backlog's copies
//    included, is never charged. Every ack frame past that is charged to the device's frame
//    budget (the hub closes the socket past it), so a flood of acks costs a bounded number of
//    writes. (Until a review of 2026-11-29 only moving acks came free, and a device acking the
//    resent copies of a 100-push backlog was closed 4003 and locked out for the minute.)
// No I/O: the device hub does the writes and tells this when each ends.

/** what the hub does with an ack frame */
export interface AckDecision {
  /** write this ack now (nothing was in flight), or null: merged into the waiting write, or stale */
  write: number | null;
  /** the frame counts against the frame budget (more ack frames than push frames were sent) */
  charged: boolean;
}

export class SocketAcks {
  /** highest pushId whose ack was stored from this socket */
  private stored = 0;
  private inFlight: number | null = null;
  /** the merged acks waiting for the write in flight: the highest of them */
  private waiting: number | null = null;
  /** the highest pushId sent on this socket, and how many push frames (resends too) */
  private highestSent = 0;
  private pushesSent = 0;
  /** ack frames offered on this socket */
  private acks = 0;

  /** the highest pushId this socket's device is known to have acknowledged (stored) */
  get acked(): number {
    return this.stored;
  }

  /** the position an ack must pass to move it: stored, being written, or waiting to be */
  private get position(): number {
    return Math.max(this.stored, this.inFlight ?? 0, this.waiting ?? 0);
  }

  /** a push frame went out on the socket (a resend too) */
  sent(pushId: number): void {
    this.pushesSent += 1;
    this.highestSent = Math.max(this.highestSent, pushId);
  }

  /** an ack frame for `pushId` arrived */
  offer(pushId: number): AckDecision {
    this.acks += 1;
    const charged = this.acks > this.pushesSent;
    const upTo = Math.min(pushId, this.highestSent);
    if (upTo <= this.position) return { write: null, charged };
    if (this.inFlight !== null) {
      this.waiting = upTo;
      return { write: null, charged };
    }
    this.inFlight = upTo;
    return { write: upTo, charged };
  }

  /**
   * The write in flight ended (`ok`: it was stored; else the position falls back, and a later
   * ack or the ack timeout's resend moves it again). Returns the merged ack to write next, if any.
   */
  settled(ok: boolean): number | null {
    if (this.inFlight === null) throw new Error('SocketAcks.settled: no ack write in flight');
    if (ok) this.stored = Math.max(this.stored, this.inFlight);
    this.inFlight = this.waiting;
    this.waiting = null;
    return this.inFlight;
  }
}
