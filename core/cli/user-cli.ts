/**
 * `tollgate user add|passwd|list`: admin accounts, written straight into the configured store.
 * The password is read from the terminal without echo (asked twice), or from the first line of
 * stdin when stdin is not a terminal; never from an argument, where `ps` and shell history see it.
 *
 * The embedded engine's database is held by a running gateway: stop it first, or use the shared
 * engine (which any number of processes open at once).
 */
import { randomUUID } from 'node:crypto'
import { dirname, resolve } from 'node:path'
import { loadConfig } from '../config/load.ts'
import { formatIssue } from '../config/source.ts'
import { hashPassword } from '../accounts/password.ts'
import { isRole, NEW_ACCOUNT_EMAIL_RULE, newAccountEmail, normaliseEmail, unknownProjects, weakPassword } from '../accounts/user-rules.ts'
import { openStore } from '../store/open.ts'
import { AccountConflict, type Role } from '../store/accounts/types.ts'
import type { Store } from '../store/types.ts'
import { UsageError, type Parsed } from './cli-args.ts'
import { PASSWORD_NOTE, type USER_SPECS } from './command-specs.ts'

/** Reads a line from a TTY without echoing it. */
function promptHidden(question: string): Promise<string> {
  return new Promise((resolvePromise, reject) => {
    const input = process.stdin
    process.stderr.write(question)
    let line = ''
    input.setRawMode(true)
    input.resume()
    input.setEncoding('utf8')
    const onData = (chunk: string) => {
      for (const char of chunk) {
        if (char === '\r' || char === '\n') {
          finish()
          return resolvePromise(line)
        }
        if (char === '\u0003') {
          finish()
          return reject(new Error('cancelled'))
        }
        if (char === '\u007f' || char === '\b') line = line.slice(0, -1)
        else line += char
      }
    }
    const finish = () => {
      input.off('data', onData)
      input.setRawMode(false)
      input.pause()
      process.stderr.write('\n')
    }
    input.on('data', onData)
  })
}

async function readStdinLine(): Promise<string> {
  const chunks: Buffer[] = []
  for await (const chunk of process.stdin) chunks.push(chunk as Buffer)
  return Buffer.concat(chunks).toString('utf8').split(/\r?\n/)[0] ?? ''
}

async function readNewPassword(): Promise<string> {
  if (!process.stdin.isTTY) return readStdinLine()
  const first = await promptHidden('New password: ')
  const second = await promptHidden('Repeat it: ')
  if (first !== second) throw new Error('the two passwords differ')
  return first
}

async function withStore<T>(file: string, work: (store: Store, knownProjects: Set<string>) => Promise<T>): Promise<T> {
  const loaded = await loadConfig(file)
  if (!loaded.config) {
    throw new Error(loaded.issues.map(formatIssue).join('\n'))
  }
  const store = await openStore(loaded.config.store, { dir: loaded.config.dir ?? dirname(resolve(file)) })
  try {
    const settings = await store.settings.read()
    const known = new Set([...loaded.config.projects.map((p) => p.id), ...settings.projects.filter((p) => p.created).map((p) => p.id)])
    return await work(store, known)
  } finally {
    await store.close()
  }
}

/** `tollgate user ...`; returns the exit code. */
export async function userCommand(file: string, sub: keyof typeof USER_SPECS, values: Parsed['values']): Promise<number> {
  if (values.password !== undefined) {
    throw new UsageError(`tollgate user ${sub}: --password is refused: a password in the arguments is seen by ps and kept in the shell history.\n${PASSWORD_NOTE}`)
  }
  const flags = values as { email?: string; role?: string; project?: string[] }
  try {
    if (sub === 'list') {
      return await withStore(file, async (store) => {
        for (const user of await store.accounts.listUsers()) console.log(`${user.email}\t${user.role}\t${user.projects.join(',') || '-'}`)
        return 0
      })
    }
    // A new account needs a plain address; passwd finds an existing one by the sign-in rule.
    const email = sub === 'add' ? newAccountEmail(flags.email) : normaliseEmail(flags.email)
    if (!email) {
      throw new UsageError(`tollgate user ${sub}: --${sub === 'add' ? NEW_ACCOUNT_EMAIL_RULE : 'email must be an email address'}; see tollgate user ${sub} --help`)
    }
    const role = flags.role
    const projects = flags.project ?? []
    if (sub === 'add' && !isRole(role)) throw new UsageError('tollgate user add: --role must be operator or owner; see tollgate user add --help')
    const password = await readNewPassword()
    const weak = weakPassword(password)
    if (weak) {
      console.error(`tollgate user ${sub}: ${weak}; nothing was changed`)
      return 1
    }
    const passwordHash = await hashPassword(password)
    return await withStore(file, async (store, known) => {
      if (sub === 'add') {
        const unknown = unknownProjects(projects, (p) => known.has(p))
        if (unknown.length > 0) {
          console.error(`tollgate user add: no project ${unknown.join(', ')} in ${file} or the store`)
          return 1
        }
        const user = await store.accounts.createUser({ id: randomUUID(), email, role: role as Role, passwordHash, projects })
        console.log(`added ${user.role} ${user.email}${user.projects.length ? ` (projects: ${user.projects.join(', ')})` : ''}`)
        return 0
      }
      const user = await store.accounts.userByEmail(email)
      if (!user || !(await store.accounts.updateUser(user.id, { passwordHash }))) {
        console.error(`tollgate user passwd: no user ${email}`)
        return 1
      }
      console.log(`password of ${email} changed; its sessions are signed out`)
      return 0
    })
  } catch (error) {
    if (error instanceof UsageError) throw error
    if (error instanceof AccountConflict) {
      console.error(`tollgate user add: ${error.message}`)
      return 1
    }
    console.error(`tollgate user: ${(error as Error).message}`)
    return 1
  }
}
