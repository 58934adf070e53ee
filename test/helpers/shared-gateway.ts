/**
 * Gateways on the shared engine for the end-to-end tests: the config, a load driver that records
 * every answer with its request id, and the ledger comparison (2xx seen by the client vs committed
 * holds in PostgreSQL). Every request carries its own x-request-id, which starts the id of its
 * credit hold, so each 2xx can be matched with its charge.
 */
import { randomBytes } from 'node:crypto'
import type { Test } from 'tap'
import type { Pool } from 'undici'
import { hashCredential } from '../../core/projects/projects.ts'
import type { GatewayProcess } from './gateway-process.ts'
import type { TestUpstream } from './upstream.ts'
import { sql } from './shared-servers.ts'

export const KEY = `tk_shared_${randomBytes(12).toString('hex')}`
export const ADMIN_TOKEN = `admin_${randomBytes(12).toString('hex')}`

export interface Setup {
  postgres: string
  redis: string
  schema: string
  prefix: string
  allocation: number
  up: TestUpstream
  rate?: { capacity: number; refillPerSecond: number }
}

export function config(s: Setup): string {
  const rate = s.rate ?? { capacity: 1_000_000, refillPerSecond: 1_000_000 }
  return `
version: 1
server: { listen: { port: 0 }, drainTimeoutMs: 2000 }
admin: { listen: { port: 0 }, tokenHash: ${hashCredential(ADMIN_TOKEN)} }
store: { engine: shared, postgres: '${s.postgres}', redis: '${s.redis}', schema: ${s.schema}, keyPrefix: '${s.prefix}', instanceTimeoutMs: 5000 }
log: { access: false }
watch: false
projects:
  - id: p
    plan: enterprise
    scopes: [rpc]
    credits: { allocation: ${s.allocation}, period: month }
    keys: [{ hash: ${hashCredential(KEY)} }]
upstreams:
  echo: { url: '${s.up.url}', connections: 128 }
routes:
  - name: metered
    path: /rpc/:apiKey/*rest
    rewrite: /*rest
    upstream: echo
    plugins:
      - { name: key-in-path-auth, config: { scope: rpc } }
      - { name: credit-meter, config: { apiType: PRIVNET_RPC, cost: 1 } }
  - name: limited-deny
    path: /deny/:apiKey/*rest
    rewrite: /*rest
    upstream: echo
    plugins:
      - { name: key-in-path-auth, config: { scope: rpc } }
      - { name: rate-limit, config: { by: project, capacity: ${rate.capacity}, refillPerSecond: ${rate.refillPerSecond}, onStoreError: deny } }
      - { name: credit-meter, config: { apiType: PRIVNET_RPC, cost: 1 } }
  - name: limited-allow
    path: /allow/:apiKey/*rest
    rewrite: /*rest
    upstream: echo
    plugins:
      - { name: key-in-path-auth, config: { scope: rpc } }
      - { name: rate-limit, config: { by: project, capacity: ${rate.capacity}, refillPerSecond: ${rate.refillPerSecond}, onStoreError: allow, bucket: allow } }
      - { name: credit-meter, config: { apiType: PRIVNET_RPC, cost: 1 } }
`
}

export interface Answer {
  id: string
  status: number | 'error'
  code?: string
  /** When the request was sent and when its answer (or failure) came, epoch ms. */
  sentAt: number
  at: number
}

/** One request with its own request id; network failures are recorded, not thrown. */
export async function send(pool: Pool, route: string, id: string, rest = 'call'): Promise<Answer> {
  const sentAt = Date.now()
  try {
    const res = await pool.request({ path: `/${route}/${KEY}/${rest}`, method: 'GET', headers: { 'x-request-id': id } })
    const body = await res.body.text()
    const code = res.statusCode >= 400 ? (JSON.parse(body) as { error?: { code?: string } }).error?.code : undefined
    return { id, status: res.statusCode, code, sentAt, at: Date.now() }
  } catch {
    return { id, status: 'error', sentAt, at: Date.now() }
  }
}

/** Committed holds per request id, and holds still pending. */
export async function ledger(schema: string): Promise<{ committed: Map<string, number>; pending: number; used: number }> {
  const rows = await sql<{ id: string; state: string }>(schema, 'SELECT id, state FROM credit_holds')
  const committed = new Map<string, number>()
  let pending = 0
  for (const row of rows) {
    if (row.state === 'committed') {
      const requestId = row.id.split(':')[0]!
      committed.set(requestId, (committed.get(requestId) ?? 0) + 1)
    } else if (row.state === 'pending') pending++
  }
  const balance = await sql<{ used: string }>(schema, "SELECT coalesce(sum(used), 0) AS used FROM credit_balances WHERE project_id = 'p'")
  return { committed, pending, used: Number(balance[0]!.used) }
}

/** Waits until no hold is pending (the reaper or re-sent releases did their work). */
export async function settled(schema: string, timeoutMs = 40_000): Promise<Awaited<ReturnType<typeof ledger>>> {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    const state = await ledger(schema)
    if (state.pending === 0 || Date.now() > deadline) return state
    await new Promise((r) => setTimeout(r, 200))
  }
}

/** The comparison the issue asks for: 2xx seen by the client vs committed holds in the ledger. */
export function compare(answers: Answer[], committed: Map<string, number>) {
  const served = new Set(answers.filter((a) => a.status === 200).map((a) => a.id))
  const lost = [...served].filter((id) => !committed.has(id))
  const doubled = [...committed].filter(([, n]) => n > 1).map(([id]) => id)
  const unserved = [...committed.keys()].filter((id) => !served.has(id))
  return { served: served.size, lost, doubled, unserved }
}

/** `workers` loops sending requests until `until()` or `maxRequests`; a short pause after a refusal. */
export async function load(pools: Pool[], route: string, prefix: string, workers: number, maxRequests: number, until: () => boolean): Promise<Answer[]> {
  const answers: Answer[] = []
  let next = 0
  await Promise.all(
    Array.from({ length: workers }, async (_, w) => {
      while (!until() && next < maxRequests) {
        const i = next++
        const answer = await send(pools[(i + w) % pools.length]!, route, `${prefix}-${i}`, i % 3 === 0 ? 'slow-headers?ms=20' : 'call')
        answers.push(answer)
        if (answer.status !== 200) await new Promise((r) => setTimeout(r, 10))
      }
    }),
  )
  return answers
}

export function histogram(answers: Answer[]): Record<string, number> {
  const counts: Record<string, number> = {}
  for (const a of answers) counts[`${a.status} ${a.code ?? ''}`.trim()] = (counts[`${a.status} ${a.code ?? ''}`.trim()] ?? 0) + 1
  return counts
}

/** The gateway's last log lines when the test failed (why a process died or refused). */
export function dumpOnFailure(t: Test, ...gateways: GatewayProcess[]): void {
  t.teardown(() => {
    if (t.passing()) return
    for (const gw of gateways) t.comment(gw.output.slice(-15).join('\n'))
  })
}

export async function readyz(gw: GatewayProcess): Promise<number> {
  const res = await fetch(`${gw.adminUrl}/readyz`)
  await res.arrayBuffer()
  return res.status
}

