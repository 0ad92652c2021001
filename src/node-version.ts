// Imported first by main.ts: on a Node line the service does not support, say so and stop,
// before better-sqlite3's native add-on (built for Node 22 and later) is loaded and crashes the
// process without a word.
const SUPPORTED = [22, 24];
const major = Number(process.versions.node.split('.')[0]);
if (!(major >= Math.min(...SUPPORTED))) {
  process.stderr.write(`Node ${process.versions.node} is not supported: run on Node ${SUPPORTED.join(' or ')} (README "Requirements"; \`source scripts/use-node.sh\` fetches Node 24 from the npm registry).\n`);
  process.exit(1);
}
export {};
