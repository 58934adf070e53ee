/**
 * Finds plugins: every folder of plugins/ with an index.ts, plus custom modules named in
 * gateway.yaml. The core never imports a plugin by name; it only knows this contract.
 */
import { existsSync, readdirSync } from 'node:fs'
import { register } from 'node:module'
import { join, resolve } from 'node:path'
import { fileURLToPath, pathToFileURL } from 'node:url'
import type { PluginDefinition } from './plugin.ts'

export const BUILTIN_PLUGIN_DIR = fileURLToPath(new URL('../../plugins/', import.meta.url))

/** Problems with a module's export; empty when it honours the contract. */
export function contractProblems(candidate: unknown): string[] {
  const def = candidate as Partial<PluginDefinition> | undefined
  if (!def || typeof def !== 'object') return ['the module has no default export of a plugin definition']
  const problems: string[] = []
  if (typeof def.name !== 'string' || !/^[a-z][a-z0-9-]*$/.test(def.name)) problems.push('`name` must be a kebab-case string')
  if (typeof def.priority !== 'number' || !Number.isFinite(def.priority)) problems.push('`priority` must be a number')
  if (!def.configSchema || typeof def.configSchema !== 'object') problems.push('`configSchema` must be a JSON Schema object')
  if (typeof def.create !== 'function') problems.push('`create` must be a function')
  return problems
}

async function importDefinition(file: string): Promise<PluginDefinition> {
  const module = await import(pathToFileURL(file).href)
  // A CommonJS-compiled module nests the ESM default export one level deeper.
  const definition = module.default?.default ?? module.default ?? module.plugin
  const problems = contractProblems(definition)
  if (problems.length) throw new Error(problems.join('; '))
  return definition as PluginDefinition
}

let builtins: Promise<Map<string, PluginDefinition>> | undefined

/** Built-in plugins, imported once per process. A broken one fails loudly. */
export function builtinPlugins(dir = BUILTIN_PLUGIN_DIR): Promise<Map<string, PluginDefinition>> {
  builtins ??= (async () => {
    const found = new Map<string, PluginDefinition>()
    const folders = existsSync(dir) ? readdirSync(dir, { withFileTypes: true }).filter((d) => d.isDirectory()) : []
    for (const folder of folders.sort((a, b) => a.name.localeCompare(b.name))) {
      const file = join(dir, folder.name, 'index.ts')
      if (!existsSync(file)) continue
      let definition: PluginDefinition
      try {
        definition = await importDefinition(file)
      } catch (error) {
        throw new Error(`plugin folder plugins/${folder.name} failed to load: ${(error as Error).message}`)
      }
      found.set(definition.name, definition)
    }
    return found
  })()
  return builtins
}

let hooksRegistered = false

/**
 * Lets a plugin from any folder load: `tollgate/plugin` resolves to this checkout, and ESM `.js`/`.ts`
 * needs no package.json beside it (core/proxy/plugin-hooks.js). Registered once, before the first custom plugin.
 */
export function registerPluginHooks(): void {
  if (hooksRegistered) return
  hooksRegistered = true
  register(new URL('./plugin-hooks.js', import.meta.url))
}

/** Loads a custom plugin module; the path is relative to the config file's directory. */
export async function loadCustomPlugin(configDir: string, path: string): Promise<PluginDefinition> {
  const file = resolve(configDir, path)
  if (!existsSync(file)) throw new Error(`no such file: ${file}`)
  registerPluginHooks()
  return importDefinition(file)
}
