/**
 * The `tollgate` command line. Every command parses its arguments strictly (core/cli/cli-args.ts)
 * and answers `--help` without doing anything else; the modules a command needs are imported
 * only when it runs, so `--help` and a usage mistake start nothing.
 *
 * @example
 * ```sh
 * npx tollgate start -c gateway.yaml
 * npx tollgate check -c gateway.yaml     # exits 1 and prints every error
 * npx tollgate hash-key my-api-key       # the sha256:... form gateway.yaml stores
 * ```
 */
import { readFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import { CONFIG_OPTION, helpText, nearest, nearestFlag, parseCommand, UsageError, type CommandSpec, type Parsed } from './cli-args.ts'
import { RECEIPT_SPECS, USAGE_SPEC, USER_SPECS } from './command-specs.ts'
import type { Gateway } from '../server/gateway.ts'

function version(): string {
  const pkg = JSON.parse(readFileSync(fileURLToPath(new URL('../../package.json', import.meta.url)), 'utf8'))
  return pkg.version
}

async function check(file: string): Promise<number> {
  const { withDryBuild } = await import('./dry-build.ts')
  return withDryBuild(file, (table, loaded) => {
    console.log(`${file}: ok (${table.routes.length} routes, ${loaded.plugins.size} plugins known)`)
    return 0
  })
}

/** `tollgate migrate`: brings the shared engine's schema up to date; nothing to do for SQLite. */
async function migrate(file: string): Promise<number> {
  const { loadConfig } = await import('../config/load.ts')
  const { formatIssue } = await import('../config/source.ts')
  const { migrateStore } = await import('../store/open.ts')
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
  const { ConfigError, Gateway: GatewayClass } = await import('../server/gateway.ts')
  let gateway: Gateway
  try {
    gateway = await GatewayClass.start({ configFile: file })
  } catch (error) {
    if (error instanceof ConfigError) {
      for (const issue of error.issues) console.error(issue)
      return 1
    }
    console.error(`tollgate: ${(error as Error).message}`)
    return 1
  }
  process.on('SIGHUP', () => gateway.reloadInBackground('SIGHUP'))
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

interface Command {
  spec: CommandSpec
  run(parsed: Parsed): Promise<number>
}

const configOf = (parsed: Parsed) => (parsed.values.config as string | undefined) ?? 'gateway.yaml'

/** One command per subcommand of a group (`user add`, `receipt verify`...), all run by `run`. */
function commandGroup<Sub extends string>(group: string, specs: Record<Sub, CommandSpec>, run: (sub: Sub, parsed: Parsed) => Promise<number>): Record<string, Command> {
  const commands: Record<string, Command> = {}
  for (const sub of Object.keys(specs) as Sub[]) commands[`${group} ${sub}`] = { spec: specs[sub], run: (parsed) => run(sub, parsed) }
  return commands
}

const COMMANDS: Record<string, Command> = {
  start: {
    spec: {
      name: 'start',
      summary: 'Run the gateway. With --workers, N processes share the listener (auto: one per CPU).',
      options: { config: CONFIG_OPTION, workers: { type: 'string', value: 'N|auto', description: 'number of worker processes' } },
    },
    async run(parsed) {
      const file = configOf(parsed)
      const workers = await import('../server/workers.ts')
      if (workers.isWorker()) return workers.runWorker(file)
      if (parsed.values.workers === undefined) return start(file)
      const count = workers.parseWorkerCount(parsed.values.workers as string)
      if (count instanceof Error) throw new UsageError(`tollgate start: ${count.message}`)
      return workers.runPrimary(file, count)
    },
  },
  check: {
    spec: { name: 'check', summary: 'Parse, validate and dry-build the config; exit 1 and print every error.', options: { config: CONFIG_OPTION } },
    run: (parsed) => check(configOf(parsed)),
  },
  routes: {
    spec: {
      name: 'routes',
      summary: 'Print the route table with what its plugins say of each route (x402 prices, credit costs).',
      options: { config: CONFIG_OPTION, json: { type: 'boolean', description: 'print JSON ({routes, wellKnown}) instead of text' } },
    },
    async run(parsed) {
      const { printRoutes } = await import('./routes-cli.ts')
      return printRoutes(configOf(parsed), parsed.values.json === true)
    },
  },
  schema: {
    spec: {
      name: 'schema',
      summary: 'Print the composed JSON Schema of gateway.yaml (with -c, the custom plugins FILE names are included).',
      options: { config: { ...CONFIG_OPTION, description: 'also bind the custom plugins this config names' } },
    },
    async run(parsed) {
      const { schemaCommand } = await import('./schema-cli.ts')
      return schemaCommand(parsed.values.config as string | undefined)
    },
  },
  'hash-key': {
    spec: { name: 'hash-key', positionals: ['KEY'], summary: 'Print the hashed form of a key or secret for gateway.yaml.', options: {} },
    async run(parsed) {
      if (!parsed.positionals[0]) throw new UsageError('tollgate hash-key: the KEY argument is missing (tollgate hash-key KEY)')
      const { hashCredential } = await import('../projects/projects.ts')
      console.log(hashCredential(parsed.positionals[0]))
      return 0
    },
  },
  migrate: {
    spec: {
      name: 'migrate',
      summary: 'Apply the shared store\'s PostgreSQL migrations (store.engine: shared); refuses a schema newer than this version knows.',
      options: { config: CONFIG_OPTION },
      notes: 'The embedded engine (sqlite) creates its tables when it opens: there is nothing to migrate.',
    },
    run: (parsed) => migrate(configOf(parsed)),
  },
  usage: {
    spec: USAGE_SPEC,
    async run(parsed) {
      const { usageCommand } = await import('./usage-cli.ts')
      return usageCommand(configOf(parsed), parsed.values)
    },
  },
  ...commandGroup('user', USER_SPECS, async (sub, parsed) => {
    const { userCommand } = await import('./user-cli.ts')
    return userCommand(configOf(parsed), sub, parsed.values)
  }),
  ...commandGroup('receipt', RECEIPT_SPECS, async (sub, parsed) => {
    const { receiptCommand } = await import('./receipt-cli.ts')
    return receiptCommand(sub, parsed)
  }),
}

function help(): string {
  const lines = Object.values(COMMANDS).map(({ spec }) => {
    const usage = `tollgate ${spec.name}${spec.positionals?.length ? ` ${spec.positionals.join(' ')}` : ''}`
    return `  ${usage.padEnd(22)} ${spec.summary}`
  })
  return [
    'tollgate — an authenticated, credit-metered reverse proxy',
    '',
    'Usage: tollgate COMMAND [options]   (tollgate COMMAND --help lists its options)',
    '',
    'Commands:',
    ...lines,
    '',
    '  tollgate --version     print the version',
    '  tollgate --help        print this help',
  ].join('\n')
}

const nearestCommand = (typed: string) => nearest(typed, ['start', 'check', 'schema', 'hash-key', 'migrate', 'usage', 'user', 'receipt'])

/** Runs one command line; returns the exit code (2 for a usage mistake). */
export async function main(argv: string[]): Promise<number> {
  const [first, ...rest] = argv
  let name = first
  let args = rest
  if (first === 'user') {
    const sub = rest[0]
    if (sub === undefined || sub === '--help' || sub === '-h' || sub === 'help') {
      console.log(['Usage: tollgate user add|passwd|list [options]', '', ...Object.values(USER_SPECS).map((s) => `  tollgate ${s.name.padEnd(12)} ${s.summary.split('\n')[0]}`), '', 'tollgate user SUBCOMMAND --help lists its options.'].join('\n'))
      return sub === undefined ? 2 : 0
    }
    name = `user ${sub}`
    args = rest.slice(1)
    if (!COMMANDS[name]) {
      console.error(`tollgate user: unknown subcommand "${sub}" (add, passwd or list)`)
      return 2
    }
  }
  if (first === 'receipt') {
    const sub = rest[0]
    if (sub === undefined || sub === '--help' || sub === '-h' || sub === 'help') {
      console.log(['Usage: tollgate receipt verify|public-key [options]', '', ...Object.values(RECEIPT_SPECS).map((s) => `  tollgate ${s.name.padEnd(19)} ${s.summary}`), '', 'tollgate receipt SUBCOMMAND --help lists its options.'].join('\n'))
      return sub === undefined ? 2 : 0
    }
    name = `receipt ${sub}`
    args = rest.slice(1)
    if (!COMMANDS[name]) {
      console.error(`tollgate receipt: unknown subcommand "${sub}" (verify or public-key)`)
      return 2
    }
  }
  switch (first) {
    case '--version':
    case '-v':
      console.log(version())
      return 0
    case undefined:
    case '--help':
    case '-h':
    case 'help':
      console.log(help())
      return 0
  }
  const command = COMMANDS[name]
  if (!command) {
    const hint = first.startsWith('-') ? `unknown option ${first} (${nearestFlag(first, { version: { type: 'boolean', description: '' } })})` : `unknown command "${first}" (did you mean ${nearestCommand(first)}?)`
    console.error(`tollgate: ${hint}; see tollgate --help`)
    return 2
  }
  try {
    const parsed = parseCommand(command.spec, args)
    if (parsed.help) {
      console.log(helpText(command.spec))
      return 0
    }
    return await command.run(parsed)
  } catch (error) {
    if (!(error instanceof UsageError)) throw error
    console.error(error.message)
    return 2
  }
}
