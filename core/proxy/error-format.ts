/** The default error format: `{"error":{"code","message"}}`. */
import type { ErrorFormatter, PluginDefinition } from './plugin.ts'

export const jsonErrorFormat: ErrorFormatter = (error) => ({
  status: error.status,
  headers: { 'content-type': 'application/json; charset=utf-8', ...error.headers },
  body: JSON.stringify({ error: { code: error.code, message: error.message } }),
})

/** Every error format a route may name: the core's `json` plus those the plugins contribute. */
export function collectErrorFormats(plugins: ReadonlyMap<string, PluginDefinition>): Map<string, ErrorFormatter> {
  const formats = new Map<string, ErrorFormatter>([['json', jsonErrorFormat]])
  for (const plugin of plugins.values()) for (const [name, format] of Object.entries(plugin.errorFormats ?? {})) formats.set(name, format)
  return formats
}
