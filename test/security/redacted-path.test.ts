/**
 * `ctx.redactedPath` is what the plugin contract tells plugin authors to log instead of the path,
 * which may hold an API key (core/proxy/plugin.ts: "Never log it raw: it may hold a key; use
 * `redactedPath`"). It was the raw path, key included, in every phase a plugin runs: the core
 * replaced the key by `***` only when it wrote its own access line, after the `done` phase. A
 * plugin that followed the contract and logged `redactedPath` wrote the client's key to its log.
 *
 * Now it is the path with every credential param as `***` as soon as the route matched, in every
 * phase. Against a real gateway process; the fixture plugin appends what it read to a file.
 */
import t from 'tap'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { request } from 'undici'
import { hashCredential } from '../../core/projects/projects.ts'
import { startGatewayProcess } from '../helpers/gateway-process.ts'
import { startTestUpstream } from '../helpers/upstream.ts'
import { tempDir } from '../helpers/temp.ts'

const RECORDER = new URL('../fixtures/phase-recorder.ts', import.meta.url).pathname
const KEY = 'redacted-path-key-0123456789abcdef'

t.test('a plugin reading ctx.redactedPath never sees the API key of the path', async (t) => {
  const up = await startTestUpstream()
  t.teardown(() => up.close())
  const dir = tempDir('tollgate-redacted-path-')
  const file = join(dir, 'phases.txt')
  const gw = await startGatewayProcess(`
version: 1
server: { listen: { port: 0 } }
admin: { listen: { port: 0 } }
store: { dataDir: '{{DIR}}/data' }
log: { access: true }
watch: false
customPlugins:
  - path: ${RECORDER}
projects:
  - id: acme
    plan: enterprise
    scopes: [rpc]
    credits: { allocation: 1000, period: month }
    keys: [{ label: main, hash: ${hashCredential(KEY)} }]
upstreams:
  echo: { url: '${up.url}' }
routes:
  - name: keyed
    path: /keyed/:apiKey/data
    rewrite: /data
    upstream: echo
    plugins:
      - { name: key-in-path-auth, config: { param: apiKey, scope: rpc } }
      - { name: phase-recorder, config: { file: '${file}', paths: true } }
`, { dir, startTimeoutMs: 90_000 })
  t.teardown(() => gw.stop())

  const served = await request(`${gw.url}/keyed/${KEY}/data`)
  await served.body.text()
  t.equal(served.statusCode, 200, 'the request was served')
  // `done` runs after the answer finished: wait for its line.
  let lines: string[] = []
  for (let i = 0; i < 100 && !lines.some((l) => l.includes(' done:')); i++) {
    await new Promise((r) => setTimeout(r, 50))
    lines = readFileSync(file, 'utf8').split('\n').filter(Boolean)
  }
  t.same(lines.map((l) => l.split(' ')[1]), ['request', 'response:200', 'done:200'], 'the plugin ran in every phase')
  for (const line of lines) {
    t.notOk(line.includes(KEY), `no key in what the plugin read: ${line.replace(KEY, '<KEY>')}`)
    t.ok(line.endsWith(' path=/keyed/***/data'), `the key is *** in ${line.split(' ')[1]}`)
  }
  // The access line the core writes is redacted too.
  const access = gw.output.find((l) => l.includes('"route":"keyed"'))
  t.ok(access, 'the access line was written')
  t.notOk(access?.includes(KEY), 'no key on the access line')
  t.match(access, /"path":"\/keyed\/\*\*\*\/data"/)
})
