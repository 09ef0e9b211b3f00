/**
 * One HNSW graph and its file: search by cosine, deletion, growth past the initial capacity, compaction, and load
 * refusing (→ rebuild) a missing, stale, truncated or corrupt file instead of handing it to the native reader.
 */
import { readFileSync, rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import t from 'tap'
import { VectorIndex } from '../src/retrieval/vector-index.js'

const DIM = 16
function unit(seed: number): Float32Array {
  const v = new Float32Array(DIM)
  let x = seed * 9301 + 49297
  for (let i = 0; i < DIM; i++) {
    x = (x * 9301 + 49297) % 233280
    v[i] = x / 233280 - 0.5
  }
  const n = Math.hypot(...v)
  return v.map((y) => y / n)
}

t.test('finds the nearest vectors, never deleted ones, and grows past its capacity', async (t) => {
  const idx = VectorIndex.create(DIM, undefined, 16)
  for (let i = 0; i < 100; i++) idx.add(i * 10, unit(i))
  t.equal(idx.size, 100, 'resized past the initial 16')
  const hits = idx.search(unit(42), 3)
  t.equal(hits[0]?.label, 420)
  t.ok(Math.abs((hits[0]?.score ?? 0) - 1) < 1e-5, 'cosine similarity 1 for the same vector')
  idx.remove(420)
  t.equal(idx.size, 99)
  t.equal(idx.deleted, 1)
  t.notOk(idx.search(unit(42), 10).some((h) => h.label === 420))
  t.equal(idx.search(unit(1), 500).length, 99, 'k above the live count returns all live vectors')
  t.throws(() => idx.add(5, new Float32Array(3)), RangeError)
  const compact = VectorIndex.create(DIM, undefined, 99)
  for (const l of Array.from({ length: 100 }, (_, i) => i * 10).filter((l) => l !== 420)) compact.add(l, idx.vector(l))
  t.equal(compact.size, 99)
  t.equal(compact.deleted, 0)
  t.equal(compact.search(unit(7), 1)[0]?.label, 70)
})

t.test('load accepts only a current, intact file', async (t) => {
  const dir = t.testdir()
  const file = join(dir, 'ns.hnsw')
  const idx = VectorIndex.create(DIM)
  for (let i = 0; i < 50; i++) idx.add(i, unit(i))
  idx.remove(3)
  await idx.save(file, { version: 7 })
  const expect = { dimension: DIM, version: 7, count: 49 }

  const loaded = await VectorIndex.load(file, expect)
  t.ok(loaded, 'current file loads')
  t.equal(loaded?.size, 49)
  t.equal(loaded?.deleted, 1)
  t.equal(loaded?.search(unit(9), 1)[0]?.label, 9)
  t.notOk(loaded?.search(unit(3), 5).some((h) => h.label === 3), 'deletion marks survive a save')

  t.equal(await VectorIndex.load(file, { ...expect, version: 8 }), undefined, 'stale version')
  t.equal(await VectorIndex.load(file, { ...expect, count: 50 }), undefined, 'stale count')
  t.equal(await VectorIndex.load(file, { ...expect, dimension: 32 }), undefined, 'other dimension')
  t.equal(await VectorIndex.load(join(dir, 'missing.hnsw'), expect), undefined, 'missing')

  const good = readFileSync(file)
  const flipped = Buffer.from(good)
  flipped[Math.floor(flipped.length / 2)] = (flipped[Math.floor(flipped.length / 2)] as number) ^ 0xff
  writeFileSync(file, flipped)
  t.equal(await VectorIndex.load(file, expect), undefined, 'one flipped byte')
  writeFileSync(file, good.subarray(0, 64))
  t.equal(await VectorIndex.load(file, expect), undefined, 'truncated')
  writeFileSync(file, good)
  writeFileSync(`${file}.json`, '{not json')
  t.equal(await VectorIndex.load(file, expect), undefined, 'corrupt sidecar')
  rmSync(`${file}.json`)
  t.equal(await VectorIndex.load(file, expect), undefined, 'missing sidecar')
})
