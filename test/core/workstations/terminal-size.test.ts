/**
 * The workstation terminal's size, against a real terminal server started by the process driver
 * and a real shell under `script`: the shell starts at the size in the socket URL, a resize control
 * message reaches the pty (`stty size`, `tput`, and SIGWINCH to the shell), and bad resize messages
 * (out of range, wrong types, not JSON, a resize typed as keystrokes) change nothing and leave the
 * shell alive.
 */
import t from 'tap'
import WebSocket from 'ws'
import { ProcessDriver } from '../../../core/workstations/process-driver.ts'
import { tempDir } from '../../helpers/temp.ts'
import { killAllUnder, serversUnder, wsUrlOf, getFromTarget } from '../../helpers/terminal-servers.ts'

interface Shell {
  /** Types `command` (a binary frame); resolves with the first match of `pattern` in the output that follows. */
  run(command: string, pattern: RegExp): Promise<RegExpMatchArray>
  /** Sends a text frame (a control message). */
  control(text: string): void
  /** The current `stty size` of the shell, as [rows, cols]. */
  size(): Promise<[number, number]>
  output(): string
  close(): void
}

async function openShell(target: string, query = ''): Promise<Shell> {
  const socket = new WebSocket(wsUrlOf(target, `/pty${query}`))
  let output = ''
  socket.on('message', (data) => (output += String(data)))
  await new Promise((resolve, reject) => { socket.once('open', resolve); socket.once('error', reject) })
  let seq = 0
  const run = async (command: string, pattern: RegExp) => {
    const from = output.length
    socket.send(Buffer.from(`${command}\n`))
    const deadline = Date.now() + 20_000
    for (;;) {
      const match = output.slice(from).match(pattern)
      if (match) return match
      if (Date.now() > deadline) throw new Error(`no ${pattern} after ${JSON.stringify(command)}; output: ${JSON.stringify(output.slice(-500))}`)
      await new Promise((resolve) => setTimeout(resolve, 50))
    }
  }
  return {
    run,
    control: (text) => socket.send(text),
    size: async () => {
      // The echoed command line shows `q1=$(stty`, the output `q1=24 80=`: only the output matches.
      const tag = `q${++seq}`
      const match = await run(`echo ${tag}=$(stty size)=`, new RegExp(`${tag}=(\\d+) (\\d+)=`))
      return [Number(match[1]), Number(match[2])]
    },
    output: () => output,
    close: () => socket.close(),
  }
}

/** Polls the shell until its size is `expected` (a resize is applied asynchronously) or times out. */
async function sizeBecomes(shell: Shell, expected: [number, number]): Promise<[number, number]> {
  let size = await shell.size()
  for (let i = 0; i < 40 && (size[0] !== expected[0] || size[1] !== expected[1]); i++) {
    await new Promise((resolve) => setTimeout(resolve, 100))
    size = await shell.size()
  }
  return size
}

t.test('terminal size: initial size, resize with SIGWINCH, bad messages ignored', async (t) => {
  t.setTimeout(120_000)
  const root = tempDir('tollgate-term-size-')
  const driver = new ProcessDriver({ root, stopGraceMs: 2_000 })
  await driver.provision('p1')
  const handle = await driver.start('p1')
  t.teardown(async () => {
    await driver.stop(handle)
    killAllUnder(root)
  })
  const target = handle.target!

  // No size in the URL: the classic 80×24, not the 0×0 `script` leaves a pipe-fed pty at.
  const plain = await openShell(target)
  t.same(await plain.size(), [24, 80], 'without a size the shell gets 80×24')
  plain.close()

  const garbage = await openShell(target, '?cols=abc&rows=-3')
  t.same(await garbage.size(), [24, 80], 'a nonsense size in the URL is ignored')
  garbage.close()

  const shell = await openShell(target, '?cols=100&rows=30')
  t.teardown(() => shell.close())
  t.same(await shell.size(), [30, 100], 'the shell starts at the size in the URL')

  // A resize: the pty changes and the shell is told (SIGWINCH), as full-screen programs need.
  await shell.run(`trap 'echo winch-$(stty size)-' WINCH; echo trap-set`, /[\r\n]trap-set\r/)
  // Nothing typed meanwhile: bash must be the foreground process group to get the signal itself.
  const from = shell.output().length
  shell.control(JSON.stringify({ type: 'resize', cols: 132, rows: 43 }))
  for (let i = 0; i < 100 && !/winch-/.test(shell.output().slice(from)); i++) await new Promise((resolve) => setTimeout(resolve, 50))
  t.match(shell.output().slice(from), /winch-43 132-/, 'the shell got SIGWINCH with the new size')
  t.same(await sizeBecomes(shell, [43, 132]), [43, 132], 'stty size follows the resize')
  const tput = await shell.run('echo tp=$(tput cols)x$(tput lines)=', /tp=(\d+)x(\d+)=/)
  t.same([tput[1], tput[2]], ['132', '43'], 'tput sees the new size')

  // A burst of resizes ends at the last one.
  for (let cols = 90; cols <= 120; cols += 5) shell.control(JSON.stringify({ type: 'resize', cols, rows: 40 }))
  t.same(await sizeBecomes(shell, [40, 120]), [40, 120], 'the last of a burst wins')

  // Bad control messages: ignored, never a crash, the size unchanged.
  const bad = [
    { type: 'resize', cols: -5, rows: 40 },
    { type: 'resize', cols: 0, rows: 40 },
    { type: 'resize', cols: 1001, rows: 40 },
    { type: 'resize', cols: 100, rows: 501 },
    { type: 'resize', cols: 1e308, rows: 1e308 },
    { type: 'resize', cols: 99.5, rows: 30 },
    { type: 'resize', cols: '100', rows: '30' },
    { type: 'resize', cols: null, rows: 30 },
    { type: 'resize', cols: 100 },
    { type: 'resize', cols: [100], rows: [30] },
    { type: 'RESIZE', cols: 100, rows: 30 },
    { cols: 100, rows: 30 },
    [100, 30],
    null,
    42,
  ]
  for (const message of bad) shell.control(JSON.stringify(message))
  shell.control('not json at all')
  shell.control('{"type":"resize","cols":100,')
  shell.control(`{"type":"resize","cols":100,"rows":30,"pad":"${'x'.repeat(100_000)}"}`)
  shell.control('echo typed-as-text\n')
  await new Promise((resolve) => setTimeout(resolve, 500))
  t.same(await shell.size(), [40, 120], 'no bad message changed the size')
  t.notMatch(shell.output(), /typed-as-text/, 'a text frame is never typed into the shell')

  // A resize typed (or pasted) as keystrokes is text for the shell, not a control message.
  await shell.run(`echo '{"type":"resize","cols":50,"rows":10}' > /dev/null; echo pasted-ok`, /[\r\n]pasted-ok\r/)
  t.same(await shell.size(), [40, 120], 'a resize typed as keystrokes changes nothing')

  const alive = await shell.run('echo alive-$((40+2))', /alive-42/)
  t.ok(alive, 'the shell is still alive')
  t.same(serversUnder(root).length, 1, 'the terminal server still runs')
  const health = await getFromTarget(target, '/healthz')
  t.equal(health.status, 200, 'and answers its health check')
})
