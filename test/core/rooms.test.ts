/**
 * The tree shows the architecture: core/ is rooms only, each with a README.md, and the import rule
 * of ARCHITECTURE.md holds. The kernel (core/proxy) imports no plugin and no service; a plugin
 * imports from core/ only the public plugin entry (core/proxy/plugin-api.ts, `tollgate/plugin`) and
 * the store interface (core/store/types.ts).
 */
import t from 'tap'
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs'
import { dirname, join, normalize, relative } from 'node:path'
import { fileURLToPath } from 'node:url'

const ROOT = normalize(join(dirname(fileURLToPath(import.meta.url)), '..', '..'))
const SERVICES = ['admin', 'cli', 'server', 'dashboard', 'workstations', 'accounts', 'alerts']
const PLUGIN_MAY_IMPORT = new Set(['core/proxy/plugin-api.ts', 'core/store/types.ts'])
// Static imports, re-exports, dynamic import() and new URL(…, import.meta.url) with a relative specifier.
const SPECIFIER = /(?:\bfrom|\bimport|\bnew URL)\s*\(?\s*(['"])(\.{1,2}\/[^'"\n]*)\1/g

function sourceFiles(dir: string): string[] {
  return readdirSync(join(ROOT, dir)).flatMap((entry) => {
    const path = join(dir, entry)
    if (statSync(join(ROOT, path)).isDirectory()) return entry === 'node_modules' ? [] : sourceFiles(path)
    return /\.(ts|js|mjs|mts)$/.test(entry) ? [path] : []
  })
}

/** Every relative import of `file`, as a path from the repository root. */
function importsOf(file: string): string[] {
  const text = readFileSync(join(ROOT, file), 'utf8')
  return [...text.matchAll(SPECIFIER)].map((m) => relative(ROOT, join(ROOT, dirname(file), m[2])))
}

t.test('core/ holds rooms only, each saying in a README.md what it owns and may import', async (t) => {
  const loose = readdirSync(join(ROOT, 'core')).filter((entry) => entry !== 'README.md' && !statSync(join(ROOT, 'core', entry)).isDirectory())
  t.same(loose, [], 'no loose file at the top of core/')
  for (const room of readdirSync(join(ROOT, 'core')).filter((entry) => statSync(join(ROOT, 'core', entry)).isDirectory())) {
    t.ok(existsSync(join(ROOT, 'core', room, 'README.md')), `core/${room}/README.md`)
  }
})

t.test('the kernel (core/proxy) imports no plugin and no service', async (t) => {
  const offences = sourceFiles('core/proxy').flatMap((file) =>
    importsOf(file)
      .filter((target) => target.startsWith('plugins/') || SERVICES.some((room) => target.startsWith(`core/${room}/`)))
      .map((target) => `${file} → ${target}`),
  )
  t.same(offences, [], 'core/proxy → plugins/ or a service room')
})

t.test('plugins import from core/ only the public plugin entry and the store interface', async (t) => {
  const offences = sourceFiles('plugins').flatMap((file) =>
    importsOf(file)
      .filter((target) => target.startsWith('core/') && !PLUGIN_MAY_IMPORT.has(target))
      .map((target) => `${file} → ${target}`),
  )
  t.same(offences, [], 'plugins/ → core/ other than plugin-api.ts and store/types.ts')
})
