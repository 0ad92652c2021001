// Which parts of `npm run bench` a command line asks for (pure: unit-tested in
// test/unit/bench-pg-figures.test.ts). Without --only: the default parts; `--postgres` adds the
// PostgreSQL part to whatever else is run; `--only a,b` (or `--only=a,b`) runs those alone.
export const PARTS = ['classic', 'alert', 'storm', 'mechanisms', 'sweeper', 'idempotency', 'postgres', 'wake'] as const;
/** what a run without --only runs */
export const DEFAULT_PARTS: readonly string[] = ['classic', 'alert', 'storm', 'wake'];

export function parseParts(argv: readonly string[]): { parts: Set<string> } | { error: string } {
  const i = argv.indexOf('--only');
  const arg = i >= 0 ? argv[i + 1] : argv.find((a) => a.startsWith('--only='))?.slice('--only='.length);
  const postgres = argv.includes('--postgres');
  if (arg === undefined) return { parts: new Set([...DEFAULT_PARTS, ...(postgres ? ['postgres'] : [])]) };
  const named = arg.split(',').map((p) => p.trim()).filter((p) => p !== '');
  const unknown = named.filter((p) => !(PARTS as readonly string[]).includes(p));
  if (unknown.length > 0 || named.length === 0) return { error: `--only takes a comma-separated list of ${PARTS.join(', ')}; got ${arg}` };
  return { parts: new Set([...named, ...(postgres ? ['postgres'] : [])]) };
}
