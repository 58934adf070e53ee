/**
 * Heavy libraries load only for the configs that use them (issue 31). Every built-in plugin folder is
 * imported at start (to read its config schema), and so is every core room the gateway's start
 * imports; a package those import at module top level stays in the heap of every gateway, and each
 * major GC walks it on the request path (callgrind: key-buy's static viem import cost ~200,000
 * instructions per proxied request, fixed in 6d585a5). Such packages are loaded with `import()`
 * inside `create()` or on first use.
 *
 * Two checks: the static import graph from the start entry points and every plugins/<name>/index.ts
 * (type-only imports and `import()` excluded) reaches none of them; and a real gateway started on
 * the stock gateway.yaml without its optional parts (workstations, x402 routes) loads none of them.
 */
import t from 'tap'
import { existsSync, readdirSync, readFileSync } from 'node:fs'
import { dirname, join, normalize, relative } from 'node:path'
import { fileURLToPath } from 'node:url'
import { startGatewayProcess } from '../helpers/gateway-process.ts'
import { tempDir } from '../helpers/temp.ts'

const ROOT = normalize(join(dirname(fileURLToPath(import.meta.url)), '..', '..'))

/** Packages only some configs need: EVM and Solana (x402, key-buy's rekey), workstations (OIDC, JWT, WebSocket), the shared engine. */
const HEAVY = ['viem', 'ox', 'abitype', '@solana/', '@noble/', 'oidc-provider', 'jose', 'ws', 'pg', 'redis', '@redis/']
const heavy = (pkg: string) => HEAVY.some((name) => (name.endsWith('/') ? pkg.startsWith(name) : pkg === name))

/** Core modules of every start: the command line, the gateway and the cluster primary. */
const START_ENTRIES = ['core/cli/cli.ts', 'core/server/gateway.ts', 'core/server/workers.ts']

// Static imports and re-exports (possibly over several lines), and side-effect imports; `import type`,
// `export type` and `import()` are not matched.
const STATIC = /^\s*(?:import|export)\s+(?!type\s)([^'";]*?)\s*from\s*['"]([^'"]+)['"]|^\s*import\s*['"]([^'"]+)['"]/gm

function staticImports(file: string): string[] {
  const text = readFileSync(join(ROOT, file), 'utf8')
  const out: string[] = []
  for (const m of text.matchAll(STATIC)) {
    const names = m[1]
    // `import { type A, type B } from`: erased by the TypeScript loader.
    if (names !== undefined && /^\{[^}]*\}$/s.test(names.trim()) && names.replace(/[{}\s]/g, '').split(',').filter(Boolean).every((n) => n.startsWith('type'))) continue
    out.push(m[2] ?? m[3])
  }
  return out
}

function packageOf(specifier: string): string {
  const parts = specifier.split('/')
  return specifier.startsWith('@') ? parts.slice(0, 2).join('/') : parts[0]
}

/** Every package reached from `entry` by static imports, with the chain of files that reaches it. */
function reachedPackages(entry: string): Map<string, string[]> {
  const found = new Map<string, string[]>()
  const seen = new Set<string>([entry])
  const queue: { file: string; chain: string[] }[] = [{ file: entry, chain: [entry] }]
  while (queue.length) {
    const { file, chain } = queue.shift()!
    for (const specifier of staticImports(file)) {
      if (specifier.startsWith('node:')) continue
      let target: string | undefined
      if (specifier.startsWith('.')) target = relative(ROOT, join(ROOT, dirname(file), specifier))
      else if (specifier === 'tollgate/plugin') target = 'core/proxy/plugin-api.ts'
      if (target === undefined) {
        const pkg = packageOf(specifier)
        if (!found.has(pkg)) found.set(pkg, [...chain, specifier])
        continue
      }
      if (seen.has(target) || !existsSync(join(ROOT, target))) continue
      seen.add(target)
      queue.push({ file: target, chain: [...chain, target] })
    }
  }
  return found
}

t.test('no plugin folder and no core module of every start imports a heavy package at top level', async (t) => {
  const plugins = readdirSync(join(ROOT, 'plugins'))
    .filter((name) => existsSync(join(ROOT, 'plugins', name, 'index.ts')))
    .map((name) => `plugins/${name}/index.ts`)
  t.ok(plugins.length >= 15, `every built-in plugin is walked (${plugins.length})`)
  const offences: string[] = []
  const all = new Set<string>()
  for (const entry of [...START_ENTRIES, ...plugins]) {
    for (const [pkg, chain] of reachedPackages(entry)) {
      all.add(pkg)
      if (heavy(pkg)) offences.push(chain.join(' → '))
    }
  }
  // The walk sees packages at all: the light ones every gateway needs.
  t.ok(all.has('undici') && all.has('better-sqlite3'), 'the walk reaches the packages every gateway needs')
  t.same(offences, [], 'static imports of heavy packages (load them with import() in create() or on first use)')
})

/** The stock gateway.yaml without its optional parts: no workstations section, no x402 routes. */
function stockWithoutOptionalParts(): string {
  const text = readFileSync(join(ROOT, 'gateway.yaml'), 'utf8')
  const withoutWorkstations = text.replace(/\n# Cloud workstations[^\n]*\nworkstations:\n(?: [^\n]*\n)+/, '\n')
  const x402 = withoutWorkstations.indexOf('  # ── x402 payment facilitator')
  if (withoutWorkstations === text || x402 === -1) throw new Error('gateway.yaml changed shape: update stockWithoutOptionalParts')
  return withoutWorkstations.slice(0, x402)
}

t.test('a gateway on the stock config without workstations and x402 loads none of the heavy packages', async (t) => {
  const dir = tempDir('tollgate-lazy-imports-')
  const trace = join(dir, 'modules.txt')
  const gateway = await startGatewayProcess(stockWithoutOptionalParts(), {
    dir,
    env: {
      TOLLGATE_PORT: '0',
      TOLLGATE_ADMIN_PORT: '0',
      TOLLGATE_DATA_DIR: join(dir, 'data'),
      TOLLGATE_STORE_ENGINE: 'sqlite',
      TOLLGATE_MODULE_TRACE: trace,
      NODE_OPTIONS: `${process.env.NODE_OPTIONS ?? ''} --import ${join(ROOT, 'test/helpers/module-trace.mjs')}`.trim(),
    },
  })
  t.teardown(() => gateway.stop())
  // A request through a metered route (refused: no such key) ran the request path once.
  const refused = await fetch(`${gateway.url}/privnet/rpc/no-such-key`, { method: 'POST', body: '{}', headers: { 'content-type': 'application/json' } })
  t.equal(refused.status, 401, 'a metered route refuses an unknown key')
  const loaded = [...new Set(readFileSync(trace, 'utf8').split('\n').filter(Boolean))]
  const packages = new Set(loaded.filter((url) => url.includes('/node_modules/')).map((url) => packageOf(url.slice(url.lastIndexOf('/node_modules/') + 14))))
  t.ok(packages.has('better-sqlite3') && packages.has('undici'), 'the trace sees the packages every gateway loads')
  t.ok(loaded.some((url) => url.endsWith('/plugins/key-buy/index.ts')), 'every plugin folder was imported (key-buy among them)')
  t.same([...packages].filter(heavy).sort(), [], 'heavy packages loaded at start')
})
