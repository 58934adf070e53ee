/**
 * Compiles the mirror node's OpenAPI document into the small table the gateway validates with:
 * per operation its method, path below `/api/v1`, and parameters with the parts of their schema
 * that constrain a value (type, pattern, enum, bounds, items). `$ref`s are resolved. Nothing else
 * of the document (descriptions, examples, response schemas) is kept.
 */

/** The constraining part of a parameter schema. */
export interface ParamSchema {
  type?: string
  pattern?: string
  enum?: string[]
  minimum?: number
  maximum?: number
  format?: string
  items?: ParamSchema
  /** Alternatives (`oneOf`/`anyOf`): a value passes when one of them accepts it. */
  anyOf?: ParamSchema[]
}

export interface OperationParam {
  name: string
  in: 'path' | 'query'
  required: boolean
  schema: ParamSchema
}

export interface MirrorOperation {
  method: 'get' | 'post'
  /** Below `/api/v1`, OpenAPI style: `/accounts/{idOrAliasOrEvmAddress}/nfts`. */
  path: string
  operationId: string
  params: OperationParam[]
  /** Media types of the request body, for operations that take one. */
  bodyTypes?: string[]
}

type Doc = { paths: Record<string, Record<string, any>>; components?: Record<string, Record<string, any>> }

function resolve(doc: Doc, node: any): any {
  let current = node
  for (let depth = 0; current && typeof current.$ref === 'string' && depth < 10; depth++) {
    const [, section, name] = /^#\/components\/([^/]+)\/(.+)$/.exec(current.$ref) ?? []
    current = doc.components?.[section]?.[name]
  }
  return current
}

function schemaOf(doc: Doc, raw: any): ParamSchema {
  const node = resolve(doc, raw) ?? {}
  const out: ParamSchema = {}
  // OpenAPI 3.1 nullable types are `[string, "null"]`.
  const type = Array.isArray(node.type) ? node.type.find((t: string) => t !== 'null') : node.type
  if (type) out.type = type
  if (typeof node.pattern === 'string') out.pattern = node.pattern
  if (Array.isArray(node.enum)) out.enum = node.enum.filter((v: unknown) => v !== null).map(String)
  if (typeof node.minimum === 'number') out.minimum = node.minimum
  if (typeof node.maximum === 'number') out.maximum = node.maximum
  if (typeof node.format === 'string') out.format = node.format
  if (node.items) out.items = schemaOf(doc, node.items)
  const alternatives = node.oneOf ?? node.anyOf
  if (Array.isArray(alternatives)) out.anyOf = alternatives.map((alt: unknown) => schemaOf(doc, alt))
  return out
}

const API_PREFIX = '/api/v1'

/**
 * The operations of an OpenAPI document, sorted by path then method.
 * @example compileMirrorOpenApi(yaml.parse(text))[0] // { method: 'get', path: '/accounts', operationId: 'getAccounts', params: [...] }
 */
export function compileMirrorOpenApi(doc: Doc): MirrorOperation[] {
  const out: MirrorOperation[] = []
  for (const [fullPath, item] of Object.entries(doc.paths)) {
    if (!fullPath.startsWith(API_PREFIX + '/')) continue
    const shared = (item.parameters ?? []) as unknown[]
    for (const method of ['get', 'post'] as const) {
      const operation = item[method]
      if (!operation) continue
      const params = [...shared, ...(operation.parameters ?? [])].map((raw) => resolve(doc, raw)).filter(Boolean)
      const body = resolve(doc, operation.requestBody)
      out.push({
        method,
        path: fullPath.slice(API_PREFIX.length),
        operationId: operation.operationId,
        params: params
          .filter((p: any) => p.in === 'path' || p.in === 'query')
          .map((p: any) => ({ name: p.name, in: p.in, required: p.required === true || p.in === 'path', schema: schemaOf(doc, p.schema) })),
        ...(body?.content ? { bodyTypes: Object.keys(body.content) } : {}),
      })
    }
  }
  return out.sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : a.method < b.method ? -1 : 1))
}
