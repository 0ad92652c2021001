// The fuzz of the sessions and tokens operations (test/fixtures/fuzz-cases.ts FUZZ_GROUPS); its
// properties are listed at the top of test/api/fuzz.test.ts. FUZZ_SEED, FUZZ_RUNS and FUZZ_SHRINK
// apply as there.
import { fuzzGroup } from '../fixtures/fuzz-run.js';

fuzzGroup('session');
