// Layer rules (DESIGN section 1), checked in CI by `npm run lint:layers`.
/** @type {import('dependency-cruiser').IConfiguration} */
module.exports = {
  forbidden: [
    {
      name: 'domain-is-pure',
      comment: 'src/domain imports nothing but itself: no fastify, drizzle, sqlite, node I/O, or other layers.',
      severity: 'error',
      from: { path: '^src/domain/' },
      to: { pathNot: '^src/domain/' },
    },
    {
      name: 'drivers-only-in-adapters',
      comment: 'Only src/adapters talks to the database drivers.',
      severity: 'error',
      from: { pathNot: '^src/adapters/' },
      to: { path: 'node_modules/(better-sqlite3|drizzle-orm|pg)/' },
      },
    {
      name: 'handlers-do-not-reach-into-drivers',
      comment: 'HTTP handlers go through the store, never around it.',
      severity: 'error',
      from: { path: '^src/http/' },
      to: { path: '^src/adapters/sqlite/(schema|db)\\.ts$', dependencyTypesNot: ['type-only'] },
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
