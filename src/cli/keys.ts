/**
 * `recallgate keys`: service keys in the gateway's store (DATA_DIR, or PostgreSQL with DATABASE_URL), the same
 * operations as the admin API (routes/admin-keys.ts) and the same JSON shape (routes/key-object.ts).
 */
import { PLANS, type Plan } from '../types.js'
import { parseArgs, reportUsage, UsageError, type CommandIo } from './args.js'

const KEYS_HELP = `Usage: recallgate keys create [--plan free|pro|premium|enterprise|unlimited] [--label TEXT]
       recallgate keys list [--json]
       recallgate keys rotate <key-id>
       recallgate keys set-plan <key-id> <plan>
       recallgate keys revoke <key-id>

Manages the service keys stored in DATA_DIR, or in PostgreSQL with DATABASE_URL (only SHA-256 hashes are stored);
prints which on stderr. Each key opens one tenant (its sessions, files and usage):
  create     a key for a new tenant; the key is printed once, on stdout
  list       every key: id, plan, created, active or revoked, tenant, label
  rotate     a new key for the same tenant, plan and label (printed once); the old key is revoked at once
  set-plan   moves the key's tenant to another plan; its data stays
  revoke     the key answers 401 key_revoked from then on

  --json     (list) one JSON array of {id, object, tenant, plan, label, created_at, revoked_at}, times in unix
             seconds as in the API

Works while the gateway runs: with DATA_DIR the gateway reads keys from the store on every request; with PostgreSQL a
new key works at once on every replica, and a revoke, rotate or plan change reaches every replica within 5 s (each
replica's key cache).
`

const LIST_HELP = `Usage: recallgate keys list [--json]

Lists every stored key, one per line: id, plan, created (ISO 8601), active or "revoked <time>", tenant, label.
  --json   one JSON array of {id, object: "service_key", tenant, plan, label, created_at, revoked_at}, times in unix
           seconds as in the admin API (GET /api/v1/admin/keys)
The raw keys are never listed (only their hashes are stored).
`

export async function run(argv: string[], io: CommandIo): Promise<number> {
  // A wrong `keys` call is answered with what is wrong and the keys help, not the general usage.
  try {
    return await keys(argv, io)
  } catch (err) {
    if (err instanceof UsageError) return reportUsage(io, err, argv[0] === 'list' ? LIST_HELP : KEYS_HELP)
    throw err
  }
}

async function keys(argv: string[], io: CommandIo): Promise<number> {
  const args = parseArgs(argv, { plan: { type: 'string' }, label: { type: 'string' }, json: { type: 'boolean' } })
  if (args.help) {
    io.stdout.write(argv[0] === 'list' ? LIST_HELP : KEYS_HELP)
    return 0
  }
  const [sub, ...rest] = args.positionals
  if (sub === undefined) throw new UsageError('keys needs a subcommand')
  if (!['create', 'list', 'rotate', 'set-plan', 'revoke'].includes(sub)) throw new UsageError(`unknown keys subcommand "${sub}"`)
  // Checked before the store is opened: a wrong call changes nothing and creates no DATA_DIR.
  const id = rest[0]
  if (sub !== 'create' && sub !== 'list' && id === undefined) throw new UsageError(`keys ${sub} needs a key id (see \`recallgate keys list\`)`)
  const plan = sub === 'create' ? planArg(args.flags.plan ?? 'pro', '--plan') : sub === 'set-plan' ? planArg(rest[1], 'set-plan') : undefined

  const { envWithDotenv, loadConfig } = await import('../config.js')
  const { openCliStores } = await import('./cli-stores.js')
  const { keyObject } = await import('../routes/key-object.js')
  const config = loadConfig(envWithDotenv(io.env, process.cwd()))
  const opened = await openCliStores(config, io)
  const repo = opened.stores.keys
  try {
    switch (sub) {
      case 'create': {
        const { key, record } = await repo.create(plan ?? 'pro', args.flags.label)
        io.stdout.write(`${key}\n`)
        io.stderr.write(`created ${record.id} (plan ${record.plan}, tenant ${record.tenant}); the key is shown only this once\n`)
        return 0
      }
      case 'list': {
        const rows = await repo.list()
        if (args.flags.json) {
          io.stdout.write(`${JSON.stringify(rows.map(keyObject), null, 2)}\n`)
          return 0
        }
        for (const r of rows) {
          const state = r.revokedAt === undefined ? 'active' : `revoked ${new Date(r.revokedAt).toISOString()}`
          io.stdout.write(`${r.id}\t${r.plan}\t${new Date(r.createdAt).toISOString()}\t${state}\t${r.tenant}${r.label ? `\t${r.label}` : ''}\n`)
        }
        if (rows.length === 0) io.stderr.write('no stored keys\n')
        return 0
      }
      case 'rotate': {
        const made = await repo.rotate(id as string)
        if (made === undefined) return noActiveKey(io, id as string)
        io.stdout.write(`${made.key}\n`)
        io.stderr.write(
          `rotated ${id} → ${made.record.id} (plan ${made.record.plan}, tenant ${made.record.tenant}); ${id} is revoked; the new key is shown only this once\n`,
        )
        return 0
      }
      case 'set-plan': {
        const record = await repo.setPlan(id as string, plan as Plan)
        if (record === undefined) return noActiveKey(io, id as string)
        io.stdout.write(`${record.id} is now on plan ${record.plan} (tenant ${record.tenant})\n`)
        return 0
      }
      default: {
        if (!(await repo.revoke(id as string))) return noActiveKey(io, id as string)
        io.stdout.write(`revoked ${id}\n`)
        return 0
      }
    }
  } finally {
    await opened.close()
  }
}

function planArg(raw: string | undefined, what: string): Plan {
  if (raw === undefined) throw new UsageError(`keys set-plan needs a plan: one of ${PLANS.join(', ')}`)
  if (!(PLANS as readonly string[]).includes(raw)) throw new UsageError(`${what === '--plan' ? '--plan' : 'the plan'} must be one of ${PLANS.join(', ')}`)
  return raw as Plan
}

function noActiveKey(io: CommandIo, id: string): number {
  io.stderr.write(`no active key with id ${id}\n`)
  return 1
}
