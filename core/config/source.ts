/**
 * Reads a YAML config file keeping source positions, and applies `${VAR}` / `${VAR:-default}`.
 * Every problem becomes a {@link ConfigIssue} carrying file, line, column and config path.
 */
import { readFileSync } from 'node:fs'
import { basename } from 'node:path'
import { LineCounter, parseDocument, visit, parse as parseYamlScalar, type Document, type Node } from 'yaml'

export type ConfigPath = readonly (string | number)[]

export interface ConfigIssue {
  file: string
  line: number
  column: number
  path: ConfigPath
  /** Optional label inserted between path and message, e.g. `credit-meter.cost`. */
  subject?: string
  message: string
}

/** `gateway.yaml:41:9 routes[3].plugins[1] credit-meter.cost: must be integer >= 0` */
export function formatIssue(issue: ConfigIssue): string {
  const where = `${issue.file}:${issue.line}:${issue.column}`
  const path = formatPath(issue.path)
  const head = [where, path, issue.subject].filter(Boolean).join(' ')
  return `${head}: ${issue.message}`
}

export function formatPath(path: ConfigPath): string {
  let out = ''
  for (const part of path) out += typeof part === 'number' ? `[${part}]` : out ? `.${part}` : part
  return out
}

export class ConfigSource {
  readonly file: string
  readonly label: string
  readonly text: string
  readonly #doc: Document
  readonly #lines = new LineCounter()
  readonly issues: ConfigIssue[] = []
  value: unknown

  constructor(file: string, env: NodeJS.ProcessEnv = process.env, text?: string) {
    this.file = file
    this.label = basename(file)
    this.text = text ?? readFileSync(file, 'utf8')
    this.#doc = parseDocument(this.text, { lineCounter: this.#lines, prettyErrors: false, uniqueKeys: true })
    // After the first few syntax errors the rest are cascades of the same mistake.
    for (const error of this.#doc.errors.slice(0, 3)) {
      const [start] = error.pos
      this.issues.push({ ...this.#position(start), file: this.label, path: [], message: error.message.split('\n')[0] })
    }
    if (this.issues.length === 0) {
      this.#interpolate(env)
      this.value = this.#doc.toJS({ maxAliasCount: 100 })
    }
  }

  #position(offset: number): { line: number; column: number } {
    const pos = this.#lines.linePos(offset)
    return { line: pos.line, column: pos.col }
  }

  /** Position of the node at `path`; falls back to the nearest existing parent. With `atKey`, the key's position. */
  locate(path: ConfigPath, atKey = false): { line: number; column: number } {
    for (let depth = path.length; depth >= 0; depth--) {
      const parentPath = path.slice(0, depth)
      if (atKey && depth === path.length && depth > 0) {
        const parent = this.#doc.getIn(path.slice(0, -1), true) as any
        const pair = parent?.items?.find?.((item: any) => item?.key?.value === path[path.length - 1])
        if (pair?.key?.range) return this.#position(pair.key.range[0])
      }
      const node = (depth === 0 ? this.#doc.contents : this.#doc.getIn(parentPath, true)) as Node | undefined
      if (node && (node as any).range) return this.#position((node as any).range[0])
    }
    return { line: 1, column: 1 }
  }

  issue(path: ConfigPath, message: string, options: { subject?: string; atKey?: boolean } = {}): ConfigIssue {
    return this.report({ file: this.label, ...this.locate(path, options.atKey), path, subject: options.subject, message })
  }

  /** Records an issue once: the routes a template (`each`) expands to share its block, and its mistakes. */
  report(issue: ConfigIssue): ConfigIssue {
    const same = this.issues.find((seen) => seen.line === issue.line && seen.column === issue.column && seen.message === issue.message && seen.subject === issue.subject)
    if (same) return same
    this.issues.push(issue)
    return issue
  }

  #interpolate(env: NodeJS.ProcessEnv): void {
    const pattern = /\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}/g
    visit(this.#doc, {
      Scalar: (_key, node) => {
        if (typeof node.value !== 'string' || !node.value.includes('${')) return
        const whole = /^\$\{[^}]*\}$/.test(node.value)
        const replaced = node.value.replace(pattern, (_m, name: string, fallback: string | undefined) => {
          const value = env[name]
          if (value !== undefined && value !== '') return value
          if (fallback !== undefined) return fallback
          const at = node.range ? this.#position(node.range[0]) : { line: 1, column: 1 }
          this.issues.push({ file: this.label, ...at, path: [], message: `environment variable ${name} is not set and has no default` })
          return ''
        })
        // An unquoted `${PORT:-8080}` should yield the number 8080, as if written in place.
        node.value = whole && node.type === 'PLAIN' ? parseYamlScalar(replaced) : replaced
      },
    })
  }
}
