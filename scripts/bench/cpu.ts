// Where the CPUs went during a measured window, from Linux's scheduler statistics: for each
// thread of a process, /proc/<pid>/task/<tid>/schedstat holds the time it ran and the time it
// was ready to run but waited for a CPU; /proc/stat holds what the whole machine did. The
// bench takes a snapshot before and after each window and prints the difference beside its
// figures, so each run says what limited it. Elsewhere than Linux there is nothing to read:
// snapshots are null and the bench prints no such table.
import { readFileSync, readdirSync } from 'node:fs';

interface Thread {
  /** ns on a CPU */
  ran: number;
  /** ns ready to run, waiting for a CPU */
  waited: number;
}

export interface CpuSnapshot {
  at: number;
  /** jiffies of all CPUs: busy (user, nice, system, irq, softirq), idle (idle, iowait), steal */
  machine: { busy: number; idle: number; steal: number };
  /** per process label: its threads by thread id */
  processes: Map<string, { pid: number; threads: Map<number, Thread> }>;
}

function threads(pid: number): Map<number, Thread> {
  const out = new Map<number, Thread>();
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    try {
      const [ran, waited] = readFileSync(`/proc/${pid}/task/${tid}/schedstat`, 'utf8').split(' ').map(Number);
      out.set(Number(tid), { ran: ran!, waited: waited! });
    } catch {
      // the thread ended between the listing and the read
    }
  }
  return out;
}

/** null where /proc has no scheduler statistics (not Linux), or has none for a process's main thread */
export function cpuSnapshot(processes: Record<string, number>): CpuSnapshot | null {
  try {
    const f = readFileSync('/proc/stat', 'utf8').split('\n')[0]!.trim().split(/\s+/).slice(1).map(Number);
    const [user, nice, system, idle, iowait, irq, softirq, steal] = f as [number, number, number, number, number, number, number, number];
    const snap: CpuSnapshot = {
      at: performance.now(),
      machine: { busy: user + nice + system + irq + softirq, idle: idle + iowait, steal: steal ?? 0 },
      processes: new Map(),
    };
    for (const [label, pid] of Object.entries(processes)) {
      const t = threads(pid);
      if (!t.has(pid)) return null; // a sandbox without schedstat, or the process is gone
      snap.processes.set(label, { pid, threads: t });
    }
    return snap;
  } catch {
    return null;
  }
}

export interface ProcessCpu {
  /** the main thread (the event loop), in % of one CPU over the window */
  mainRan: number;
  /** % of the window the main thread was ready to run and waited for a CPU */
  mainWaited: number;
  /** every other thread together (worker threads, libuv's pool, V8's helpers), % of one CPU */
  othersRan: number;
  /** ms the main thread ran in the window */
  mainRanMs: number;
}

export interface CpuUsage {
  seconds: number;
  /** % of all CPUs of the machine idle during the window */
  idle: number;
  /** % of all CPUs taken by the hypervisor */
  steal: number;
  processes: Map<string, ProcessCpu>;
}

export function cpuBetween(a: CpuSnapshot, b: CpuSnapshot): CpuUsage {
  const windowNs = (b.at - a.at) * 1e6;
  const total = b.machine.busy + b.machine.idle + b.machine.steal - (a.machine.busy + a.machine.idle + a.machine.steal);
  const processes = new Map<string, ProcessCpu>();
  for (const [label, after] of b.processes) {
    const before = a.processes.get(label);
    let mainRan = 0;
    let mainWaited = 0;
    let othersRan = 0;
    for (const [tid, t] of after.threads) {
      const t0 = before?.threads.get(tid) ?? { ran: 0, waited: 0 };
      if (tid === after.pid) {
        mainRan = t.ran - t0.ran;
        mainWaited = t.waited - t0.waited;
      } else othersRan += t.ran - t0.ran;
    }
    processes.set(label, {
      mainRan: (100 * mainRan) / windowNs,
      mainWaited: (100 * mainWaited) / windowNs,
      othersRan: (100 * othersRan) / windowNs,
      mainRanMs: mainRan / 1e6,
    });
  }
  return {
    seconds: windowNs / 1e9,
    idle: total > 0 ? (100 * (b.machine.idle - a.machine.idle)) / total : 0,
    steal: total > 0 ? (100 * (b.machine.steal - a.machine.steal)) / total : 0,
    processes,
  };
}
