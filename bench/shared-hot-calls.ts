/**
 * The shared engine's two per-request calls that need no round trip, timed alone for given source
 * trees (before/after), rounds interleaved in one process: `SharedUsageLog.record` (an event with
 * route and status, as the gateway records it; nothing is flushed) and `RedisBuckets.take` on a
 * bucket whose tokens are leased (one Redis call per `leaseTokens` decisions, the same in every tree).
 * Reports CPU ns per call (user + system of this process), medians.
 *
 *   node --import tsx bench/shared-hot-calls.ts /work/main $PWD      env: N (300000), ROUNDS (5), REDIS_URL
 */
import type pg from 'pg'
import { median } from './lib/report.ts'

const roots = process.argv.slice(2)
const N = Number(process.env.N ?? 300_000)
const ROUNDS = Number(process.env.ROUNDS ?? 5)
const keyPrefix = `tghot:${process.pid}:`
const trees = await Promise.all(
  roots.map(async (root) => ({
    root,
    usage: await import(`${root}/core/store/shared/usage.ts`),
    buckets: await import(`${root}/core/store/shared/redis-buckets.ts`),
    record: [] as number[],
    take: [] as number[],
  })),
)
const buckets = await Promise.all(
  trees.map(async (tree) => {
    const b = new tree.buckets.RedisBuckets({ url: process.env.REDIS_URL ?? 'redis://127.0.0.1:6379', keyPrefix, leaseTokens: 100 })
    await b.connect()
    return b
  }),
)
// The rate-limit plugin passes one string object per project bucket; so does this.
const bucket = 'rate:project:bench'
try {
  for (let round = 0; round < ROUNDS; round++) {
    for (const [i, tree] of trees.entries()) {
      // Nothing reaches PostgreSQL: record() only adds to the sums in memory.
      const log = new tree.usage.SharedUsageLog(undefined as unknown as pg.Pool)
      const before = process.cpuUsage()
      for (let k = 0; k < N; k++) log.record({ projectId: 'bench', apiType: 'PRIVNET_RPC', at: 1_790_000_000_000 + k, requests: 1, credits: 1, errors: 0, route: 'bench-typical', status: 200, latencyMs: 1.5 })
      const recorded = process.cpuUsage(before)
      tree.record.push(((recorded.user + recorded.system) * 1000) / N)
      const takes = Math.round(N / 3)
      const start = process.cpuUsage()
      for (let k = 0; k < takes; k++) await buckets[i]!.take(bucket, 1e9, 1e9)
      const taken = process.cpuUsage(start)
      tree.take.push(((taken.user + taken.system) * 1000) / takes)
    }
  }
  console.log('| tree | usage record, CPU ns/event | per round | leased take, CPU ns/decision | per round |\n|---|---:|---|---:|---|')
  for (const t of trees) console.log(`| ${t.root} | ${median(t.record).toFixed(0)} | ${t.record.map((v) => v.toFixed(0)).join(' / ')} | ${median(t.take).toFixed(0)} | ${t.take.map((v) => v.toFixed(0)).join(' / ')} |`)
} finally {
  for (const b of buckets) {
    for await (const keys of b.client.scanIterator({ MATCH: `${keyPrefix}*`, COUNT: 500 })) if (keys.length) await b.client.del(keys)
    await b.close()
  }
}
