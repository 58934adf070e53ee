/**
 * One valid and one invalid request for every GET path of the pinned mirror OpenAPI document
 * (test/fixtures/mirror-openapi), with what the node answers to the invalid one. The paths come
 * from the document itself, so a path added there without gateway support fails the tests.
 */
import { readFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import { parse } from 'yaml'
import { INVALID_TRANSACTION_ID } from '../../plugins/mirror-validate/transaction-id.ts'

export const OPENAPI_FILE = fileURLToPath(new URL('../fixtures/mirror-openapi/openapi-v0.160.yml', import.meta.url))
export const openApiDocument = (): any => parse(readFileSync(OPENAPI_FILE, 'utf8'))

export interface PathCase {
  /** OpenAPI path below /api/v1, e.g. `/blocks/{hashOrNumber}`. */
  template: string
  operationId: string
  /** Path and query below /api/v1 that the node accepts. */
  valid: string
  /** Path and query below /api/v1 that the node refuses. */
  invalid: string
  status: number
  messages: { message: string; detail?: string }[]
}

/** Values the node accepts, by path parameter name (ids of the stand-in's fixture ledger where it has them). */
const VALID: Record<string, string> = {
  idOrAliasOrEvmAddress: '0.0.1001',
  hookId: '1',
  hashOrNumber: '12',
  contractIdOrAddress: '0.0.1001',
  transactionIdOrHash: '0.0.1001-1700099999-000000000',
  timestamp: '1700000000.000000001',
  scheduleId: '0.0.1001',
  tokenId: '0.0.2001',
  serialNumber: '1',
  topicId: '0.0.3001',
  sequenceNumber: '1',
  transactionId: '0.0.1001-1700099999-000000000',
}

/** What the node answers for the path parameter `x!`, by operation (its first path parameter). */
const BAD_PATH: Record<string, [number, string]> = {
  getBlock: [400, 'Invalid parameter: hashOrNumber'],
  getContract: [400, 'Invalid parameter: contractid'],
  getContractResultByTransactionIdOrHash: [400, INVALID_TRANSACTION_ID],
  getContractOpcodes: [400, INVALID_TRANSACTION_ID],
  getContractResultByIdAndTimestamp: [400, 'Invalid parameter: contractid'],
  getSchedule: [400, 'Invalid parameter: scheduleid'],
  getToken: [400, 'Invalid parameter: tokenid'],
  getNft: [400, 'Invalid parameter: tokenid'],
  getTopicMessageByTimestamp: [400, 'Invalid parameter: consensus_timestamp'],
  // nginx sends only numeric topic ids to rest-java; the REST module has no such route.
  getTopic: [404, 'Not found'],
  getTopicMessageByIdAndSequenceNumber: [400, 'Invalid parameter: topic.id'],
  getTransaction: [400, INVALID_TRANSACTION_ID],
}

/** Every GET path of the document with its two requests. */
export function pathCases(doc = openApiDocument()): PathCase[] {
  const cases: PathCase[] = []
  for (const [fullPath, item] of Object.entries<any>(doc.paths)) {
    const operation = item.get
    if (!operation || !fullPath.startsWith('/api/v1/')) continue
    const template = fullPath.slice('/api/v1'.length)
    const params = (operation.parameters ?? []).map((p: any) => (p.$ref ? doc.components.parameters[p.$ref.split('/').pop()] : p))
    const query = new Set(params.filter((p: any) => p.in === 'query').map((p: any) => p.name))
    const valid = template.replace(/\{(\w+)\}/g, (_w, name: string) => VALID[name] ?? 'missing-example')
    const base = { template, operationId: operation.operationId, valid }
    if (query.has('limit')) {
      cases.push({ ...base, invalid: `${valid}?limit=0`, status: 400, messages: [{ message: 'Invalid parameter: limit' }] })
    } else if (template.includes('{')) {
      const bad = BAD_PATH[operation.operationId]
      if (!bad) throw new Error(`no invalid case for ${template}`)
      let first = true
      const invalid = template.replace(/\{(\w+)\}/g, (_w, name: string) => (first ? ((first = false), 'x!') : VALID[name]))
      cases.push({ ...base, invalid, status: bad[0], messages: [{ message: bad[1] }] })
    } else if (query.has('timestamp')) {
      cases.push({ ...base, invalid: `${valid}?timestamp=x`, status: 400, messages: [{ message: 'Invalid parameter: timestamp' }] })
    } else {
      // No parameter at all: only the query parser can refuse it.
      cases.push({ ...base, invalid: `${valid}?a[b][c]=1`, status: 400, messages: [{ message: 'Input depth exceeded depth option of 1 and strictDepth is true' }] })
    }
  }
  return cases
}
