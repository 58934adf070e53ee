/**
 * The `tollgate` command line.
 *
 * @example
 * ```sh
 * tollgate start -c gateway.yaml
 * tollgate check -c gateway.yaml     # exits 1 and prints every error
 * tollgate hash-key my-api-key       # the sha256:... form gateway.yaml stores
 * ```
 */
import { readFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import { loadConfig } from './config/load.ts'
import { formatIssue } from './config/source.ts'
import { buildTable } from './table.ts'
import { ConfigError, Gateway } from './gateway.ts'
import { hashCredential } from './projects.ts'
import { CoreMetrics } from './metrics.ts'
import { reconcileUpstreams } from './http/upstreams.ts'
import { createLogger } from './log.ts'
import { usageCommand } from './usage-cli.ts'
import { schemaCommand } from './schema-cli.ts'
import { userCommand } from './user-cli.ts'
import { routesCommand } from './routes-cli.ts'
import { isWorker, parseWorkerCount, runPrimary, runWorker } from './workers.ts'
import { openSqliteStore } from './store/sqlite.ts'
import { migrateStore } from './store/open.ts'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'

const HELP = `tollgate — an authenticated, credit-metered reverse proxy

Usage:
  tollgate start [-c FILE] [--workers N|auto]
                                       run the gateway (default FILE: gateway.yaml); with --workers,
                                       N processes share the listener (auto: one per CPU)
  tollgate check [-c FILE]             parse, validate and dry-build the config; exit 1 on errors
  tollgate schema [-c FILE]            print the composed JSON Schema of gateway.yaml (with -c, the
                                       custom plugins FILE names are included)
  tollgate routes [-c FILE] [--json]   print the route table with prices (x402 offers, credit costs)
  tollgate hash-key KEY                print the hashed form of a key or secret for gateway.yaml
  tollgate migrate [-c FILE]           apply the shared store's PostgreSQL migrations (store.engine
                                       shared); refuses a schema newer than this version knows
  tollgate usage [-c FILE] [--project ID] [--from ISO] [--to ISO] [--granularity hour|day]
                                       [--admin URL] [--token T]
                                       print per-project usage as a table (through the admin API
                                       when the gateway runs: token from --token or TOLLGATE_ADMIN_TOKEN)
  tollgate user add --email E --role operator|owner [--project ID]...
                                       create an admin account (password asked without echo, or
                                       read from stdin; never an argument)
  tollgate user passwd --email E       change an account's password (signs its sessions out)
  tollgate user list                   accounts, roles and owned projects
  tollgate --version | --help
`

function version(): string {
  const pkg = JSON.parse(readFileSync(fileURLToPath(new URL('../package.json', import.meta.url)), 'utf8'))
  return pkg.version
}

/** Reads `-c FILE` / `--config FILE` and other `--flag value` pairs. */
export function parseFlags(args: string[]): { flags: Map<string, string>; rest: string[] } {
  const flags = new Map<string, string>()
  const rest: string[] = []
  for (let i = 0; i < args.length; i++) {
    const arg = args[i]
    if (arg === '-c' || arg === '--config') flags.set('config', args[++i] ?? '')
    else if (arg.startsWith('--')) {
      const [name, inline] = arg.slice(2).split('=', 2)
      flags.set(name, inline ?? (args[i + 1] && !args[i + 1].startsWith('-') ? args[++i] : 'true'))
    } else rest.push(arg)
  }
  return { flags, rest }
}

async function check(file: string): Promise<number> {
  const loaded = await loadConfig(file)
  if (!loaded.config) {
    for (const issue of loaded.issues) console.error(formatIssue(issue))
    return 1
  }
  // Dry build: plugins are instantiated against a throw-away store, nothing listens.
  const scratch = mkdtempSync(join(tmpdir(), 'tollgate-check-'))
  const store = openSqliteStore({ dataDir: scratch })
  const { current } = reconcileUpstreams(new Map(), loaded.config.upstreams)
  try {
    const built = await buildTable(loaded.config, {
      log: createLogger({ level: 'silent' }),
      metrics: new CoreMetrics(),
      store,
      upstreams: current,
      plugins: loaded.plugins,
      locate: loaded.locate,
    })
    if (!built.table) {
      for (const issue of built.issues) console.error(formatIssue(issue))
      return 1
    }
    await Promise.allSettled(built.table.instances.map((instance) => instance.close?.()))
    console.log(`${file}: ok (${built.table.routes.length} routes, ${loaded.plugins.size} plugins known)`)
    return 0
  } finally {
    await Promise.allSettled([...current.values()].map((u) => u.pool.close()))
    await store.close()
    rmSync(scratch, { recursive: true, force: true })
  }
}

/** `tollgate migrate`: brings the shared engine's schema up to date; nothing to do for SQLite. */
async function migrate(file: string): Promise<number> {
  const loaded = await loadConfig(file)
  if (!loaded.config) {
    for (const issue of loaded.issues) console.error(formatIssue(issue))
    return 1
  }
  const store = loaded.config.store
  try {
    const report = await migrateStore(store)
    if (!report) {
      console.log(`${file}: store.engine is ${store.engine}; its tables are created when it opens, nothing to migrate`)
      return 0
    }
    for (const step of report.applied) console.log(`applied ${step.module} ${step.version}: ${step.name}`)
    const versions = Object.entries(report.versions).map(([module, version]) => `${module} ${version}`).join(', ')
    console.log(`schema "${report.schema}" is current (${versions}); ${report.applied.length} migration(s) applied`)
    return 0
  } catch (error) {
    console.error(`tollgate migrate: ${(error as Error).message}`)
    return 1
  }
}

async function start(file: string): Promise<number> {
  let gateway: Gateway
  try {
    gateway = await Gateway.start({ configFile: file })
  } catch (error) {
    if (error instanceof ConfigError) {
      for (const issue of error.issues) console.error(issue)
      return 1
    }
    console.error(`tollgate: ${(error as Error).message}`)
    return 1
  }
  process.on('SIGHUP', () => void gateway.reload('SIGHUP'))
  await new Promise<void>((resolve) => {
    const stop = () => {
      process.off('SIGTERM', stop)
      process.off('SIGINT', stop)
      gateway.stop().then(resolve, resolve)
    }
    process.on('SIGTERM', stop)
    process.on('SIGINT', stop)
  })
  return 0
}

export async function main(argv: string[]): Promise<number> {
  const [command, ...args] = argv
  const { flags, rest } = parseFlags(args)
  const file = flags.get('config') || 'gateway.yaml'
  switch (command) {
    case 'start': {
      if (isWorker()) return runWorker(file)
      const workers = flags.get('workers')
      if (workers === undefined) return start(file)
      const count = parseWorkerCount(workers)
      if (count instanceof Error) {
        console.error(`tollgate: ${count.message}`)
        return 2
      }
      return runPrimary(file, count)
    }
    case 'check':
      return check(file)
    case 'routes':
      return routesCommand(args)
    case 'schema':
      return schemaCommand(flags.get('config') || undefined)
    case 'hash-key':
      if (!rest[0]) {
        console.error('usage: tollgate hash-key KEY')
        return 2
      }
      console.log(hashCredential(rest[0]))
      return 0
    case 'usage':
      return usageCommand(file, flags)
    case 'migrate':
      return migrate(file)
    case 'user':
      return userCommand(file, rest, flags)
    case '--version':
    case '-v':
      console.log(version())
      return 0
    case undefined:
    case '--help':
    case '-h':
    case 'help':
      console.log(HELP)
      return 0
    default:
      console.error(`tollgate: unknown command "${command}"\n\n${HELP}`)
      return 2
  }
}
