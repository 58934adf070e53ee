/**
 * `tollgate schema -c FILE`: the printed schema binds FILE's custom plugins, so an editor accepts
 * (and checks) their entries; without -c the same entries are rejected as unknown names.
 */
import t from 'tap'
import { spawnSync } from 'node:child_process'
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { Ajv } from 'ajv'
import { parse } from 'yaml'
import { BIN } from '../../helpers/gateway-process.ts'
import { tempDir } from '../../helpers/temp.ts'

const STAMP = fileURLToPath(new URL('../../../examples/plugins/response-stamp/index.ts', import.meta.url))
const cli = (...args: string[]) => spawnSync(process.execPath, [BIN, ...args], { encoding: 'utf8' })

function configWith(stampConfig: string): string {
  return `version: 1
customPlugins:
  - path: ${STAMP}
upstreams:
  demo: { url: 'http://127.0.0.1:9' }
routes:
  - name: demo
    path: /demo
    upstream: demo
    plugins:
      - { name: response-stamp, config: ${stampConfig} }
`
}

function validate(schemaText: string, configText: string): string[] {
  const ajv = new Ajv({ allErrors: true, strict: false })
  const check = ajv.compile(JSON.parse(schemaText))
  check(parse(configText))
  return (check.errors ?? []).map((e) => `${e.instancePath} ${e.message}`)
}

t.test('schema -c includes the custom plugins of the config', async (t) => {
  const dir = tempDir('tollgate-schema-')
  const file = join(dir, 'gateway.yaml')
  writeFileSync(file, configWith('{ value: hello }'))
  const withCustom = cli('schema', '-c', file)
  t.equal(withCustom.status, 0, withCustom.stderr)
  t.same(validate(withCustom.stdout, configWith('{ value: hello }')), [], 'the custom plugin entry is valid')
  t.not(validate(withCustom.stdout, configWith('{ value: "" }')).length, 0, "and its config is checked against the plugin's own schema")

  const builtinOnly = cli('schema')
  t.equal(builtinOnly.status, 0)
  t.not(validate(builtinOnly.stdout, configWith('{ value: hello }')).length, 0, 'without -c the custom name is unknown')
})

t.test('schema -c names the entry whose plugin does not load', async (t) => {
  const dir = tempDir('tollgate-schema-')
  const file = join(dir, 'gateway.yaml')
  writeFileSync(file, 'version: 1\ncustomPlugins:\n  - path: ./missing.ts\nroutes: []\n')
  const result = cli('schema', '-c', file)
  t.equal(result.status, 1)
  t.match(result.stderr, /customPlugins\[0\]\.path: plugin failed to load: no such file/)
  t.equal(result.stdout, '', 'no half schema on stdout')
})
