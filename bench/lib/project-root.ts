/** Where the checkout is, wherever the bench runs from (bench/ through tsx or tap, dist-<name>/bench/ compiled). */
import { existsSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

/** The nearest folder above this file holding a package.json. */
export function projectRoot(): string {
  let dir = dirname(fileURLToPath(import.meta.url))
  while (!existsSync(join(dir, 'package.json'))) {
    const up = dirname(dir)
    if (up === dir) throw new Error('package.json not found above ' + fileURLToPath(import.meta.url))
    dir = up
  }
  return dir
}

/** A path in the data sets shared beside the checkout (../shared/data/, see its README). */
export const sharedDataPath = (...parts: string[]): string => join(projectRoot(), '..', 'shared', 'data', ...parts)
