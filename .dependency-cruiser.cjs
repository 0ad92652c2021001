// Layer rules (DESIGN section 1), checked in CI by `npm run lint:layers`:
// http -> services -> domain + ports <- adapters; main.ts alone picks and builds the adapters.
/** @type {import('dependency-cruiser').IConfiguration} */
module.exports = {
  forbidden: [
    {
      name: 'domain-is-pure',
      comment: 'src/domain imports nothing but itself (and the types generated from openapi.yaml: next rule): no fastify, drizzle, sqlite, node I/O, or other layers.',
      severity: 'error',
      from: { path: '^src/domain/' },
      to: { pathNot: '^(src/domain/|generated/[^/]+[.]d[.]ts$)' },
    },
    {
      name: 'domain-takes-only-types-from-generated',
      comment: 'src/domain may name the spec\'s types (generated/*.d.ts, declarations with no code, e.g. the webhook payloads: domain/webhook-payloads.ts), with `import type` only.',
      severity: 'error',
      from: { path: '^src/domain/' },
      to: { path: '^generated/', dependencyTypesNot: ['type-only'] },
    },
    {
      name: 'ports-are-interfaces',
      comment: 'src/ports names what services need, in domain terms: it imports the domain and other ports only.',
      severity: 'error',
      from: { path: '^src/ports/' },
      to: { pathNot: '^src/(ports|domain)/' },
    },
    {
      name: 'services-see-domain-and-ports',
      comment: 'Use cases import the domain, the ports and each other (and Node built-ins, e.g. crypto); never HTTP, adapters or libraries.',
      severity: 'error',
      from: { path: '^src/services/' },
      to: { pathNot: '^src/(services|domain|ports)/', dependencyTypesNot: ['core'] },
    },
    {
      name: 'adapters-only-from-main',
      comment: 'Nothing outside src/adapters imports an adapter but src/main.ts, which picks one.',
      severity: 'error',
      from: { path: '^src/', pathNot: '^src/(main\\.ts$|adapters/)' },
      to: { path: '^src/adapters/' },
    },
    {
      name: 'adapters-keep-to-themselves',
      comment: 'An adapter does not import another adapter (what several share lives in src/adapters/shared, which imports no adapter).',
      severity: 'error',
      from: { path: '^src/adapters/([^/]+)/' },
      to: { path: '^src/adapters/', pathNot: '^src/adapters/($1|shared)/' },
    },
    {
      name: 'adapters-implement-ports',
      comment: 'Adapters import ports, the domain and themselves, never services, HTTP or the push hub.',
      severity: 'error',
      from: { path: '^src/adapters/' },
      to: { path: '^src/(services|http|push)/' },
    },
    {
      name: 'adapters-take-settings-as-arguments',
      comment: 'An adapter never reads src/config.ts: main.ts reads the configuration and passes each adapter its settings (DESIGN section 1, 2026-11-28).',
      severity: 'error',
      from: { path: '^src/adapters/' },
      to: { path: '^src/config\\.ts$' },
    },
    {
      name: 'drivers-only-in-adapters',
      comment: 'Only src/adapters talks to the database drivers.',
      severity: 'error',
      from: { pathNot: '^src/adapters/' },
      to: { path: 'node_modules/(better-sqlite3|drizzle-orm|pg)/' },
    },
    {
      name: 'prom-client-only-in-adapters',
      comment: 'prom-client is a driver like the database ones: behind the metrics port (src/ports/metrics.ts), in src/adapters/prometheus.',
      severity: 'error',
      from: { pathNot: '^src/adapters/' },
      to: { path: 'node_modules/prom-client/' },
    },
    {
      name: 'push-over-ports',
      comment: 'The socket hubs work over the ports (outbox, presence, clock), never an adapter or a service.',
      severity: 'error',
      from: { path: '^src/push/' },
      to: { path: '^src/(services|http|adapters)/' },
    },
    {
      name: 'no-circular',
      severity: 'error',
      from: {},
      to: { circular: true, dependencyTypesNot: ['type-only'] },
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    enhancedResolveOptions: { exportsFields: ['exports'], conditionNames: ['import', 'require', 'node', 'default'] },
  },
};
