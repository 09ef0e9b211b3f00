/**
 * A CPU quota for processes under test, through a cgroup of their own (v1's `cpu` controller, or v2's `cpu.max`): a
 * replica capped at a fraction of a core behaves as one in a container with a CPU limit, so on a 2-core machine two
 * capped replicas, the database and the load generator each get the CPU they need and the replicas' own CPU is what
 * bounds the throughput. Needs root (or a delegated cgroup) and a writable cgroup filesystem; `openCpuCap` says why not
 * otherwise.
 */
import { existsSync, mkdirSync, readFileSync, rmdirSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'

export interface CpuCap {
  /** Move a process (all its threads) into the capped group. */
  add(pid: number): void
  /** Move what is left back to the parent group and remove this one. */
  close(): void
}

const ROOT = '/sys/fs/cgroup'
const PERIOD_US = 100_000

/** A new group named `name` with `cores` of CPU (0.5 = half a core), or the reason none can be made here. */
export function openCpuCap(name: string, cores: number): CpuCap | string {
  const quota = String(Math.round(cores * PERIOD_US))
  const v2 = existsSync(join(ROOT, 'cgroup.controllers'))
  const parent = v2 ? ROOT : join(ROOT, 'cpu')
  if (!v2 && !existsSync(join(parent, 'cpu.cfs_quota_us'))) return `no cgroup cpu controller at ${parent}`
  const dir = join(parent, name)
  try {
    if (v2 && !readFileSync(join(ROOT, 'cgroup.subtree_control'), 'utf8').includes('cpu')) writeFileSync(join(ROOT, 'cgroup.subtree_control'), '+cpu')
    mkdirSync(dir, { recursive: true })
    if (v2) writeFileSync(join(dir, 'cpu.max'), `${quota} ${PERIOD_US}`)
    else {
      writeFileSync(join(dir, 'cpu.cfs_period_us'), String(PERIOD_US))
      writeFileSync(join(dir, 'cpu.cfs_quota_us'), quota)
    }
  } catch (err) {
    return `cannot make the cgroup ${dir}: ${(err as Error).message}`
  }
  return {
    add: (pid) => writeFileSync(join(dir, 'cgroup.procs'), String(pid)),
    close: () => {
      // The group can only go once it is empty: whatever is still in it goes back to the parent.
      for (const pid of readFileSync(join(dir, 'cgroup.procs'), 'utf8').split('\n').filter(Boolean)) {
        try {
          writeFileSync(join(parent, 'cgroup.procs'), pid)
        } catch {
          // Exited meanwhile.
        }
      }
      rmdirSync(dir)
    },
  }
}
