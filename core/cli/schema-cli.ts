/**
 * `tollgate schema [-c FILE]`: the composed JSON Schema of gateway.yaml. With `-c`, the custom
 * plugins that FILE names under `customPlugins` are bound too, so an editor using the printed
 * schema accepts their entries (and checks their config) instead of rejecting an unknown name.
 */
import { readFileSync } from 'node:fs'
import { dirname, resolve } from 'node:path'
import { parse } from 'yaml'
import { composeSchema } from '../config/schema.ts'
import { builtinPlugins, loadCustomPlugin } from '../proxy/plugin-registry.ts'
import type { PluginDefinition } from '../proxy/plugin.ts'

/** Prints the schema; returns the exit code (1 when FILE or one of its custom plugins cannot be read). */
export async function schemaCommand(configFile: string | undefined): Promise<number> {
  const plugins: PluginDefinition[] = [...(await builtinPlugins()).values()]
  if (configFile) {
    let raw: { customPlugins?: unknown }
    try {
      raw = (parse(readFileSync(configFile, 'utf8')) ?? {}) as { customPlugins?: unknown }
    } catch (error) {
      console.error(`${configFile}: ${(error as Error).message}`)
      return 1
    }
    const entries = Array.isArray(raw.customPlugins) ? (raw.customPlugins as { path?: unknown }[]) : []
    for (const [i, entry] of entries.entries()) {
      if (typeof entry?.path !== 'string') {
        console.error(`${configFile} customPlugins[${i}].path: must be a string`)
        return 1
      }
      try {
        const definition = await loadCustomPlugin(dirname(resolve(configFile)), entry.path)
        if (plugins.some((p) => p.name === definition.name)) throw new Error(`plugin name "${definition.name}" is already taken`)
        plugins.push(definition)
      } catch (error) {
        console.error(`${configFile} customPlugins[${i}].path: plugin failed to load: ${(error as Error).message}`)
        return 1
      }
    }
  }
  console.log(JSON.stringify(composeSchema(plugins), null, 2))
  return 0
}
