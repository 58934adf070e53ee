/** Tiny `--name value` / `--name=value` reader shared by the bench scripts. */
export function argValue(argv: readonly string[], name: string): string | undefined {
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]
    if (arg === `--${name}`) return argv[i + 1]
    if (arg.startsWith(`--${name}=`)) return arg.slice(name.length + 3)
  }
  return undefined
}

/** True when `--name` is present (as a bare flag). */
export function argFlag(argv: readonly string[], name: string): boolean {
  return argv.includes(`--${name}`)
}
