/**
 * `POST /api/v1/contracts/call` (the web3 module's EVM call simulation): the request body checked
 * as the web3 module binds and validates it (facts from its `ContractCallRequest` and
 * `HexValidator`, v0.160; re-implemented). Refusals use web3's shape: `message` is the reason
 * phrase `Bad Request`, `detail` is `<field> field <constraint text>`, `data` is empty.
 */
import type { MirrorMessage, MirrorRejection } from './rules.ts'

/** web3's default cap on a hex field (`@Hex` maxLength): 1 MiB of hex digits. */
export const MAX_DATA_HEX = 1048576
const HEX = (min: number, max: number) => new RegExp(`^(0[xX])?[0-9a-fA-F]{${min},${max}}$`)
const DATA = HEX(0, MAX_DATA_HEX)
const ADDRESS = HEX(40, 40)
const BLOCK = /^((0[xX])?[0-9a-fA-F]+|\d+|earliest|latest|pending|safe|finalized)$/i
const MAX_LONG = 2n ** 63n - 1n

const bad = (detail: string): MirrorMessage => ({ message: 'Bad Request', detail, data: '' })

/** A JSON number that Jackson binds to a Java long (integral, in range). */
function asLong(value: unknown): bigint | undefined {
  if (typeof value !== 'number' || !Number.isInteger(value)) return undefined
  const big = BigInt(value)
  return big >= -MAX_LONG - 1n && big <= MAX_LONG ? big : undefined
}

/**
 * How web3 would refuse this body, or `null` when it would run the call.
 * @example checkContractCall({ to: '0x12', gas: 5 })
 * // { status: 400, messages: [{ message: 'Bad Request', detail: 'gas field must be greater than or equal to 21000', data: '' }, ...] }
 */
export function checkContractCall(body: unknown): MirrorRejection | null {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) {
    return { status: 400, messages: [bad('Unable to read the request body: a JSON object is expected')] }
  }
  const request = body as Record<string, unknown>
  const unreadable: string[] = []
  const str = (field: string): string | null => {
    const value = request[field]
    if (value === undefined || value === null) return null
    if (typeof value !== 'string') unreadable.push(field)
    return typeof value === 'string' ? value : null
  }
  const long = (field: string, fallback: bigint): bigint => {
    const value = request[field]
    if (value === undefined || value === null) return fallback
    const parsed = asLong(value)
    if (parsed === undefined) unreadable.push(field)
    return parsed ?? fallback
  }
  const block = str('block')
  const data = str('data')
  const from = str('from')
  const to = str('to')
  const gas = long('gas', 15_000_000n)
  const gasPrice = long('gasPrice', 0n)
  const value = long('value', 0n)
  if (request.estimate !== undefined && request.estimate !== null && typeof request.estimate !== 'boolean') unreadable.push('estimate')
  // Jackson stops at the first field it cannot bind; nothing else is checked then.
  if (unreadable.length > 0) return { status: 400, messages: [bad(`Unable to read the request body: field ${unreadable[0]} has the wrong type`)] }
  if (block !== null && !BLOCK.test(block)) return { status: 400, messages: [bad('Invalid block value')] }

  const problems: [string, string][] = []
  if (data !== null && data !== '' && !DATA.test(data)) problems.push(['data', 'invalid hexadecimal string'])
  if (from !== null && !ADDRESS.test(from)) problems.push(['from', 'invalid hexadecimal string'])
  if (to !== null && to !== '' && !ADDRESS.test(to)) problems.push(['to', 'invalid hexadecimal string'])
  if (gas < 21_000n) problems.push(['gas', 'must be greater than or equal to 21000'])
  if (gasPrice < 0n) problems.push(['gasPrice', 'must be greater than or equal to 0'])
  if (value < 0n) problems.push(['value', 'must be greater than or equal to 0'])
  if (value > 0n && from === null) problems.push(['from', 'must not be empty'])
  if (value > 0n && from !== null && (to === null || to === '') && !isInitBytecode(data)) problems.push(['to', 'must not be empty'])
  if (problems.length === 0) return null
  problems.sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0))
  return { status: 400, messages: problems.map(([field, text]) => bad(`${field} field ${text}`)) }
}

/** Contract creation: data that starts like Solidity init code (`6080604052`), so `to` may be empty. */
function isInitBytecode(data: string | null): boolean {
  return data !== null && /^(0[xX])?6080604052/.test(data)
}
