/** Exactly 200 bytes of JSON, the bench upstream's answer to every request (node's or nginx's). */
export function body200(): Buffer {
  const base = { ok: true, service: 'bench-upstream', pad: '' }
  const missing = 200 - Buffer.byteLength(JSON.stringify(base))
  return Buffer.from(JSON.stringify({ ...base, pad: 'x'.repeat(missing) }))
}
