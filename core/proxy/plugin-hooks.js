/**
 * Module hooks for plugins kept outside the checkout (registered by core/proxy/plugin-registry.ts and
 * by bin/register.js). Plain JavaScript: hooks run on the loader's own thread, before tsx.
 *
 * 1. `tollgate/plugin` (and every other entry of package.json `exports`, e.g. `tollgate/testing`)
 *    resolves to this checkout, wherever the importing file lives: a plugin needs no node_modules
 *    and shares the gateway's own classes (GatewayError).
 * 2. A `.js`/`.ts` file with ES module syntax in a folder whose package.json declares no "type"
 *    (or that has none) loads as an ES module. Node would take it for CommonJS and, through tsx,
 *    fail with "Cannot require() ES Module … in a cycle". A declared "type" is always respected.
 */
import { existsSync, readFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

const PACKAGE = new URL('../../package.json', import.meta.url)
/** `tollgate/plugin` → file URL, from package.json `exports`. */
const ENTRY_POINTS = new Map(
  Object.entries(JSON.parse(readFileSync(PACKAGE, 'utf8')).exports ?? {}).map(([key, target]) => [`tollgate${key.slice(1)}`, new URL(target, PACKAGE).href]),
)
const ESM_SYNTAX = /^\s*(import\s*[\w*{'"]|export\s)/m
const declaredTypes = new Map()

/** The "type" of the nearest package.json, or undefined when none says. */
function declaredType(dir) {
  if (declaredTypes.has(dir)) return declaredTypes.get(dir)
  let type
  const file = join(dir, 'package.json')
  if (existsSync(file)) {
    try {
      type = JSON.parse(readFileSync(file, 'utf8')).type ?? null
    } catch {
      type = null
    }
  } else if (dirname(dir) !== dir) type = declaredType(dirname(dir))
  else type = null
  declaredTypes.set(dir, type)
  return type
}

const UNNAMED_MEANS_COMMONJS = Number(process.versions.node.split('.')[0]) >= 22

export async function resolve(specifier, context, nextResolve) {
  const entry = ENTRY_POINTS.get(specifier)
  if (entry) return nextResolve(entry, context)
  const resolved = await nextResolve(specifier, context)
  const { url, format } = resolved
  // Node 24 strips types itself and names a .ts file's format 'commonjs-typescript' — or leaves it
  // unnamed (null) when tsx resolved it, and the load then took it for CommonJS: its
  // `import … from 'tollgate/plugin'` became a require() that no import hook maps. On Node 20 an
  // unnamed format is tsx's to decide (forcing 'module' there loads its CommonJS output as ESM:
  // "exports is not defined", test/core/config/load.test.ts).
  const unnamed = format == null && UNNAMED_MEANS_COMMONJS
  if ((!unnamed && format !== 'commonjs' && format !== 'commonjs-typescript') || !url.startsWith('file:') || url.includes('/node_modules/') || !/\.(js|ts|jsx|tsx)$/.test(url)) return resolved
  const path = fileURLToPath(url)
  if (declaredType(dirname(path))) return resolved
  let source
  try {
    source = readFileSync(path, 'utf8')
  } catch {
    return resolved
  }
  if (!ESM_SYNTAX.test(source)) return resolved
  return { ...resolved, format: format === 'commonjs-typescript' ? 'module-typescript' : 'module' }
}

