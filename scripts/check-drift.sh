#!/usr/bin/env bash
# Fails when generated artefacts no longer match their sources:
#  - generated/api.d.ts must be what openapi-typescript makes of openapi.yaml;
#  - src/adapters/sqlite/migrations must already contain every change of src/adapters/sqlite/schema.ts.
set -euo pipefail
cd "$(dirname "$0")/.."

npx openapi-typescript openapi.yaml -o generated/api.d.ts --check >/dev/null 2>&1 || {
  echo "drift: generated/api.d.ts is out of date with openapi.yaml; run 'npm run generate' and commit." >&2
  exit 1
}

before=$(ls src/adapters/sqlite/migrations/*.sql | sort)
npx drizzle-kit generate --name drift-check >/dev/null 2>&1
after=$(ls src/adapters/sqlite/migrations/*.sql | sort)
if [ "$before" != "$after" ]; then
  git checkout -- src/adapters/sqlite/migrations/meta 2>/dev/null || true
  comm -13 <(echo "$before") <(echo "$after") | xargs rm -f
  echo "drift: src/adapters/sqlite/schema.ts has changes with no migration; run 'npm run db:generate' and commit." >&2
  exit 1
fi
echo "no drift: generated/ and migrations match their sources"
