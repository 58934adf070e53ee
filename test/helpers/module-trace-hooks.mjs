// Loader hooks of module-trace.mjs: each resolved URL is appended to the trace file, then the
// next hook resolves as it would have.
import { appendFileSync } from 'node:fs'

let file

export function initialize(data) {
  file = data
}

export async function resolve(specifier, context, next) {
  const result = await next(specifier, context)
  appendFileSync(file, result.url + '\n')
  return result
}
