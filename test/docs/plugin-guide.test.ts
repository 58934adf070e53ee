/**
 * docs/plugins.md, run as written: its code blocks named by a file (```ts require-header.ts) are
 * copied verbatim into a folder outside the checkout (no package.json, no node_modules). The
 * config block must pass `tollgate check`, and the guide's own test, run with Node's runner as
 * the guide says, must pass: it loads the plugin through customPlugins into a real gateway
 * process and calls the route.
 */
import t from 'tap'
import { spawn } from 'node:child_process'
import { readFileSync, writeFileSync, existsSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { BIN } from '../helpers/gateway-process.ts'
import { tempDir } from '../helpers/temp.ts'

const ROOT = fileURLToPath(new URL('../../', import.meta.url))
const GUIDE = readFileSync(join(ROOT, 'docs/plugins.md'), 'utf8')
const REGISTER = join(ROOT, 'bin/register.js')

/** Fenced blocks whose info string names a file: `lang file`. */
function namedBlocks(markdown: string): Map<string, string> {
  const blocks = new Map<string, string>()
  for (const match of markdown.matchAll(/^```\w+ ([\w.-]+)\n([\s\S]*?)^```$/gm)) blocks.set(match[1], match[2])
  return blocks
}

function run(cwd: string, args: string[]): Promise<{ code: number | null; output: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, args, { cwd, stdio: ['ignore', 'pipe', 'pipe'] })
    let output = ''
    child.stdout.on('data', (chunk) => (output += chunk))
    child.stderr.on('data', (chunk) => (output += chunk))
    child.on('error', reject)
    child.on('close', (code) => resolve({ code, output }))
  })
}

t.test("the guide's blocks, copied verbatim outside the checkout, work", async (t) => {
  const blocks = namedBlocks(GUIDE)
  t.same([...blocks.keys()].sort(), ['gateway.yaml', 'require-header.test.ts', 'require-header.ts'], 'the plugin, its config and its test')
  for (const [name, code] of blocks) t.notMatch(code, /from '\.\.?\//, `${name} imports nothing by a relative path into the checkout`)
  const dir = tempDir('tollgate-plugin-guide-')
  t.notOk(dir.startsWith(ROOT), 'the folder is outside the checkout')
  for (const [name, code] of blocks) writeFileSync(join(dir, name), code)
  t.notOk(existsSync(join(dir, 'package.json')) || existsSync(join(dir, 'node_modules')), 'no package.json, no node_modules')

  const check = await run(dir, [BIN, 'check', '-c', 'gateway.yaml'])
  t.equal(check.code, 0, check.output)
  t.match(check.output, 'gateway.yaml: ok (1 routes')

  // The command of step 3, with this checkout's path.
  const test = await run(dir, ['--import', REGISTER, '--test', 'require-header.test.ts'])
  t.equal(test.code, 0, test.output)
  // Node's runner reports in TAP (# pass 1) up to Node 22 when not on a terminal, and in its spec form (ℹ pass 1) on 24.
  t.match(test.output, /(?:#|ℹ) pass 1\b/, 'the guide test ran and passed')
  t.match(test.output, /(?:#|ℹ) fail 0\b/)
})

t.test('the same plugin as plain .js and .mjs, in a folder without package.json, loads too', async (t) => {
  const dir = tempDir('tollgate-plugin-guide-')
  const plugin = (name: string) => `import { GatewayError } from 'tollgate/plugin'
export default {
  name: '${name}',
  priority: 800,
  configSchema: { type: 'object', additionalProperties: false, properties: {} },
  create: () => ({ request() { throw new GatewayError(418, 'teapot', 'from ${name}') } }),
}
`
  writeFileSync(join(dir, 'js-plugin.js'), plugin('js-plugin'))
  writeFileSync(join(dir, 'mjs-plugin.mjs'), plugin('mjs-plugin'))
  writeFileSync(join(dir, 'gateway.yaml'), `version: 1
customPlugins: [{ path: ./js-plugin.js }, { path: ./mjs-plugin.mjs }]
upstreams: { demo: { url: 'http://127.0.0.1:9' } }
routes:
  - { name: a, path: /a, upstream: demo, plugins: [{ name: js-plugin }] }
  - { name: b, path: /b, upstream: demo, plugins: [{ name: mjs-plugin }] }
`)
  const check = await run(dir, [BIN, 'check', '-c', 'gateway.yaml'])
  t.equal(check.code, 0, check.output)
  t.match(check.output, 'ok (2 routes')
})
