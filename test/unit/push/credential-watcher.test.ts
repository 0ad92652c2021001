// The credential watcher (push/credential-watcher.ts) over a table of fake sockets: a pass over
// many sockets gives the event loop a turn every CHECK_SLICE checks (issue 38: one pass over 2 000
// device sockets held the loop for 110-146 ms after they connected), and a socket that attached
// while a pass ran is checked again alone, not with every other socket.
import t from 'tap';
import { CHECK_SLICE, CredentialWatcher } from '../../../src/push/credential-watcher.js';
import { Failures, SocketTable, type DeviceConn } from '../../../src/push/socket-conn.js';
import type { SocketAccess } from '../../../src/ports/sockets.js';

const quietLog = { error() {}, warn() {}, info() {}, debug() {} } as never;
const clock = { now: () => new Date('2026-11-29T12:00:00.000Z') };

function world(devices: number) {
  const sockets = new SocketTable();
  let stamp = 1;
  const access: SocketAccess = {
    credentialsStamp: () => stamp,
    devicesStamp: async () => 'd',
    reached: async () => 'all',
    enabled: async (ids) => new Set(ids),
  };
  const checked: number[] = [];
  const closed: number[] = [];
  const device = (deviceId: number): DeviceConn =>
    ({
      deviceId,
      until: Infinity,
      ended: false,
      recheck: false,
      check: async () => (checked.push(deviceId), true),
      end: () => void closed.push(deviceId),
    }) as unknown as DeviceConn;
  for (let i = 1; i <= devices; i++) sockets.devices.set(i, device(i));
  // a long interval: the test runs its passes itself
  const watcher = new CredentialWatcher(sockets, access, clock, new Failures(quietLog, { databaseError() {} } as never), 3_600_000);
  t.teardown(() => watcher.close());
  return { sockets, watcher, checked, closed, device, move: () => (stamp += 1) };
}

t.test('when every credential of 1 000 device sockets is checked again, then the event loop gets a turn every CHECK_SLICE checks', async (t) => {
  const { watcher, checked } = world(1000);
  // a turn counter, moved by setImmediate: what a request or a push waiting behind the pass would get
  let turn = 0;
  let spinning = true;
  const spin = () => {
    turn += 1;
    if (spinning) setImmediate(spin);
  };
  setImmediate(spin);
  const perTurn = new Map<number, number>();
  const push = checked.push.bind(checked);
  checked.push = (...ids: number[]) => {
    perTurn.set(turn, (perTurn.get(turn) ?? 0) + ids.length);
    return push(...ids);
  };
  await watcher.check();
  spinning = false;
  t.equal(checked.length, 1000, 'every socket checked (the first pass takes the stamps)');
  const most = Math.max(...perTurn.values());
  t.ok(most <= CHECK_SLICE, `at most ${CHECK_SLICE} checks in one turn of the loop (${most})`);
});

t.test('when a socket attached while a pass ran, then the next pass checks it alone', async (t) => {
  const { sockets, watcher, checked, device } = world(50);
  await watcher.check();
  t.equal(checked.length, 50, 'the first pass checks every socket');
  checked.length = 0;
  const epoch = watcher.epoch;
  await watcher.check(); // a pass runs while the new socket's credential is checked
  t.equal(checked.length, 0, 'nothing moved: nothing is checked');
  const late = device(51);
  sockets.devices.set(51, late);
  watcher.checkedSince(epoch, late);
  await watcher.check();
  t.same(checked, [51], 'only the socket that attached late');
  checked.length = 0;
  await watcher.check();
  t.same(checked, [], 'and once');
});

t.test('when a credential is withdrawn, then every socket is checked again and the revoked one closed', async (t) => {
  const { sockets, watcher, checked, closed, move } = world(300);
  await watcher.check();
  checked.length = 0;
  (sockets.devices.get(7) as unknown as { check: () => Promise<boolean> }).check = async () => false;
  move();
  await watcher.check();
  t.equal(checked.length, 299);
  t.same(closed, [7]);
});
