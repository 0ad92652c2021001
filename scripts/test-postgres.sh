#!/usr/bin/env bash
# The API suite again, on PostgreSQL (TEST_ADAPTER=postgres: makeApp builds each app on a fresh
# database of TEST_DATABASE_URL's server). .ci/run sets TEST_DATABASE_URL; without it this pass
# is skipped, and says so.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -z "${TEST_DATABASE_URL:-}" ]; then
  echo "PostgreSQL pass of the API suite skipped: TEST_DATABASE_URL is not set (scripts/pg-test-server.sh start prints it)"
  exit 0
fi
echo "PostgreSQL pass of the API suite on $TEST_DATABASE_URL"
TEST_ADAPTER=postgres exec npx tap --disable-coverage --jobs 4 test/api
