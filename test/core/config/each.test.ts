import t from 'tap'
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { loadConfig } from '../../../core/config/load.ts'
import { formatIssue } from '../../../core/config/source.ts'
import { expandRoutes } from '../../../core/config/each.ts'
import { tempDir } from '../../helpers/temp.ts'

const dir = tempDir('tollgate-each-')
let n = 0
async function load(text: string) {
  const file = join(dir, `gateway-${++n}.yaml`)
  writeFileSync(file, text)
  const result = await loadConfig(file, {})
  return { ...result, messages: result.issues.map(formatIssue).map((m) => m.replace(/gateway-\d+\.yaml/, 'gateway.yaml')) }
}

const upstreams = `version: 1
upstreams:
  api-eu: { url: http://127.0.0.1:9/eu }
  api-us: { url: http://127.0.0.1:9/us }
routes:
`

t.test('a route with `each` becomes one route per value, placeholders replaced everywhere', async (t) => {
  const { config, messages } = await load(`${upstreams}  - name: api-{region}
    each: { region: [eu, us] }
    path: /{region}/v1/*rest
    rewrite: /*rest
    upstream: api-{region}
    plugins:
      - { name: rate-limit, config: { by: project, capacity: 5, refillPerSecond: 1, bucket: "b-{region}" } }
  - name: plain
    path: /plain
    upstream: api-eu
`)
  t.same(messages, [])
  t.same(config!.routes.map((r) => [r.name, r.path, r.upstream, r.configPath]), [
    ['api-eu', '/eu/v1/*rest', 'api-eu', ['routes', 0]],
    ['api-us', '/us/v1/*rest', 'api-us', ['routes', 0]],
    ['plain', '/plain', 'api-eu', ['routes', 1]],
  ])
  t.same(config!.routes.map((r) => r.plugins[0]?.config.bucket), ['b-eu', 'b-us', undefined])
  t.notOk('each' in config!.routes[0], 'the template key is gone from expanded routes')
})

t.test('two variables give the cross product; braces that are no variable stay', (t) => {
  const out = expandRoutes([{ name: 'r-{a}-{b}', each: { a: ['1', '2'], b: ['x', 'y'] }, path: '/{a}/{b}/{c}' }])
  t.same(out.map((o) => o.route.path), ['/1/x/{c}', '/1/y/{c}', '/2/x/{c}', '/2/y/{c}'])
  t.same(out.map((o) => o.index), [0, 0, 0, 0])
  t.end()
})

t.test('a name that does not use every variable is refused at its position', async (t) => {
  const { config, messages } = await load(`${upstreams}  - name: api
    each: { region: [eu, us] }
    path: /{region}
    upstream: api-{region}
`)
  t.notOk(config)
  t.same(messages, ['gateway.yaml:6:11 routes[0].name: must use every `each` variable ({region}), so the expanded routes get distinct names'])
})

t.test('bad `each` values and an unknown expanded upstream are config errors', async (t) => {
  const bad = await load(`${upstreams}  - name: api-{region}
    each: { region: [] }
    path: /x
    upstream: api-eu
`)
  t.same(bad.messages, ["gateway.yaml:7:21 routes[0].each.region: must have at least 1 item"])
  const unknown = await load(`${upstreams}  - name: api-{region}
    each: { region: [eu, asia] }
    path: /{region}
    upstream: api-{region}
`)
  t.same(unknown.messages, ['gateway.yaml:9:15 routes[0].upstream: unknown upstream "api-asia"'])
})

t.test("a mistake in a template's block is reported once, not once per expanded route", async (t) => {
  const { messages } = await load(`${upstreams}  - name: api-{region}
    each: { region: [eu, us] }
    path: /{region}/v1/*rest
    upstream: api-{region}
    plugins:
      - { name: rate-limit, config: { by: project, capacity: -1, refillPerSecond: 10 } }
`)
  t.equal(messages.filter((m) => m.includes('rate-limit.capacity')).length, 1, messages.join('\n'))
})

t.test('a plugin that refuses its config in every expanded route is reported once by tollgate check', async (t) => {
  const { spawnSync } = await import('node:child_process')
  const { BIN } = await import('../../helpers/gateway-process.ts')
  const file = join(dir, 'check-once.yaml')
  // credit-meter without an apiType throws in create(), once per expanded route.
  writeFileSync(file, `${upstreams}  - name: api-{region}
    each: { region: [eu, us] }
    path: /{region}/v1/*rest
    upstream: api-{region}
    plugins:
      - { name: key-in-path-auth, config: { scope: rpc } }
      - { name: credit-meter, config: { cost: 1 } }
`)
  const result = spawnSync(process.execPath, [BIN, 'check', '-c', file], { encoding: 'utf8' })
  t.equal(result.status, 1)
  const lines = result.stderr.trim().split('\n').filter((line) => line.includes('credit-meter'))
  t.equal(lines.length, 1, result.stderr)
})
