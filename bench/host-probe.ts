/**
 * How fast this host is today, in the three ways a gateway bench depends on: computation, allocation,
 * and waking a process on a loopback socket. Wall-clock benches on this shared VM have moved by 3–4×
 * between sessions with the code unchanged (bench/RESULTS.md, session 16); run this next to a bench
 * and quote it, so that a slow host is not read as a regression (or a fast one as a win).
 *
 *   node --import tsx bench/host-probe.ts
 *
 * Prints: a pure-JS loop (ms), small-object allocation (ns per object), a system call (`fstatSync`, ns)
 * and a 100-byte TCP ping-pong on 127.0.0.1 (µs per round trip: two wake-ups and four socket calls).
 * Session 16 (2026-11-28 21:21, a host whose loopback benches ran 3.5× slower than the day before):
 * loop 1,396 ms, allocation 85 ns/object, fstat 1,409 ns, ping-pong 40.8 µs.
 */
import { fstatSync, openSync, closeSync } from 'node:fs'
import { createServer, connect, type AddressInfo } from 'node:net'

function loopMs(): number {
  const start = process.hrtime.bigint()
  let x = 0
  for (let i = 0; i < 3e8; i++) x = (x + i * 7) % 1000003
  if (x < 0) console.log(x)
  return Number(process.hrtime.bigint() - start) / 1e6
}

function allocationNs(): number {
  const n = 3e6
  const start = process.hrtime.bigint()
  let keep: unknown[] = []
  for (let i = 0; i < n; i++) {
    keep.push({ a: i, b: 'x' + i, c: [i, i + 1] })
    if (keep.length > 1000) keep = []
  }
  return Number(process.hrtime.bigint() - start) / n
}

function syscallNs(): number {
  const fd = openSync('/dev/null', 'r')
  const n = 200_000
  const start = process.hrtime.bigint()
  for (let i = 0; i < n; i++) fstatSync(fd)
  const ns = Number(process.hrtime.bigint() - start) / n
  closeSync(fd)
  return ns
}

function pingPongMicros(rounds: number): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer((socket) => socket.on('data', (chunk) => socket.write(chunk)))
    server.listen(0, '127.0.0.1', () => {
      const client = connect((server.address() as AddressInfo).port, '127.0.0.1')
      client.setNoDelay(true)
      const message = Buffer.alloc(100, 120)
      let left = rounds
      let start = 0n
      client.on('data', () => {
        if (--left > 0) return void client.write(message)
        const micros = Number(process.hrtime.bigint() - start) / 1e3 / rounds
        client.destroy()
        server.close()
        resolve(micros)
      })
      client.on('error', reject)
      client.on('connect', () => {
        start = process.hrtime.bigint()
        client.write(message)
      })
    })
  })
}

console.log(`loop ${loopMs().toFixed(0)} ms`)
console.log(`allocation ${allocationNs().toFixed(0)} ns/object`)
console.log(`fstat ${syscallNs().toFixed(0)} ns`)
console.log(`loopback ping-pong ${(await pingPongMicros(20_000)).toFixed(1)} µs/round trip`)
