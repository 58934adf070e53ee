/**
 * `tollgate receipt verify` and `tollgate receipt public-key`: check a gateway receipt offline
 * against a published key set, and print the key set of a signing key (what the gateway serves at
 * `/.well-known/tollgate-receipt-keys.json`). Exit codes: 0 valid, 1 invalid, 2 usage mistake.
 */
import { readFileSync } from 'node:fs'
import { UsageError, type Parsed } from './cli-args.ts'
import type { RECEIPT_SPECS } from './command-specs.ts'
import { signingKeyFrom, verifyReceipt, type PublicJwk } from '../../plugins/receipt/receipts.ts'

async function readText(source: string, what: string): Promise<string> {
  if (source === '-') return readFileSync(0, 'utf8')
  if (/^https?:\/\//.test(source)) {
    const res = await fetch(source, { signal: AbortSignal.timeout(10_000) })
    if (!res.ok) throw new UsageError(`tollgate receipt verify: ${what} ${source} answered ${res.status}`)
    return res.text()
  }
  try {
    return readFileSync(source, 'utf8')
  } catch (error) {
    throw new UsageError(`tollgate receipt verify: cannot read ${what} ${source}: ${(error as NodeJS.ErrnoException).code ?? (error as Error).message}`)
  }
}

function keySetOf(text: string): { keys: PublicJwk[] } {
  let value: unknown
  try {
    value = JSON.parse(text)
  } catch {
    throw new UsageError('tollgate receipt verify: --keys is not JSON (a JWKS {keys: [...]} or one JWK)')
  }
  const set = value as { keys?: unknown; kty?: unknown }
  if (Array.isArray(set.keys)) return { keys: set.keys as PublicJwk[] }
  if (set.kty === 'OKP') return { keys: [value as PublicJwk] }
  throw new UsageError('tollgate receipt verify: --keys holds neither a JWKS {keys: [...]} nor an OKP JWK')
}

/** A receipt as given: a compact JWS, or a file/stdin holding one (or the extension's {format, signature} object). */
async function receiptOf(argument: string): Promise<string> {
  const looksLikeJws = /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*$/.test(argument.trim())
  const text = (looksLikeJws ? argument : await readText(argument, 'receipt file')).trim()
  if (text.startsWith('{')) {
    try {
      const object = JSON.parse(text) as { signature?: unknown; format?: unknown }
      if (object.format === 'jws' && typeof object.signature === 'string') return object.signature
    } catch {
      // Not JSON after all: verified (and refused) as a JWS below.
    }
  }
  return text
}

export async function receiptCommand(sub: keyof typeof RECEIPT_SPECS, parsed: Parsed): Promise<number> {
  const values = parsed.values as Partial<Record<'keys' | 'env' | 'kid', string>> & { json?: boolean }
  if (sub === 'public-key') {
    const name = values.env ?? 'TOLLGATE_RECEIPT_KEY'
    const text = process.env[name]
    if (!text) throw new UsageError(`tollgate receipt public-key: environment variable ${name} is not set`)
    try {
      console.log(JSON.stringify({ keys: [signingKeyFrom(text, values.kid ?? 'tollgate-receipt-1').publicJwk] }, null, 2))
    } catch (error) {
      console.error(`tollgate receipt public-key: ${(error as Error).message}`)
      return 1
    }
    return 0
  }
  const argument = parsed.positionals[0]
  if (!argument) throw new UsageError('tollgate receipt verify: the RECEIPT argument is missing (tollgate receipt verify RECEIPT --keys FILE)')
  if (!values.keys) throw new UsageError('tollgate receipt verify: --keys is required (the JWKS file or URL)')
  const keys = keySetOf(await readText(values.keys, 'key set'))
  const verdict = verifyReceipt(await receiptOf(argument), keys)
  if (values.json) console.log(JSON.stringify(verdict.ok ? { valid: true, kid: verdict.kid, payload: verdict.payload } : { valid: false, reason: verdict.reason }))
  else if (verdict.ok) {
    const p = verdict.payload
    console.log(`valid receipt (kid ${verdict.kid})`)
    for (const [field, value] of Object.entries(p)) console.log(`  ${field.padEnd(12)} ${field === 'issuedAt' ? `${value} (${new Date(Number(value) * 1000).toISOString()})` : value}`)
  } else console.error(`invalid receipt: ${verdict.reason}`)
  return verdict.ok ? 0 : 1
}
