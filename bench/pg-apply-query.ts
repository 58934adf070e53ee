/**
 * Client CPU of one `tollgate_apply` round trip: pg's general query path (`client.query({ name,
 * text, values })`, what pg.ts sent before) against the batch's own submittable (apply-query.ts),
 * in one run with rounds interleaved. The server side is a stand-in function in a schema of this
 * bench's own (dropped at the end) that returns one jsonb result per op, so only the client's work
 * differs between the two. Reports µs of this process's CPU (process.cpuUsage) per batch, for N
 * sequential batches on one connection and for N batches spread over 4 connections at once.
 *
 *   node --import tsx bench/pg-apply-query.ts [--batches 4000] [--ops 4] [--rounds 4]
 */
import { randomBytes } from 'node:crypto'
import { parseArgs } from 'node:util'
import pg from 'pg'
import { ApplyQuery } from '../core/store/shared/apply-query.ts'

const { values: args } = parseArgs({ options: { batches: { type: 'string', default: '4000' }, ops: { type: 'string', default: '4' }, rounds: { type: 'string', default: '4' }, url: { type: 'string', default: process.env.TOLLGATE_TEST_POSTGRES ?? 'postgres://postgres@127.0.0.1:5432/test' } } })
const batches = Number(args.batches)
const opsPerBatch = Number(args.ops)
const rounds = Number(args.rounds)
const schema = `tg_bench_${randomBytes(5).toString('hex')}`
const STATEMENT = { name: 'tollgate_apply', text: 'SELECT tollgate_apply($1::jsonb, $2) AS r' }
const ops = JSON.stringify(Array.from({ length: opsPerBatch }, (_, i) => ({ o: 'draw', l: `lease-${i}`, r: `request-${i}`, a: 1 })))

type Send = (client: pg.Client) => Promise<unknown>
const viaQuery: Send = async (client) => (await client.query<{ r: unknown[] }>({ ...STATEMENT, values: [ops, 'bench'] })).rows[0]!.r
const viaApplyQuery: Send = (client) => client.query(new ApplyQuery(STATEMENT, [ops, 'bench'])).promise

async function connect(): Promise<pg.Client> {
  const client = new pg.Client({ connectionString: args.url, options: `-c search_path=${schema}`, query_timeout: 15_000 })
  await client.connect()
  return client
}

/** µs of CPU per batch for `count` batches, `clients.length` in flight at once. */
async function measure(send: Send, clients: pg.Client[], count: number): Promise<number> {
  const start = process.cpuUsage()
  let left = count
  await Promise.all(clients.map(async (client) => {
    while (left > 0) {
      left--
      const result = (await send(client)) as unknown[]
      if (result.length !== opsPerBatch) throw new Error('wrong result')
    }
  }))
  const used = process.cpuUsage(start)
  return (used.user + used.system) / count
}

const admin = new pg.Client({ connectionString: args.url })
await admin.connect()
await admin.query(`CREATE SCHEMA ${schema}`)
await admin.query(`CREATE FUNCTION ${schema}.tollgate_apply(ops jsonb, owner text) RETURNS jsonb LANGUAGE sql AS $$
  SELECT coalesce(jsonb_agg(jsonb_build_object('ok', true, 'used', 1)), '[]'::jsonb) FROM jsonb_array_elements(ops) $$`)
try {
  const one = [await connect()]
  const four = [await connect(), await connect(), await connect(), await connect()]
  const sends: [string, Send][] = [['pg Query', viaQuery], ['ApplyQuery', viaApplyQuery]]
  for (const [, send] of sends) { await measure(send, one, 500); await measure(send, four, 500) } // warm up
  const totals = new Map<string, number[]>()
  for (let round = 0; round < rounds; round++) {
    for (const [name, send] of round % 2 === 0 ? sends : [...sends].reverse()) {
      for (const [shape, clients] of [['sequential', one], ['4 at once', four]] as const) {
        const key = `${name}, ${shape}`
        totals.set(key, [...(totals.get(key) ?? []), await measure(send, clients, batches)])
      }
    }
  }
  console.log(`${batches} batches of ${opsPerBatch} ops per measure, ${rounds} rounds interleaved; client µs CPU per batch (median [min–max])`)
  for (const [key, values] of totals) {
    const sorted = [...values].sort((a, b) => a - b)
    console.log(`${key.padEnd(26)} ${sorted[Math.floor(sorted.length / 2)]!.toFixed(1)} [${sorted[0]!.toFixed(1)}–${sorted.at(-1)!.toFixed(1)}]`)
  }
  for (const client of [...one, ...four]) await client.end()
} finally {
  await admin.query(`DROP SCHEMA ${schema} CASCADE`)
  await admin.end()
}
