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
import { parseArgs } from 'node:util'
import { withDryBuild } from './dry-build.ts'
import { routeCatalog, type CatalogEntry } from './route-catalog.ts'

export const ROUTES_HELP = `Usage: tollgate routes [-c FILE] [--json]

Print every route of the config (default FILE: gateway.yaml) with its methods, path, target and
what its plugins say of it (x402 prices, credit costs), as built by the gateway.

Options:
  -c, --config FILE   the gateway config
      --json          machine-readable: {routes: [...], wellKnown: [...]}
  -h, --help          this text
`

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

export async function routesCommand(args: string[]): Promise<number> {
  let values: { config?: string; json?: boolean; help?: boolean }
  try {
    ;({ values } = parseArgs({
      args,
      strict: true,
      allowPositionals: false,
      options: { config: { type: 'string', short: 'c' }, json: { type: 'boolean' }, help: { type: 'boolean', short: 'h' } },
    }))
  } catch (error) {
    console.error(`tollgate routes: ${(error as Error).message}\n\n${ROUTES_HELP}`)
    return 2
  }
  if (values.help) {
    console.log(ROUTES_HELP)
    return 0
  }
  return printRoutes(values.config || 'gateway.yaml', values.json === true)
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
