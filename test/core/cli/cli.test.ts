import t from 'tap'
import { spawnSync } from 'node:child_process'
import { readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { BIN } from '../../helpers/gateway-process.ts'
import { hashCredential } from '../../../core/projects/projects.ts'
import { tempDir } from '../../helpers/temp.ts'

const ROOT = new URL('../../../', import.meta.url).pathname
const cli = (...args: string[]) => spawnSync(process.execPath, [BIN, ...args], { cwd: ROOT, encoding: 'utf8' })

t.test('--version and --help', async (t) => {
  const version = cli('--version')
  t.equal(version.status, 0)
  t.equal(version.stdout.trim(), JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')).version)
  const help = cli('--help')
  t.match(help.stdout, /tollgate start /)
  t.match(help.stdout, /tollgate user add /)
  t.equal(cli('nonsense').status, 2)
})

t.test('hash-key prints the stored form', async (t) => {
  const out = cli('hash-key', 'my-key')
  t.equal(out.stdout.trim(), hashCredential('my-key'))
  t.match(out.stdout.trim(), /^sha256:[0-9a-f]{64}$/)
})

t.test('check: exit 0 on the shipped gateway.yaml, exit 1 with every error otherwise', async (t) => {
  const ok = cli('check', '-c', join(ROOT, 'gateway.yaml'))
  t.equal(ok.status, 0, ok.stderr)
  const dir = tempDir('tollgate-cli-')
  const file = join(dir, 'gateway.yaml')
  writeFileSync(file, 'version: 2\nroutes:\n  - name: a\n    path: nope\n    upstream: ghost\n')
  const bad = cli('check', '-c', file)
  t.equal(bad.status, 1)
  const lines = bad.stderr.trim().split('\n')
  t.same(lines, ['gateway.yaml:1:10 version: must be 1', 'gateway.yaml:4:11 routes[0].path: must match ^/'])
  t.notMatch(bad.stderr, /    at /, 'no stack trace')
})

t.test('schema: prints the composed schema, and the shipped gateway.schema.json is current', async (t) => {
  const out = cli('schema')
  t.equal(out.status, 0)
  const schema = JSON.parse(out.stdout)
  t.ok(schema.$defs.pluginEntry.allOf.length >= 1, 'plugin schemas are bound by name')
  t.same(schema, JSON.parse(readFileSync(join(ROOT, 'gateway.schema.json'), 'utf8')), 'run `npm run schema` after changing a schema')
  t.match(readFileSync(join(ROOT, 'gateway.yaml'), 'utf8'), /yaml-language-server: \$schema=\.\/gateway\.schema\.json/)
})
