/**
 * The workstation server the process driver runs, one process per project: a browser terminal. `GET /` is an xterm.js page (@xterm/xterm, served from node_modules), `GET /healthz`
 * the driver's health check, and a WebSocket on `pty` joins the browser to a shell. It listens on a
 * unix socket only.
 *
 * With `--ide DIR` it also runs code-server (ide.ts) on a second socket; the terminal stays.
 * Why the terminal is our own and not a packaged one: wetty 3.2.0
 * needs node-pty compiled from source and a socket.io stack, shellinabox (Debian) is not installed
 * and speaks AJAX long-polling rather than WebSocket. The pseudo-terminal comes from util-linux
 * `script` (always present on Debian), so no native module is needed: the shell gets a real TTY
 * (job control, colours, line editing). All URLs are relative, so the page works under the
 * gateway's per-project prefix.
 *
 * The page fits the terminal to the window and follows its resizes; the size reaches the shell's
 * pty (pty-size.ts), so `stty size`, `tput cols` and full-screen programs see the real size.
 * Keystrokes are binary frames, a text frame is a control message (`{"type":"resize",...}`).
 *
 * Run as: `node --import tsx terminal-server.ts --dir DIR --socket PATH` (a unix socket; the gateway
 * proxies to it). It runs inside the workstation's sandbox, as the workstation's uid. SIGTERM closes
 * every shell and exits 0.
 */
import { spawn, type ChildProcess } from 'node:child_process'
import { createServer } from 'node:http'
import { chmodSync, readFileSync, rmSync } from 'node:fs'
import { createRequire } from 'node:module'
import { dirname, join } from 'node:path'
import { parseArgs } from 'node:util'
import { WebSocketServer } from 'ws'
import { DEFAULT_SIZE, PtyResizer, resizeRequest, sizeFromQuery } from './pty-size.ts'
import { IDE_SOCKET_NAME, IdeProcess } from './ide.ts'

const { values } = parseArgs({ options: { dir: { type: 'string' }, socket: { type: 'string' }, project: { type: 'string', default: '' }, ide: { type: 'string' } } })
if (!values.dir || !values.socket) {
  process.stderr.write('usage: terminal-server --dir DIR --socket PATH [--project ID] [--ide INSTALL_DIR]\n')
  process.exit(2)
}
const workDir = values.dir
const socketPath = values.socket
// With --ide, code-server runs next to the terminal (ide.ts) on ide.sock in the same directory,
// and /healthz answers 200 only once it does: the workstation is ready when its IDE is.
const ide = values.ide
  ? new IdeProcess({ dir: values.ide, socket: join(dirname(socketPath), IDE_SOCKET_NAME), home: workDir, log: (message) => process.stderr.write(`${message}\n`) })
  : undefined

const require = createRequire(import.meta.url)
const xtermDir = dirname(dirname(require.resolve('@xterm/xterm')))
const assets: Record<string, { type: string; body: Buffer }> = {
  'xterm.js': { type: 'text/javascript; charset=utf-8', body: readFileSync(join(xtermDir, 'lib', 'xterm.js')) },
  'xterm.css': { type: 'text/css; charset=utf-8', body: readFileSync(join(xtermDir, 'css', 'xterm.css')) },
}

const escapeHtml = (text: string) => text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`)
const page = `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Workstation ${escapeHtml(values.project ?? '')}</title>
<link rel="stylesheet" href="xterm.css"><style>html,body{margin:0;height:100%;overflow:hidden;background:#000}#term{height:100%}</style></head>
<body><div id="term"></div><script src="xterm.js"></script><script>
const box = document.getElementById('term')
const term = new Terminal({ cursorBlink: true, convertEol: false })
term.open(box)
// xterm's scrollbar overlays the right edge; leave it room (the width addon-fit reserves too).
const SCROLLBAR = 14
// The size that fills the box: the cell size is read off the rendered screen (its pixel size over
// its cols and rows), so it follows the font xterm actually uses.
function fit() {
  const screen = box.querySelector('.xterm-screen')
  const rect = screen && screen.getBoundingClientRect()
  if (!rect || !rect.width || !rect.height) return false
  const cols = Math.max(2, Math.min(1000, Math.floor((box.clientWidth - SCROLLBAR) / (rect.width / term.cols))))
  const rows = Math.max(1, Math.min(500, Math.floor(box.clientHeight / (rect.height / term.rows))))
  if (cols !== term.cols || rows !== term.rows) term.resize(cols, rows)
  return true
}
let socket
// Keystrokes go as binary frames; a text frame is a control message, so typed text is never one.
const encoder = new TextEncoder()
const send = (data) => socket && socket.readyState === 1 && socket.send(data)
term.onData((data) => send(encoder.encode(data)))
term.onBinary((data) => send(Uint8Array.from(data, (c) => c.charCodeAt(0) & 255)))
term.onResize(({ cols, rows }) => send(JSON.stringify({ type: 'resize', cols, rows })))
function connect() {
  fit()
  const url = new URL('pty', location.href); url.protocol = location.protocol === 'https:' ? 'wss:' : 'ws:'
  url.search = new URLSearchParams({ cols: term.cols, rows: term.rows }).toString()
  socket = new WebSocket(url)
  socket.binaryType = 'arraybuffer'
  // A refit while the socket was still connecting could not be sent: send the size once open.
  socket.onopen = () => send(JSON.stringify({ type: 'resize', cols: term.cols, rows: term.rows }))
  socket.onmessage = (event) => term.write(typeof event.data === 'string' ? event.data : new Uint8Array(event.data))
  socket.onclose = () => term.write('\\r\\n[session closed]\\r\\n')
  window.workstationSocket = socket
}
// Measure after the first frame is laid out, then start the shell at that size.
requestAnimationFrame(connect)
let timer
const refit = () => { clearTimeout(timer); timer = setTimeout(fit, 100) }
window.addEventListener('resize', refit)
if (window.ResizeObserver) new ResizeObserver(refit).observe(box)
</script></body></html>`

const shells = new Set<ChildProcess>()
let ideSeenUp = false

const server = createServer((req, res) => {
  const path = new URL(req.url ?? '/', 'http://x').pathname
  const name = path.slice(path.lastIndexOf('/') + 1)
  if (path === '/healthz') {
    if (!ide) return void res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ status: 'ok', dir: workDir }))
    // Once the IDE has answered, the workstation stays healthy while code-server restarts (a
    // gateway restart must not take a briefly restarting IDE for a dead workstation).
    return void ide.healthy().then((up) => {
      ideSeenUp ||= up
      res.writeHead(ideSeenUp ? 200 : 503, { 'content-type': 'application/json' }).end(JSON.stringify({ status: ideSeenUp ? 'ok' : 'starting', dir: workDir, ide: up }))
    })
  }
  if (path === '/' || path === '') return void res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' }).end(page)
  const asset = assets[name]
  if (asset) return void res.writeHead(200, { 'content-type': asset.type, 'cache-control': 'max-age=3600' }).end(asset.body)
  res.writeHead(404, { 'content-type': 'application/json' }).end(JSON.stringify({ error: { code: 'not_found', message: `no ${path}` } }))
})

const sockets = new WebSocketServer({ server, path: '/pty', maxPayload: 1 << 20 })
sockets.on('connection', (socket, req) => {
  const size = sizeFromQuery(new URL(req.url ?? '/', 'http://x').searchParams) ?? DEFAULT_SIZE
  // `-E always`: keep ECHO on the inner terminal although script's stdin is a pipe, so what the
  // user types is shown (readline echoes through it); with the default (auto) typing is invisible.
  // script gives its pty no size (its stdin is no terminal), so the shell starts with one set here;
  // the numbers are validated integers, safe in the command line.
  const shell = spawn('script', ['-q', '-f', '-E', 'always', '-c', `stty cols ${size.cols} rows ${size.rows}; exec bash -i`, '/dev/null'], {
    cwd: workDir,
    // The sandbox's environment is already only the allow-list (sandbox.ts): the shell inherits it.
    env: { ...process.env, HOME: workDir, TERM: 'xterm-256color', SHELL: '/bin/bash' },
    stdio: ['pipe', 'pipe', 'pipe'],
  })
  shells.add(shell)
  const resizer = shell.pid === undefined ? undefined : new PtyResizer(shell.pid, (message) => process.stderr.write(`resize: ${message}\n`))
  shell.stdout.on('data', (chunk: Buffer) => socket.send(chunk))
  shell.stderr.on('data', (chunk: Buffer) => socket.send(chunk))
  shell.stdin.on('error', () => {})
  shell.on('error', () => {})
  shell.on('exit', () => {
    shells.delete(shell)
    resizer?.close()
    socket.close()
  })
  // Binary frames are keystrokes; text frames are control messages, and one that is not a valid
  // resize is ignored.
  socket.on('message', (data, isBinary) => {
    if (isBinary) return void shell.stdin.write(data as Buffer)
    const wanted = resizeRequest(String(data))
    if (wanted) resizer?.resize(wanted)
  })
  socket.on('close', () => {
    resizer?.close()
    shell.kill('SIGHUP')
  })
})

// A unix socket, never a TCP port: only who may open its directory (the workstation's uid and the
// gateway's group, see workspace.ts) can connect, and no other local process, SSRF or browser page.
rmSync(socketPath, { force: true })
server.listen(socketPath, () => chmodSync(socketPath, 0o660))

function shutdown(): void {
  ide?.close()
  for (const shell of shells) shell.kill('SIGHUP')
  sockets.close()
  server.close(() => process.exit(0))
  server.closeAllConnections()
  setTimeout(() => process.exit(0), 1000).unref()
}
process.on('SIGTERM', shutdown)
process.on('SIGINT', shutdown)
