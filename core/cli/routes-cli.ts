/**
 * `tollgate routes [-c FILE] [--json]`: the route table as the gateway would build it (a dry build
 * like `tollgate check`, nothing listens), with what each route's plugins say of it: prices, terms.
 * The same catalogue the well-known documents (`/.well-known/x402.json`) are built from.
 *
 * @example
 * ```sh
 * tollgate routes -c gateway.yaml          # one block per route
 * tollgate routes -c gateway.yaml --json   # {routes: [...], wellKnown: [...]}
 * ```
 */
import { withDryBuild } from './dry-build.ts'
import { routeCatalog, type CatalogEntry } from '../proxy/route-catalog.ts'

/** The text view: one block per route, a line per plugin that described it. */
export function formatCatalog(routes: readonly CatalogEntry[], wellKnown: readonly string[]): string {
  const lines: string[] = []
  for (const route of routes) {
    const target = route.handler ? `handler ${route.handler}` : route.upstream ? `upstream ${route.upstream}` : '-'
    lines.push(`${route.methods.join(',')} ${route.path}  (${route.name}, ${target})`)
    for (const [plugin, description] of Object.entries(route.descriptions)) {
      const summary = (description as { summary?: unknown } | null)?.summary
      lines.push(`    ${plugin}: ${typeof summary === 'string' ? summary : JSON.stringify(description)}`)
    }
  }
  for (const path of wellKnown) lines.push(`GET ${path}  (served from the table above)`)
  return lines.join('\n')
}

/** Prints the route table of `file`, as text or JSON; 1 when the config does not build. */
export async function printRoutes(file: string, json: boolean): Promise<number> {
  return withDryBuild(file, (table, loaded) => {
    const routes = routeCatalog(table.routes)
    const wellKnown = [...loaded.plugins.values()]
      .filter((plugin) => plugin.wellKnown && routes.some((route) => plugin.name in route.descriptions))
      .map((plugin) => `/.well-known/${plugin.wellKnown!.name}`)
    console.log(json ? JSON.stringify({ routes, wellKnown }, null, 2) : formatCatalog(routes, wellKnown))
    return 0
  })
}
