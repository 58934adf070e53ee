/**
 * Example 200 bodies of every mirror-node GET operation, built from the response schemas of the
 * pinned OpenAPI document (their `example` values, else a value of the declared type), so the
 * stand-in answers the routes it has no fixture ledger for in the node's wire format.
 *
 * Regenerate mirror-examples.json after changing the pinned document:
 *   node --import tsx examples/upstreams/mirror-examples.ts test/fixtures/mirror-openapi/openapi-v0.160.yml
 */
import { readFileSync, writeFileSync } from 'node:fs'
import { fileURLToPath, pathToFileURL } from 'node:url'
import { parse } from 'yaml'

type Doc = { paths: Record<string, Record<string, any>>; components?: Record<string, Record<string, any>> }

function resolve(doc: Doc, node: any): any {
  let current = node
  for (let depth = 0; current && typeof current.$ref === 'string' && depth < 10; depth++) {
    const [, section, name] = /^#\/components\/([^/]+)\/(.+)$/.exec(current.$ref) ?? []
    current = doc.components?.[section]?.[name]
  }
  return current
}

/** A value for a schema: its example, else one built from its type (objects with every property). */
export function exampleOf(doc: Doc, raw: unknown, depth = 0): unknown {
  const schema = resolve(doc, raw)
  if (!schema || depth > 12) return null
  if (schema.example !== undefined) return schema.example
  if (Array.isArray(schema.allOf)) {
    // Parts that only add a description give null; a scalar part (a timestamp) is the value itself.
    const parts = schema.allOf.map((part: unknown) => exampleOf(doc, part, depth + 1)).filter((v: unknown) => v !== null)
    const scalar = parts.find((v: unknown) => typeof v !== 'object' || Array.isArray(v))
    return scalar !== undefined ? scalar : Object.assign({}, ...parts)
  }
  const alternatives = schema.oneOf ?? schema.anyOf
  if (Array.isArray(alternatives)) return exampleOf(doc, alternatives[0], depth + 1)
  if (Array.isArray(schema.enum)) return schema.enum[0]
  const type = Array.isArray(schema.type) ? schema.type.find((t: string) => t !== 'null') : schema.type
  if (type === 'object' || schema.properties) {
    const out: Record<string, unknown> = {}
    for (const [name, property] of Object.entries(schema.properties ?? {})) out[name] = exampleOf(doc, property, depth + 1)
    return out
  }
  if (type === 'array') return [exampleOf(doc, schema.items, depth + 1)]
  if (type === 'integer' || type === 'number') return schema.minimum ?? 0
  if (type === 'boolean') return false
  if (type === 'string') return ''
  return null
}

/** operationId -> example 200 body, for every operation under /api/v1. */
export function buildExamples(doc: Doc): Record<string, unknown> {
  const out: Record<string, unknown> = {}
  for (const [path, item] of Object.entries(doc.paths)) {
    if (!path.startsWith('/api/v1/')) continue
    for (const operation of [item.get, item.post].filter(Boolean)) {
      const ok = resolve(doc, operation.responses?.['200'] ?? operation.responses?.[200])
      const content = ok?.content?.['application/json'] ?? Object.values(ok?.content ?? {})[0]
      out[operation.operationId] = exampleOf(doc, (content as { schema?: unknown } | undefined)?.schema)
    }
  }
  return out
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const source = process.argv[2]
  if (!source) throw new Error('usage: mirror-examples.ts <openapi.yml>')
  const examples = buildExamples(parse(readFileSync(source, 'utf8')))
  const target = fileURLToPath(new URL('./mirror-examples.json', import.meta.url))
  writeFileSync(target, JSON.stringify(examples, null, 1) + '\n')
  process.stdout.write(`${Object.keys(examples).length} example bodies -> ${target}\n`)
}
