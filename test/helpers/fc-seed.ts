/**
 * Property tests run from a fixed seed, so CI is deterministic and a failure can be replayed: every `fc.assert` in a
 * file that imports this module uses it (fast-check prints `{ seed: N, path: ... }` with the counterexample), and
 * FC_SEED=<integer> explores another. Import it before any property runs: `import './helpers/fc-seed.js'`.
 */
import fc from 'fast-check'

const fromEnv = process.env.FC_SEED
if (fromEnv !== undefined && !/^-?\d+$/.test(fromEnv)) throw new Error(`FC_SEED must be an integer, not ${JSON.stringify(fromEnv)}`)

/** Set only when FC_SEED is: a property with its own fixed seed keeps it unless this overrides it. */
export const FC_SEED_OVERRIDE: number | undefined = fromEnv === undefined ? undefined : Number(fromEnv)
export const FC_SEED: number = FC_SEED_OVERRIDE ?? 20261121

fc.configureGlobal({ seed: FC_SEED })
