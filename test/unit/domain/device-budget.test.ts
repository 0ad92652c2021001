import t from 'tap';
import { BUDGET_WINDOW_MS, DeviceBudgets, overBudget, SOCKET_OPENS_MAX } from '../../../src/domain/device-budget.js';

const MAXIMA = { idle: 60, bad: 10 };

t.test('when frames are counted, then past the maximum within a minute is over, and a new minute starts afresh', async (t) => {
  const b = { count: 0, since: 0 };
  const at = 1_000_000;
  for (let i = 0; i < 3; i++) t.notOk(overBudget(b, 3, at + i));
  t.ok(overBudget(b, 3, at + 10), 'the fourth');
  t.notOk(overBudget(b, 3, at + BUDGET_WINDOW_MS), 'a minute after the window started');
  t.same(b, { count: 1, since: at + BUDGET_WINDOW_MS });
});

t.test('when a device’s budget is spent on one socket, then its next socket within the minute is refused, and admitted after it', async (t) => {
  const budgets = new DeviceBudgets();
  const at = 5_000_000;
  t.same(budgets.open(7, at, MAXIMA), { ok: true });
  const idle = budgets.of(7, at).idle;
  for (let i = 0; i <= MAXIMA.idle; i++) overBudget(idle, MAXIMA.idle, at + 1000);
  t.same(budgets.open(7, at + 2000, MAXIMA), { ok: false, why: 'frames', retryAfterS: 59 }, 'the window started at the first frame');
  t.same(budgets.open(8, at + 2000, MAXIMA), { ok: true }, 'another device is not touched');
  t.same(budgets.open(7, at + 1000 + BUDGET_WINDOW_MS, MAXIMA), { ok: true }, 'the next minute');
  const bad = budgets.of(9, at).bad;
  for (let i = 0; i <= MAXIMA.bad; i++) overBudget(bad, MAXIMA.bad, at);
  t.match(budgets.open(9, at + 500, MAXIMA), { ok: false, why: 'frames', retryAfterS: 60 }, 'the invalid frames likewise; Retry-After rounds up');
});

t.test('when a device opens more than SOCKET_OPENS_MAX sockets within a minute, then the next are refused until the minute ends; a few reconnects never are', async (t) => {
  const budgets = new DeviceBudgets();
  const at = 9_000_000;
  for (let i = 0; i < 5; i++) t.same(budgets.open(1, at + i * 1000, MAXIMA), { ok: true }, `reconnect ${i}`);
  for (let i = 5; i < SOCKET_OPENS_MAX; i++) t.same(budgets.open(1, at + 5000, MAXIMA), { ok: true });
  t.same(budgets.open(1, at + 5000, MAXIMA), { ok: false, why: 'opens', retryAfterS: 55 });
  for (let i = 0; i < 100; i++) budgets.open(1, at + 6000, MAXIMA);
  t.same(budgets.open(1, at + BUDGET_WINDOW_MS - 1, MAXIMA), { ok: false, why: 'opens', retryAfterS: 1 }, 'refused opens do not stretch the window');
  t.same(budgets.open(1, at + BUDGET_WINDOW_MS, MAXIMA), { ok: true }, 'the window ended');
  const small = new DeviceBudgets(1);
  t.same(small.open(2, at, MAXIMA), { ok: true });
  t.match(small.open(2, at, MAXIMA), { ok: false, why: 'opens' }, 'the bound is a setting');
});

t.test('when devices are not seen for a minute, then their entries are dropped; those within it are kept', async (t) => {
  const budgets = new DeviceBudgets();
  const at = 20_000_000;
  for (let d = 1; d <= 1000; d++) budgets.open(d, at, MAXIMA);
  t.equal(budgets.size, 1000);
  budgets.open(5000, at + 30_000, MAXIMA);
  t.equal(budgets.size, 1001, 'within the minute: kept');
  budgets.open(5001, at + BUDGET_WINDOW_MS + 1, MAXIMA);
  t.equal(budgets.size, 2, 'the 1 000 dropped; the two seen since kept');
  budgets.of(5002, at + BUDGET_WINDOW_MS + 2);
  t.equal(budgets.size, 3, 'sweeps run at most every 10 s');
  budgets.of(5003, at + 10 * BUDGET_WINDOW_MS);
  t.equal(budgets.size, 1, 'an entry that counted nothing is dropped too');
});
