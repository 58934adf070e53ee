/** The example plugin examples/plugins/require-header, driven through a real gateway process. */
import t from 'tap'
import { spawnSync } from 'node:child_process'
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { BIN, startGatewayProcess } from '../../helpers/gateway-process.ts'
import { startTestUpstream } from '../../helpers/upstream.ts'
import { tempDir } from '../../helpers/temp.ts'

const PLUGIN = new URL('../../../examples/plugins/require-header/index.ts', import.meta.url).pathname

t.test('require-header refuses a request without the header', async (t) => {
  const up = await startTestUpstream()
  const gw = await startGatewayProcess(`version: 1
server: { listen: { port: 0 } }
admin: { listen: { port: 0 } }
store: { dataDir: '{{DIR}}/data' }
customPlugins: [{ path: ${JSON.stringify(PLUGIN)} }]
upstreams: { demo: { url: '${up.url}' } }
routes:
  - { name: demo, path: /demo, upstream: demo, plugins: [{ name: require-header, config: { header: x-tenant } }] }
`)
  t.teardown(async () => {
    await gw.stop()
    await up.close()
  })
  const refused = await fetch(`${gw.url}/demo`)
  t.equal(refused.status, 400)
  t.same(await refused.json(), { error: { code: 'missing_header', message: 'header x-tenant is required' } })
  t.equal(up.received.length, 0, 'nothing reached the upstream')
  const served = await fetch(`${gw.url}/demo`, { headers: { 'x-tenant': 'a' } })
  await served.text()
  t.equal(served.status, 200)
})

t.test('a bad config of the plugin fails tollgate check, naming the field', async (t) => {
  const dir = tempDir('tollgate-plugin-')
  const file = join(dir, 'gateway.yaml')
  writeFileSync(file, `version: 1
customPlugins: [{ path: ${JSON.stringify(PLUGIN)} }]
upstreams: { demo: { url: 'http://127.0.0.1:9' } }
routes:
  - name: demo
    path: /demo
    upstream: demo
    plugins:
      - { name: require-header, config: { header: X Tenant } }
`)
  const result = spawnSync(process.execPath, [BIN, 'check', '-c', file], { encoding: 'utf8' })
  t.equal(result.status, 1)
  t.match(result.stdout + result.stderr, /gateway\.yaml:\d+:\d+ routes\[0\]\.plugins\[0\] require-header\.header/)
})
