/** The benches' PostgreSQL helpers: a database of their own on the server under test, and that server's CPU. */
import { randomBytes } from 'node:crypto'
import { readFileSync } from 'node:fs'
import pg from 'pg'

/** A fresh database on the server of `base`, dropped by the returned function. */
export async function freshDatabase(base: string): Promise<{ url: string; drop: () => Promise<void> }> {
  const name = `rg_bench_${randomBytes(4).toString('hex')}`
  const admin = new pg.Client({ connectionString: base })
  await admin.connect()
  await admin.query(`CREATE DATABASE ${name}`)
  await admin.end()
  const url = new URL(base)
  url.pathname = `/${name}`
  return {
    url: url.toString(),
    drop: async () => {
      const c = new pg.Client({ connectionString: base })
      await c.connect()
      await c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`)
      await c.end()
    },
  }
}

/**
 * CPU time, µs, of the PostgreSQL server's processes (backends, WAL writer, checkpointer …) but the one asking, read
 * from /proc: the server must run on this machine (it does in the bench's setup: loopback). Its backends compete with
 * the gateways for the same cores, so their CPU per request is part of what a store costs here. Undefined when /proc
 * cannot be read (another host, another OS).
 */
export async function serverCpu(base: string): Promise<{ read: () => Promise<number>; close: () => Promise<void> } | undefined> {
  const c = new pg.Client({ connectionString: base })
  await c.connect()
  const read = async (): Promise<number> => {
    const res = await c.query<{ pid: number }>('SELECT pid FROM pg_stat_activity WHERE pid <> pg_backend_pid()')
    let ticks = 0
    for (const { pid } of res.rows) {
      try {
        // Fields 14 and 15 (utime, stime) after the command name's closing parenthesis.
        const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
        const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
        ticks += Number(f[11]) + Number(f[12])
      } catch {
        // The process ended between the query and the read (an idle connection closed): its time is not counted.
      }
    }
    // 100 ticks a second on Linux (CLK_TCK).
    return ticks * 10_000
  }
  try {
    await read()
    return { read, close: () => c.end() }
  } catch {
    await c.end()
    return undefined
  }
}
