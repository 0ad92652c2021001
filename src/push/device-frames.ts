// What a device socket sends (DESIGN sections 5 and 10, asyncapi.yaml): acks and responders'
// answers; anything else is an invalid frame.
//  - acks (domain/ack.ts): one ack write in flight per device socket, later acks merged into the
//    next (the highest wins); an ack that moves nothing writes nothing. Every device frame but an
//    ack that moves the position (at most one per push sent) counts against IDLE_FRAMES_MAX a
//    minute (else 4003): a flood of valid frames is bounded as invalid ones are (issue 36);
//  - INVALID_FRAMES_MAX invalid frames per minute (else 4003), error replies only while the
//    send buffer is small, one warning when a socket is closed for it;
//  - both budgets are the device's, carried across its sockets (domain/device-budget.ts,
//    2026-11-29): a socket opened while one is spent is closed 4003 at once, and so is one past
//    SOCKET_OPENS_MAX sockets of the device within a minute, so a reconnect loop gets no fresh
//    budget and costs no outbox read;
//  - `response` frames are decided by the AnswerDecider one after the other per socket, in the
//    order they arrive, at most ANSWERS_QUEUED waiting: one more is an invalid frame.
import type { FastifyBaseLogger } from 'fastify';
import type { Clock } from '../ports/clock.js';
import type { Metrics } from '../ports/metrics.js';
import type { OutboxPort } from '../ports/outbox.js';
import { DeviceBudgets, SOCKET_OPENS_MAX } from '../domain/device-budget.js';
import { responseFrame, type ResponseInput, type ResponseResult } from '../domain/response.js';
import { CLOSE, ERROR_REPLY_MAX, INVALID_FRAMES_MAX, overBound, overBudget, type DeviceConn, type Failures } from './socket-conn.js';

/**
 * Decides a device's answer: services/responses.ts, handed in by app.ts. The response service
 * publishes on the bus and never calls a hub, so it is built first and there is no cycle.
 */
export type AnswerDecider = (deviceId: number, input: ResponseInput) => Promise<ResponseResult>;

/**
 * Frames of a device socket a minute that are not an ack moving its position within the pushes
 * sent: stale or repeated acks, responses, invalid frames (issue 36, 2026-11-29).
 */
export const IDLE_FRAMES_MAX = 60;
/** answers of one socket waiting to be decided (one in flight, the rest behind it) */
export const ANSWERS_QUEUED = 16;

export class DeviceFrames {
  private readonly log: FastifyBaseLogger;
  /** by device, while a window of theirs runs */
  readonly budgets = new DeviceBudgets();

  constructor(
    private readonly store: Pick<OutboxPort, 'ack'>,
    /** how a device's answer is decided; without one a response frame is an invalid frame */
    private readonly answer: AnswerDecider | null,
    private readonly clock: Clock,
    private readonly failures: Failures,
    private readonly metrics: Metrics,
  ) {
    this.log = failures.log;
  }

  /**
   * A socket of the device is opening (counted): null when it may, else why it is closed at once
   * (4003): past SOCKET_OPENS_MAX within a minute, or a frame budget of the device is spent.
   */
  refusedOpen(deviceId: number): string | null {
    const open = this.budgets.open(deviceId, Date.now(), { idle: IDLE_FRAMES_MAX, bad: INVALID_FRAMES_MAX });
    if (open.ok) return null;
    this.log.debug({ deviceId, why: open.why }, 'device socket closed at once: its sockets or frames of the minute are spent');
    return open.why === 'opens'
      ? `more than ${SOCKET_OPENS_MAX} sockets opened within a minute; retry in ${open.retryAfterS} s`
      : `the device's frame budget of the minute is spent; retry in ${open.retryAfterS} s`;
  }

  /** a frame of a device socket (null: binary or not text) */
  receive(conn: DeviceConn, text: string | null): void {
    if (conn.ended) return;
    let msg: unknown;
    try {
      msg = text === null ? null : JSON.parse(text);
    } catch {
      msg = null;
    }
    const m = msg as { type?: unknown; pushId?: unknown } | null;
    if (m && m.type === 'ack' && Number.isSafeInteger(m.pushId) && (m.pushId as number) > 0) {
      const { write, charged } = conn.acks.offer(m.pushId as number);
      if (write !== null) this.writeAck(conn, write);
      if (charged) this.idleFrame(conn);
      return;
    }
    if (m && m.type === 'response') {
      const input = this.answer ? responseFrame(m) : null;
      if (input && conn.answersWaiting < ANSWERS_QUEUED) {
        if (this.idleFrame(conn)) return;
        this.queueAnswer(conn, input);
        return;
      }
      this.log.debug({ deviceId: conn.deviceId }, 'device sent a response frame that is invalid, or too many at once; ignored');
      if (this.invalidFrame(conn)) return;
      const message = input ? `at most ${ANSWERS_QUEUED} responses may wait for their result` : 'a response frame must be as asyncapi.yaml specifies it';
      if (conn.ws.bufferedAmount < ERROR_REPLY_MAX) conn.ws.send(JSON.stringify({ type: 'error', message }));
      return;
    }
    this.log.debug({ deviceId: conn.deviceId }, 'device sent a frame that is not an ack; ignored');
    if (this.invalidFrame(conn)) return;
    if (conn.ws.bufferedAmount < ERROR_REPLY_MAX) conn.ws.send(JSON.stringify({ type: 'error', message: 'expected an ack {"type":"ack","pushId":N} or a response {"type":"response","responseId":...,"incidentId":N,"status":...}' }));
  }

  /** Counts an invalid frame; true when it was one too many and the socket is closed. */
  private invalidFrame(conn: DeviceConn): boolean {
    if (this.idleFrame(conn)) return true;
    if (!overBudget(this.budgets.of(conn.deviceId, Date.now()).bad, INVALID_FRAMES_MAX, Date.now())) return false;
    this.log.warn({ deviceId: conn.deviceId, max: INVALID_FRAMES_MAX }, 'socket closed: too many invalid frames');
    conn.end(CLOSE.invalidFrames, 'too many invalid frames');
    return true;
  }

  /** Counts a device frame that did no useful work; true when it was one too many and the socket is closed. */
  private idleFrame(conn: DeviceConn): boolean {
    if (!overBudget(this.budgets.of(conn.deviceId, Date.now()).idle, IDLE_FRAMES_MAX, Date.now())) return false;
    this.log.warn({ deviceId: conn.deviceId, max: IDLE_FRAMES_MAX }, 'socket closed: too many frames besides acks of new pushes');
    conn.end(CLOSE.invalidFrames, 'too many frames besides acks of new pushes');
    return true;
  }

  /**
   * Writes an ack (the only one of this socket in flight), then the acks merged meanwhile, if
   * any: one write for all of them. Ends even when the socket has: what the device acknowledged
   * is stored, once.
   */
  private writeAck(conn: DeviceConn, upTo: number): void {
    void this.failures.stored('ack', () => this.store.ack(conn.deviceId, upTo, this.clock.now().toISOString())).then((n) => {
      if (n !== undefined && n > 0) {
        this.metrics.pushes('delivered', n);
        this.log.debug({ deviceId: conn.deviceId, upTo, delivered: n }, 'pushes acknowledged');
      }
      const next = conn.acks.settled(n !== undefined);
      if (next !== null) this.writeAck(conn, next);
    });
  }

  /**
   * Decides the answer after the socket's earlier ones, and sends its responseResult. A failure
   * (storage unavailable) is told to the device as an error frame: it may send the answer again
   * with the same responseId, which is never recorded twice.
   */
  private queueAnswer(conn: DeviceConn, input: ResponseInput): void {
    conn.answersWaiting += 1;
    const decide = this.answer!;
    conn.answering = conn.answering.then(async () => {
      try {
        const result = await decide(conn.deviceId, input);
        if (!conn.ended && conn.ws.readyState === conn.ws.OPEN && !overBound(conn, this.log, { deviceId: conn.deviceId })) {
          conn.ws.send(JSON.stringify({ type: 'responseResult', ...result }));
        }
      } catch (err) {
        this.failures.report('answer', { deviceId: conn.deviceId, err }, 'a device answer could not be stored');
        if (!conn.ended && conn.ws.readyState === conn.ws.OPEN && conn.ws.bufferedAmount < ERROR_REPLY_MAX) {
          conn.ws.send(JSON.stringify({ type: 'error', message: `response ${input.responseId} could not be stored; send it again` }));
        }
      } finally {
        conn.answersWaiting -= 1;
      }
    });
  }
}
