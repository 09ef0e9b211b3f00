/**
 * A namespace as a short fixed-length name: recall's namespace for a session, and a namespace's graph file name. The
 * first 40 hex digits of SHA-256 (160 bits: no collision in practice) keep file names short and free of the
 * characters tenants and session ids may hold. Changing it renames every graph file and recall namespace on disk.
 */
import { createHash } from 'node:crypto'

export function namespaceHash(key: string): string {
  return createHash('sha256').update(key).digest('hex').slice(0, 40)
}
