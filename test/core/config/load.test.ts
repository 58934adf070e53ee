import t from 'tap'
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { loadConfig } from '../../../core/config/load.ts'
import { formatIssue } from '../../../core/config/source.ts'
import { tempDir } from '../../helpers/temp.ts'

const dir = tempDir('tollgate-config-')
let n = 0
async function load(text: string, env: NodeJS.ProcessEnv = {}) {
  const file = join(dir, `gateway-${++n}.yaml`)
  writeFileSync(file, text)
  const result = await loadConfig(file, env)
  return { ...result, messages: result.issues.map(formatIssue).map((m) => m.replace(/gateway-\d+\.yaml/, 'gateway.yaml')) }
}

const base = `version: 1
upstreams:
  demo:
    url: http://127.0.0.1:9
routes:
  - name: demo
    path: /demo/:id
    upstream: demo
`

t.test('a valid config loads with defaults filled in', async (t) => {
  const { config, messages } = await load(base)
  t.same(messages, [])
  t.equal(config!.server.listen.port, 8080)
  t.equal(config!.server.listen.host, '127.0.0.1')
  t.equal(config!.admin.listen.port, 8081)
  t.equal(config!.upstreams.demo.timeouts.headersMs, 30000)
  t.same(config!.routes[0].methods, ['GET'])
})

t.test('errors name file, line, column and path, and all of them are reported', async (t) => {
  const { config, messages } = await load(`version: 1
server:
  listen:
    port: 99999
  bogus: true
upstreams:
  demo:
    url: ftp://nope
routes:
  - name: demo
    path: /demo
    upstream: missing
`)
  t.notOk(config)
  t.same(messages.sort(), [
    'gateway.yaml:4:11 server.listen.port: must be integer >= 0 <= 65535',
    'gateway.yaml:5:3 server.bogus: unknown key "bogus"',
    'gateway.yaml:8:10 upstreams.demo.url: must match ^https?://',
  ].sort())
})

t.test('plugin config errors name the plugin and the field', async (t) => {
  const dirPlugin = join(dir, 'p.ts')
  writeFileSync(dirPlugin, `export default { name: 'needs-int', priority: 1, configSchema: { type: 'object', additionalProperties: false, properties: { cost: { type: 'integer', minimum: 0, description: 'c' } } }, create: () => ({}) }`)
  const { messages } = await load(`version: 1
customPlugins:
  - path: ./p.ts
upstreams:
  demo: { url: "http://127.0.0.1:9" }
routes:
  - name: demo
    path: /demo
    upstream: demo
    plugins:
      - name: needs-int
        config:
          cost: -1
      - name: no-such-plugin
`)
  t.equal(messages.length, 2)
  t.equal(messages[0], 'gateway.yaml:13:17 routes[0].plugins[0] needs-int.cost: must be integer >= 0')
  t.match(messages[1], /^gateway\.yaml:14:15 routes\[0\]\.plugins\[1\]\.name: unknown plugin "no-such-plugin"/)
})

t.test('a custom plugin that fails to load fails the config', async (t) => {
  writeFileSync(join(dir, 'broken.ts'), `export default { name: 'Broken Name', priority: 'high' }`)
  const { config, messages } = await load(`version: 1
customPlugins:
  - path: ./broken.ts
  - path: ./missing.ts
routes: []
`)
  t.notOk(config)
  t.match(messages[0], /gateway\.yaml:3:11 customPlugins\[0\]\.path: plugin failed to load: `name` must be a kebab-case string; `priority` must be a number/)
  t.match(messages[1], /customPlugins\[1\]\.path: plugin failed to load: no such file/)
})

t.test('environment interpolation: ${VAR}, ${VAR:-default}, typed results, missing variables', async (t) => {
  const ok = await load(`version: 1
server:
  listen:
    port: \${PORT:-8181}
upstreams:
  demo:
    url: \${DEMO_URL}
routes: []
`, { DEMO_URL: 'http://127.0.0.1:1234' })
  t.equal(ok.config!.server.listen.port, 8181, 'unquoted default becomes a number')
  t.equal(ok.config!.upstreams.demo.url, 'http://127.0.0.1:1234')
  const missing = await load(`version: 1
upstreams:
  demo:
    url: \${NOT_SET}
routes: []
`)
  t.same(missing.messages, ['gateway.yaml:4:10: environment variable NOT_SET is not set and has no default'])
})

t.test('YAML syntax errors and cross-reference errors', async (t) => {
  const syntax = await load('version: 1\nroutes: [\n')
  t.match(syntax.messages[0], /^gateway\.yaml:\d+:\d+: /)
  const refs = await load(`version: 1
upstreams:
  demo: { url: "http://127.0.0.1:9" }
routes:
  - name: a
    path: /a/:id
    upstream: demo
    rewrite: /x/:other
    errorFormat: nope
  - name: a
    path: /b
`)
  t.same(refs.messages.sort(), [
    'gateway.yaml:10:5 routes[1]: a route needs exactly one of `upstream` or `handler`',
    'gateway.yaml:10:11 routes[1].name: duplicate route name "a"',
    'gateway.yaml:8:14 routes[0].rewrite: rewrite uses :other, which the path does not define',
    'gateway.yaml:9:18 routes[0].errorFormat: unknown error format "nope" (known: json)'.replace('(known: json)', messages0(refs.messages)),
  ].sort())
})

function messages0(messages: string[]): string {
  return messages.find((m) => m.includes('errorFormat'))!.replace(/^.*unknown error format "nope" /, '')
}
