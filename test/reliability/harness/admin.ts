/** Reads of the gateway's admin API and /metrics used as the suite's source of truth. */
import { request } from 'undici'
import { ADMIN_TOKEN, PROJECT } from './environment.ts'

/** Credits used in the project's current period, from the ledger (GET /admin/projects/:id/usage). */
export async function creditsUsed(adminUrl: string, project = PROJECT): Promise<number> {
  const res = await request(`${adminUrl}/admin/projects/${project}/usage`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } })
  const body = (await res.body.json()) as { balance: { used: number } }
  if (res.statusCode !== 200) throw new Error(`usage answered ${res.statusCode}: ${JSON.stringify(body)}`)
  return body.balance.used
}

/**
 * Credits used once the project's ledger is still: a request the gateway abandoned when it closed
 * the connection releases its pending reservation a moment after the client saw the close, so a
 * single read right after the exchange can count a reservation that is on its way back. Two equal
 * reads 100 ms apart (at most `timeoutMs`) are the settled figure; a reservation that stays pending
 * keeps counting, so a real leak is still caught.
 */
export async function settledCreditsUsed(adminUrl: string, project = PROJECT, timeoutMs = 3000): Promise<number> {
  const deadline = Date.now() + timeoutMs
  let last = await creditsUsed(adminUrl, project)
  for (;;) {
    await new Promise((r) => setTimeout(r, 100))
    const now = await creditsUsed(adminUrl, project)
    if (now === last || Date.now() > deadline) return now
    last = now
  }
}

/** One sample value of /metrics, e.g. `metric(url, 'tollgate_config_reloads_total', { result: 'success' })`. */
export async function metric(adminUrl: string, name: string, labels: Record<string, string> = {}): Promise<number> {
  const res = await request(`${adminUrl}/metrics`)
  const text = await res.body.text()
  let sum = 0
  for (const line of text.split('\n')) {
    if (!line.startsWith(name)) continue
    const rest = line.slice(name.length)
    if (rest[0] !== '{' && rest[0] !== ' ') continue
    if (!Object.entries(labels).every(([k, v]) => rest.includes(`${k}="${v}"`))) continue
    sum += Number(line.slice(line.lastIndexOf(' ') + 1))
  }
  return sum
}
