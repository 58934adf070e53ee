/**
 * Writes openapi-operations.json from a mirror-node OpenAPI document (see openapi-compile.ts).
 * Usage: node --import tsx plugins/mirror-validate/openapi-generate.ts test/fixtures/mirror-openapi/openapi-v0.160.yml
 */
import { readFileSync, writeFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import { parse } from 'yaml'
import { compileMirrorOpenApi } from './openapi-compile.ts'

const source = process.argv[2]
if (!source) throw new Error('usage: openapi-generate.ts <openapi.yml>')
const operations = compileMirrorOpenApi(parse(readFileSync(source, 'utf8')))
const target = fileURLToPath(new URL('./openapi-operations.json', import.meta.url))
writeFileSync(target, JSON.stringify(operations, null, 1) + '\n')
process.stdout.write(`${operations.length} operations -> ${target}\n`)
