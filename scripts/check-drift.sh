#!/usr/bin/env bash
# Fails when generated artefacts no longer match their sources:
#  - generated/api.d.ts must be what openapi-typescript makes of openapi.yaml;
#  - src/store/migrations must already contain every change of src/store/schema.ts.
set -euo pipefail
cd "$(dirname "$0")/.."

npx openapi-typescript openapi.yaml -o generated/api.d.ts --check >/dev/null 2>&1 || {
  echo "drift: generated/api.d.ts is out of date with openapi.yaml; run 'npm run generate' and commit." >&2
  exit 1
}

before=$(ls src/store/migrations/*.sql | sort)
npx drizzle-kit generate --name drift-check >/dev/null 2>&1
after=$(ls src/store/migrations/*.sql | sort)
if [ "$before" != "$after" ]; then
  git checkout -- src/store/migrations/meta 2>/dev/null || true
  comm -13 <(echo "$before") <(echo "$after") | xargs rm -f
  echo "drift: src/store/schema.ts has changes with no migration; run 'npm run db:generate' and commit." >&2
  exit 1
fi
echo "no drift: generated/ and migrations match their sources"
