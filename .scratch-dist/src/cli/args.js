/**
 * The argv parser every `recallgate` command shares. It is a thin typed wrapper over Node's own `util.parseArgs`
 * (strict: unknown flags and missing values are errors, not silently ignored) that adds `--help`/`-h` to every
 * command and turns parse failures into a `UsageError` the command prints with its help text.
 *
 * Accepted forms: positionals, `--flag value`, `--flag=value`, `-f value`, boolean `--flag`, and `--` to end flags.
 */
import { parseArgs as nodeParseArgs } from 'node:util';
/** A command was called wrongly. Commands print the message and their help to stderr and exit with `USAGE_EXIT`. */
export class UsageError extends Error {
    constructor(message) {
        super(message);
        this.name = 'UsageError';
    }
}
/** Exit code for a wrong invocation (the shell convention: 2 = misuse, 1 = the work itself failed). */
export const USAGE_EXIT = 2;
/** Parse `argv` (the arguments after the command name) against `spec`. Throws `UsageError`. */
export function parseArgs(argv, spec) {
    // --help wins over every other problem, so `recallgate ingest --bogus --help` still shows the help.
    const dashDash = argv.indexOf('--');
    const flagPart = dashDash === -1 ? argv : argv.slice(0, dashDash);
    if (flagPart.includes('--help') || flagPart.includes('-h')) {
        return { positionals: [], flags: emptyFlags(spec), help: true };
    }
    const options = {};
    for (const [name, s] of Object.entries(spec))
        options[name] = s.short === undefined ? { type: s.type } : { ...s };
    let parsed;
    try {
        parsed = nodeParseArgs({ args: [...argv], options, strict: true, allowPositionals: true });
    }
    catch (err) {
        // util.parseArgs errors carry a stable ERR_PARSE_ARGS_* code and a message that already names the option.
        if (isParseArgsError(err))
            throw new UsageError(err.message);
        throw err;
    }
    const flags = emptyFlags(spec);
    for (const [name, value] of Object.entries(parsed.values))
        flags[name] = value;
    return { positionals: parsed.positionals, flags: flags, help: false };
}
function emptyFlags(spec) {
    const flags = {};
    for (const [name, s] of Object.entries(spec))
        flags[name] = s.type === 'boolean' ? false : undefined;
    return flags;
}
function isParseArgsError(err) {
    if (!(err instanceof Error))
        return false;
    const code = err.code;
    return typeof code === 'string' && code.startsWith('ERR_PARSE_ARGS_');
}
/** A whole number flag within [min, max]; `fallback` when the flag is absent. */
export function intFlag(name, raw, o) {
    if (raw === undefined)
        return o.fallback;
    if (!/^\d+$/.test(raw))
        throw new UsageError(`--${name} must be a whole number, got "${raw}"`);
    const n = Number(raw);
    if (n < o.min || n > o.max)
        throw new UsageError(`--${name} must be between ${o.min} and ${o.max}, got ${n}`);
    return n;
}
/**
 * The gateway a client command talks to: `--url`, else `RECALLGATE_URL`, else the local default. Only http(s);
 * a trailing slash is dropped so paths can be appended.
 */
export function gatewayUrl(flag, env) {
    const raw = flag ?? (env.RECALLGATE_URL || undefined) ?? DEFAULT_GATEWAY_URL;
    let u;
    try {
        u = new URL(raw);
    }
    catch {
        throw new UsageError(`--url must be an http(s) URL, got "${raw}"`);
    }
    if (u.protocol !== 'http:' && u.protocol !== 'https:')
        throw new UsageError(`--url must be an http(s) URL, got "${raw}"`);
    return raw.replace(/\/+$/, '');
}
export const DEFAULT_GATEWAY_URL = 'http://127.0.0.1:8080';
/** The service key: `--key`, else `RECALLGATE_KEY`. Required by every command that calls `/api/v1`. */
export function serviceKey(flag, env) {
    const key = flag ?? (env.RECALLGATE_KEY || undefined);
    if (key === undefined || key === '')
        throw new UsageError('a service key is required: set RECALLGATE_KEY or pass --key');
    return key;
}
/** Print a usage error the same way in every command: the problem, then the help. */
export function reportUsage(io, err, help) {
    io.stderr.write(`error: ${err.message}\n\n${help}`);
    return USAGE_EXIT;
}
//# sourceMappingURL=args.js.map