/**
 * Strict argument parsing for every `tollgate` command, on `node:util` parseArgs (`strict: true`).
 * A command declares its options once; the same declaration prints its `--help`. A mistake never
 * falls back to a default: an unknown flag, a flag without its value or a stray argument exits 2,
 * naming the flag and, for a misspelling, the nearest valid one.
 */
import { parseArgs } from 'node:util'

export interface OptionSpec {
  type: 'string' | 'boolean'
  short?: string
  multiple?: boolean
  /** Shown in `--help`, e.g. `FILE`. */
  value?: string
  description: string
}

export interface CommandSpec {
  /** As typed after `tollgate`, e.g. `user add`. */
  name: string
  /** Positional arguments, e.g. `KEY`; none when absent. */
  positionals?: string[]
  summary: string
  options: Record<string, OptionSpec>
  /** Extra lines printed after the options. */
  notes?: string
}

/** A usage mistake: printed on stderr, exit code 2. */
export class UsageError extends Error {}

export const CONFIG_OPTION: OptionSpec = { type: 'string', short: 'c', value: 'FILE', description: 'gateway config file (default: gateway.yaml)' }
const HELP_OPTION: OptionSpec = { type: 'boolean', short: 'h', description: 'print this help and exit' }

function optionLabel(name: string, spec: OptionSpec): string {
  return `${spec.short ? `-${spec.short}, ` : ''}--${name}${spec.type === 'string' ? ` ${spec.value ?? 'VALUE'}` : ''}`
}

export function helpText(command: CommandSpec): string {
  const options = { ...command.options, help: HELP_OPTION }
  const labels = Object.entries(options).map(([name, spec]) => [optionLabel(name, spec), spec.description + (spec.multiple ? ' (repeatable)' : '')])
  const width = Math.max(...labels.map(([label]) => label.length))
  const positionals = command.positionals?.length ? ` ${command.positionals.join(' ')}` : ''
  return [
    `Usage: tollgate ${command.name}${positionals} [options]`,
    '',
    command.summary,
    '',
    'Options:',
    ...labels.map(([label, description]) => `  ${label.padEnd(width)}  ${description}`),
    ...(command.notes ? ['', command.notes] : []),
  ].join('\n')
}

/** Edit distance, for "did you mean". */
function distance(a: string, b: string): number {
  const row = Array.from({ length: b.length + 1 }, (_, j) => j)
  for (let i = 1; i <= a.length; i++) {
    let diagonal = row[0]
    row[0] = i
    for (let j = 1; j <= b.length; j++) {
      const above = row[j]
      row[j] = Math.min(row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] === b[j - 1] ? 0 : 1))
      diagonal = above
    }
  }
  return row[b.length]
}

/** The name nearest to what was typed (always one: a user is better served by a guess and the help). */
export function nearest(typed: string, names: string[]): string {
  let best = names[0]
  for (const name of names) if (distance(typed, name) < distance(typed, best)) best = name
  return best
}

/** "did you mean --config?" for a near miss; the list of valid flags when nothing is close. */
export function nearestFlag(typed: string, options: Record<string, OptionSpec>): string {
  const bare = typed.replace(/^-+/, '').split('=')[0]
  const names = Object.keys({ ...options, help: HELP_OPTION })
  // A flag that extends or cuts a valid one (--config-file, --proj) means that one.
  const stem = names.find((name) => bare.startsWith(name) || (bare.length >= 3 && name.startsWith(bare)))
  const best = stem ?? nearest(bare, names)
  if (stem || distance(bare, best) <= Math.max(2, Math.floor(best.length / 3))) return `did you mean --${best}?`
  return `valid options: ${names.map((name) => `--${name}`).join(', ')}`
}

export type Parsed = { values: Record<string, string | boolean | string[] | undefined>; positionals: string[]; help: boolean }

/**
 * Parses `args` for `command`. Returns `help: true` when `--help`/`-h` was asked (the caller
 * prints and exits 0 without doing anything else); throws UsageError for any mistake.
 */
export function parseCommand(command: CommandSpec, args: string[]): Parsed {
  const options = { ...command.options, help: HELP_OPTION }
  const config = Object.fromEntries(Object.entries(options).map(([name, spec]) => [name, { type: spec.type, multiple: spec.multiple === true, ...(spec.short ? { short: spec.short } : {}) }]))
  // `--help` wins over any other mistake on the line: the user is asking how to write it.
  const loose = parseArgs({ args, options: config, strict: false, allowPositionals: true, tokens: true })
  if (loose.tokens.some((token) => token.kind === 'option' && token.name === 'help')) return { values: {}, positionals: [], help: true }
  let parsed
  try {
    parsed = parseArgs({ args, options: config, strict: true, allowPositionals: true })
  } catch (error) {
    throw new UsageError(explain(command, args, loose.tokens, error as NodeJS.ErrnoException))
  }
  const allowed = command.positionals?.length ?? 0
  if (parsed.positionals.length > allowed) {
    const extra = parsed.positionals[allowed]
    throw new UsageError(`tollgate ${command.name}: unexpected argument "${extra}"${allowed ? '' : ' (this command takes options only)'}`)
  }
  return { values: parsed.values as Parsed['values'], positionals: parsed.positionals, help: false }
}

type Token = ReturnType<typeof parseArgs>['tokens'] extends (infer T)[] | undefined ? T : never

/** Turns parseArgs' error into a sentence naming the flag at fault. */
function explain(command: CommandSpec, args: string[], tokens: Token[], error: NodeJS.ErrnoException): string {
  const prefix = `tollgate ${command.name}:`
  const options = command.options
  for (const token of tokens) {
    if (token.kind !== 'option') continue
    const spec = options[token.name]
    if (!spec) {
      return `${prefix} unknown option ${token.rawName} (${nearestFlag(token.rawName, options)}); see tollgate ${command.name} --help`
    }
    const label = spec.short ? `-${spec.short}/--${token.name}` : `--${token.name}`
    if (spec.type === 'string' && (token.value === undefined || (token.inlineValue !== true && token.value.startsWith('-')))) {
      return `${prefix} option ${token.rawName} needs a value (${label} ${spec.value ?? 'VALUE'})`
    }
    if (spec.type === 'boolean' && token.inlineValue) return `${prefix} option ${token.rawName} takes no value`
  }
  // Anything parseArgs finds that the walk above does not (kept verbatim rather than hidden).
  return `${prefix} ${error.message} (arguments: ${args.join(' ')})`
}
