// Callsigns: the one key function used for diffing, matching and reporting, so "E1", " e1 "
// and the NFC/NFD spellings of "Ä1" are the same callsign everywhere. Characters such as
// %, _ and quotes are plain characters: matching is equality on the key, never a pattern.
export const MAX_CALLSIGN_LENGTH = 64;

export function callsignKey(c: string): string {
  return c.trim().normalize('NFC').toLowerCase();
}

export type CallsignError = { code: 'INVALID_CALLSIGN'; index: number; reason: 'empty' | 'too-long' };

/** Trimmed, validated, duplicates (by key) collapsed keeping the first spelling, order kept. */
export function normaliseCallsigns(
  list: readonly string[] | null | undefined,
): { ok: true; callsigns: string[] } | { ok: false; error: CallsignError } {
  const callsigns: string[] = [];
  const seen = new Set<string>();
  const raws = list ?? [];
  for (let index = 0; index < raws.length; index++) {
    const c = raws[index]!.trim();
    if (c.length === 0) return { ok: false, error: { code: 'INVALID_CALLSIGN', index, reason: 'empty' } };
    // NFC at most triples the characters of a string (UAX #15): a short one is never too long
    if (c.length > MAX_CALLSIGN_LENGTH / 3 && [...c.normalize('NFC')].length > MAX_CALLSIGN_LENGTH) {
      return { ok: false, error: { code: 'INVALID_CALLSIGN', index, reason: 'too-long' } };
    }
    const key = callsignKey(c);
    if (seen.has(key)) continue;
    seen.add(key);
    callsigns.push(c);
  }
  return { ok: true, callsigns };
}

/** By key: added = new − old (new spelling), removed = old − new (old spelling), unchanged (new spelling). */
export function diffCallsigns(oldList: readonly string[], newList: readonly string[]): { added: string[]; removed: string[]; unchanged: string[] } {
  const oldKeys = oldList.map(callsignKey);
  const newKeys = newList.map(callsignKey);
  const had = new Set(oldKeys);
  const has = new Set(newKeys);
  return {
    added: newList.filter((_, i) => !had.has(newKeys[i]!)),
    removed: oldList.filter((_, i) => !has.has(oldKeys[i]!)),
    unchanged: newList.filter((_, i) => had.has(newKeys[i]!)),
  };
}
