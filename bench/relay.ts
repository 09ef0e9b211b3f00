/**
 * Issue 2's benchmark on its own: recallgate against a direct call and a bare undici pass-through, interleaved.
 *
 *   npm run build && node dist/bench/relay.js [--quick] [--profile]
 *
 * Method and results: docs/benchmarks.md.
 */
import { runSuite } from './run-all.js'

await runSuite(process.argv.slice(2), ['relay'])
