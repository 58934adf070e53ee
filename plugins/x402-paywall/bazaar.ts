/**
 * The bazaar (discovery) extension of a 402 answer, as the official SDK's
 * `declareDiscoveryExtension` (@x402/extensions/bazaar) writes it: `extensions.bazaar = {info, schema}`,
 * `info.input = {type: 'http', method, bodyType?: 'json'}` and `info.output = {type, format?}`, with
 * `schema` the JSON Schema `info` validates against. Facilitators that catalogue resources read it
 * from the payment they settle; clients echo it back in their payment payload.
 */

const BODY_METHODS = new Set(['POST', 'PUT', 'PATCH'])

/** `json` for a JSON media type, else the media type itself. */
function outputType(mimeType: string): string {
  return /\bjson\b/.test(mimeType) ? 'json' : mimeType
}

/**
 * The extension for one method of a route (built per 402 answer: only refusals pay for it).
 *
 * @example
 * ```ts
 * bazaarExtension('GET', 'application/json').info // { input: { type: 'http', method: 'GET' }, output: { type: 'json' } }
 * ```
 */
export function bazaarExtension(method: string, mimeType: string): { info: Record<string, unknown>; schema: Record<string, unknown> } {
  const withBody = BODY_METHODS.has(method)
  const input = withBody ? { type: 'http', method, bodyType: 'json' } : { type: 'http', method }
  const output = { type: outputType(mimeType), format: mimeType }
  const inputSchema = {
    type: 'object',
    properties: {
      type: { type: 'string', const: 'http' },
      method: { type: 'string', enum: [method] },
      ...(withBody ? { bodyType: { type: 'string', enum: ['json', 'form-data', 'text'] }, body: {} } : { queryParams: { type: 'object' } }),
    },
    required: withBody ? ['type', 'method', 'bodyType'] : ['type', 'method'],
    additionalProperties: false,
  }
  return {
    info: { input, output },
    schema: {
      $schema: 'https://json-schema.org/draft/2020-12/schema',
      type: 'object',
      properties: {
        input: inputSchema,
        output: { type: 'object', properties: { type: { type: 'string' }, format: { type: 'string' }, example: {} } },
      },
      required: ['input'],
    },
  }
}
