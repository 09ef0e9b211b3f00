/**
 * Worker thread of `VectorIndex.buildInWorker`: builds one HNSW graph from batches of vectors and writes it to a file,
 * so a namespace's graph rebuilt from the store (a replica's first load, a missing or stale graph file) costs the
 * event loop nothing. Insertion is ≈ 160 µs a vector (vector-index.ts): 16 s of one core at 100k chunks, which the
 * main thread used to spend in 5 ms slices between requests.
 *
 * The graph is the one the main thread would build: same parameters, same seed, same insertion order.
 *
 * Messages in: `{ labels: Float64Array, vectors: Float32Array }` (row-major, `dimension` floats a label), then
 * `{ save: file }`. Out: `{ ack: n }` after each batch, `{ saved: count }` once the file is written, `{ error }`.
 */
import { parentPort, workerData } from 'node:worker_threads'
import hnswlib from 'hnswlib-node'

export interface GraphWorkerData {
  dimension: number
  m: number
  efConstruction: number
  capacity: number
  seed: number
}

export type GraphWorkerIn = { labels: Float64Array; vectors: Float32Array } | { save: string }
export type GraphWorkerOut = { ack: number } | { saved: number } | { error: string }

const port = parentPort
if (port !== null) {
  const d = workerData as GraphWorkerData
  const hnsw = new hnswlib.HierarchicalNSW('cosine', d.dimension)
  hnsw.initIndex({ maxElements: Math.max(16, d.capacity), m: d.m, efConstruction: d.efConstruction, randomSeed: d.seed })
  const row = new Array<number>(d.dimension)
  const reply = (m: GraphWorkerOut): void => port.postMessage(m)
  port.on('message', (m: GraphWorkerIn) => {
    try {
      if ('save' in m) {
        hnsw.writeIndex(m.save).then(
          () => reply({ saved: hnsw.getCurrentCount() }),
          (err: unknown) => reply({ error: String(err) }),
        )
        return
      }
      for (let i = 0; i < m.labels.length; i++) {
        // The same growth rule as VectorIndex.add, so the graph is the same as one built there.
        const max = hnsw.getMaxElements()
        if (hnsw.getCurrentCount() >= max) hnsw.resizeIndex(max * 2)
        for (let j = 0; j < d.dimension; j++) row[j] = m.vectors[i * d.dimension + j] as number
        hnsw.addPoint(row, m.labels[i] as number)
      }
      reply({ ack: m.labels.length })
    } catch (err) {
      reply({ error: String(err) })
    }
  })
}
