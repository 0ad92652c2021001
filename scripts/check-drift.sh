#!/usr/bin/env bash
# Fails when generated artefacts no longer match their sources:
#  - generated/api.d.ts must be what openapi-typescript makes of openapi.yaml;
#  - generated/frames.d.ts must be what scripts/generate-frames.ts makes of asyncapi.yaml;
#  - each dialect's migrations must already contain every change of its drizzle schema:
#    src/adapters/sqlite/migrations for src/adapters/sqlite/schema.ts (drizzle.config.ts),
#    src/adapters/postgres/migrations for src/adapters/postgres/schema.ts (drizzle.pg.config.ts).
set -euo pipefail
cd "$(dirname "$0")/.."

npx openapi-typescript openapi.yaml -o generated/api.d.ts --check >/dev/null 2>&1 || {
  echo "drift: generated/api.d.ts is out of date with openapi.yaml; run 'npm run generate' and commit." >&2
  exit 1
}
# (it says why itself: out of date, or a schema it cannot type)
npx tsx scripts/generate-frames.ts --check || exit 1

# Generates a migration and sees whether one appeared; if so, removes what was generated (the
# .sql and its snapshot, and the journal's new entry) and fails.
check_migrations() {
  local config=$1 dir=$2 schema=$3 script=$4 before after log
  before=$(find "$dir" -type f | sort)
  log=$(mktemp)
  if ! npx drizzle-kit generate --config "$config" --name drift-check >"$log" 2>&1; then
    cat "$log" >&2
    rm -f "$log"
    echo "drift: drizzle-kit could not generate from $schema" >&2
    exit 1
  fi
  rm -f "$log"
  after=$(find "$dir" -type f | sort)
  if [ "$before" != "$after" ]; then
    comm -13 <(echo "$before") <(echo "$after") | xargs rm -f
    git checkout -- "$dir/meta" 2>/dev/null || true
    echo "drift: $schema has changes with no migration; run 'npm run $script' and commit." >&2
    exit 1
  fi
}

check_migrations drizzle.config.ts src/adapters/sqlite/migrations src/adapters/sqlite/schema.ts db:generate
check_migrations drizzle.pg.config.ts src/adapters/postgres/migrations src/adapters/postgres/schema.ts db:generate:pg
echo "no drift: generated/ and both dialects' migrations match their sources"
