/**
 * `tollgate start --workers N` on the embedded engine: a real primary process forking real workers
 * that share the public listener. Both workers answer; credits stay exact across them (one ledger,
 * owned by the primary); /metrics on the primary sums the workers; a settings change made through
 * the admin API is enforced by every worker; a killed worker is replaced; SIGTERM drains an
 * in-flight request before the primary exits 0; a bad --workers value exits 2.
 */
import t from 'tap'
import { execFile } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { promisify } from 'node:util'
import { request } from 'undici'
import { hashCredential } from '../../core/projects/projects.ts'
import { BIN, startGatewayProcess, type GatewayProcess } from '../helpers/gateway-process.ts'
import { startTestUpstream, type TestUpstream } from '../helpers/upstream.ts'
import { rawRequest } from '../helpers/http.ts'

const run = promisify(execFile)
// Two workers plus a replacement each load the TypeScript sources: slow on a busy 2-core machine.
t.setTimeout(300_000)
const fresh = (name: string) => `tk_${name}_${randomBytes(12).toString('hex')}`
const KEY = { big: fresh('big'), tiny: fresh('tiny') }
const ADMIN_TOKEN = fresh('admin')

function config(up: TestUpstream): string {
  return `
version: 1
server: { listen: { port: 0 }, drainTimeoutMs: 5000 }
admin: { listen: { port: 0 }, tokenHash: ${hashCredential(ADMIN_TOKEN)} }
store: { dataDir: '{{DIR}}/data' }
watch: false
projects:
  - id: big
    plan: enterprise
    scopes: [zkpaas]
    credits: { allocation: 100000 }
    keys: [{ label: main, hash: ${hashCredential(KEY.big)} }]
  - id: tiny
    plan: enterprise
    scopes: [zkpaas]
    credits: { allocation: 25 }
    keys: [{ label: main, hash: ${hashCredential(KEY.tiny)} }]
upstreams:
  echo: { url: '${up.url}' }
routes:
  - name: prove
    path: /zk/:apiKey/prove
    rewrite: /prove
    upstream: echo
    plugins:
      - { name: key-in-path-auth, config: { param: apiKey, scope: zkpaas } }
      - { name: credit-meter, config: { apiType: PRIVNET_ZKPAAS, cost: 1 } }
  - name: batch
    methods: [POST]
    path: /zk/:apiKey/prove-batch
    rewrite: /prove-batch
    upstream: echo
    plugins:
      - { name: key-in-path-auth, config: { param: apiKey, scope: zkpaas } }
      - { name: zk-features, config: { requireFeatures: [proveBatch] } }
  - name: slow
    path: /zk/:apiKey/slow
    rewrite: /slow-headers
    upstream: echo
    plugins:
      - { name: key-in-path-auth, config: { param: apiKey, scope: zkpaas } }
`
}

/** Worker pids seen in access lines for `route` (the primary logs none). */
function servingPids(gw: GatewayProcess, route: string): Set<number> {
  const pids = new Set<number>()
  for (const line of gw.output) {
    if (!line.startsWith('{')) continue
    const entry = JSON.parse(line)
    if (entry.route === route && entry.status !== undefined) pids.add(entry.pid)
  }
  return pids
}

async function waitFor<T>(probe: () => T | Promise<T>, ok: (value: T) => boolean, timeoutMs = 10_000): Promise<T> {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    const value = await probe()
    if (ok(value) || Date.now() > deadline) return value
    await new Promise((r) => setTimeout(r, 50))
  }
}

/** One request on a new connection, so the cluster spreads them over the workers. */
const fresh1 = (gw: GatewayProcess, path: string, method = 'GET') => rawRequest(gw.url, path, { method, headers: method === 'POST' ? { 'content-type': 'application/json' } : {}, body: method === 'POST' ? '{}' : undefined })

t.test('workers on the embedded engine', async (t) => {
  const up = await startTestUpstream()
  const gw = await startGatewayProcess(config(up), { args: ['--workers', '2'], startTimeoutMs: 90_000 })
  t.teardown(async () => {
    await gw.stop('SIGKILL')
    for (const pid of servingPids(gw, 'prove')) {
      try {
        process.kill(pid, 'SIGKILL')
      } catch {
        // already gone
      }
    }
    await up.close()
  })
  const primaryPid = gw.child.pid!
  const metricsOf = async () => (await request(gw.adminUrl + '/metrics')).body.text()

  await t.test('both workers answer on the one listener', async (t) => {
    const statuses = []
    for (let i = 0; i < 40; i++) statuses.push((await fresh1(gw, `/zk/${KEY.big}/prove`)).status)
    t.same(new Set(statuses), new Set([200]))
    const pids = await waitFor(() => servingPids(gw, 'prove'), (p) => p.size >= 2, 5000)
    t.equal(pids.size, 2, `two worker pids answered: ${[...pids].join(', ')}`)
    t.notOk(pids.has(primaryPid), 'the primary serves no request itself')
  })

  await t.test('credits are exact across workers: one ledger', async (t) => {
    const answers = await Promise.all(Array.from({ length: 75 }, () => fresh1(gw, `/zk/${KEY.tiny}/prove`)))
    const ok = answers.filter((a) => a.status === 200).length
    const refused = answers.filter((a) => a.status === 402).length
    t.equal(ok, 25, 'exactly the allocation is served')
    t.equal(refused, 50)
    const usage = await request(gw.adminUrl + '/admin/projects/tiny/usage', { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } })
    const body: any = await usage.body.json()
    t.equal(body.balance.used, 25, 'the ledger agrees')
  })

  await t.test('/metrics on the primary is the sum over the workers', async (t) => {
    const text = await metricsOf()
    const served = [...text.matchAll(/^tollgate_http_requests_total\{route="prove",[^}]*status_class="2xx"\} (\d+)$/gm)].map((m) => Number(m[1]))
    t.same(served, [65], '40 + 25 answers counted once each')
    t.match(text, /^tollgate_workers_ready 2$/m)
  })

  await t.test('a settings change through the admin API is enforced by every worker', async (t) => {
    t.equal((await fresh1(gw, `/zk/${KEY.big}/prove-batch`, 'POST')).status, 403)
    const patched = await request(gw.adminUrl + '/admin/projects/big', {
      method: 'PATCH',
      headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' },
      body: JSON.stringify({ features: { proveBatch: true } }),
    })
    t.equal(patched.statusCode, 200)
    await patched.body.dump()
    const started = Date.now()
    const statuses = await waitFor(
      () => Promise.all(Array.from({ length: 12 }, () => fresh1(gw, `/zk/${KEY.big}/prove-batch`, 'POST').then((a) => a.status))),
      (all) => all.every((s) => s === 200),
      5000,
    )
    t.same(new Set(statuses), new Set([200]), `all workers enforce it after ${Date.now() - started} ms`)
    t.equal(servingPids(gw, 'batch').size, 2, 'answered by both workers')
  })

  await t.test('a worker that dies is replaced', async (t) => {
    const [victim] = servingPids(gw, 'prove')
    process.kill(victim, 'SIGKILL')
    await gw.waitFor(/worker exited unexpectedly/)
    const replaced = (text: string) => /^tollgate_worker_restarts_total 1$/m.test(text) && /^tollgate_workers_ready 2$/m.test(text)
    // A replacement loads the TypeScript sources again: seconds on a busy machine.
    t.ok(replaced(await waitFor(() => metricsOf(), replaced, 90_000)), 'the primary forked a replacement and it is ready')
    const before = servingPids(gw, 'prove')
    for (let i = 0; i < 30; i++) t.equal((await fresh1(gw, `/zk/${KEY.big}/prove`)).status, 200)
    const after = await waitFor(() => servingPids(gw, 'prove'), (p) => p.size > before.size, 5000)
    const newcomers = [...after].filter((pid) => !before.has(pid))
    t.equal(newcomers.length, 1, 'a new worker pid answers')
    t.notOk(newcomers.includes(victim))
  })

  await t.test('SIGTERM drains in-flight requests, then the primary exits 0', async (t) => {
    const slow = fresh1(gw, `/zk/${KEY.big}/slow?ms=1500`)
    await waitFor(() => up.received.filter((r) => r.url.startsWith('/slow-headers')).length, (n) => n >= 1, 5000)
    gw.child.kill('SIGTERM')
    const answer = await slow
    t.equal(answer.status, 200, 'the request in flight was answered')
    t.equal(answer.body, 'late')
    t.equal(await gw.exited, 0)
    await t.rejects(fresh1(gw, `/zk/${KEY.big}/prove`), 'the listener is closed')
  })
})

t.test('a bad --workers value exits 2 and says why', async (t) => {
  for (const value of ['0', 'many', '1000']) {
    const failed = await run(process.execPath, [BIN, 'start', '-c', '/nonexistent.yaml', '--workers', value]).then(
      () => ({ code: 0, stderr: '' }),
      (error) => ({ code: error.code, stderr: String(error.stderr) }),
    )
    t.equal(failed.code, 2, `--workers ${value}`)
    t.match(failed.stderr, /--workers must be a whole number from 1 to 64, or auto/)
  }
})
