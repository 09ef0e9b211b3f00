/**
 * `recallgate ingest <path…>`: upload files to a running gateway's knowledge base (POST /api/v1/files, multipart),
 * recursing into folders, a few uploads in flight, with a progress bar on a terminal and a summary at the end.
 *
 * Files are streamed from disk (`fs.openAsBlob`), so memory stays flat whatever their size. A 429 is waited out
 * (Retry-After) and retried, because a free-plan key allows 10 uploads a minute; an unreachable gateway or a rejected
 * key stops the run at once instead of failing every remaining file the same way.
 */
import { openAsBlob } from 'node:fs';
import { readdir, realpath, stat } from 'node:fs/promises';
import { basename, extname, join } from 'node:path';
import { Agent, fetch, FormData } from 'undici';
import { gatewayUrl, intFlag, parseArgs, reportUsage, serviceKey, UsageError } from './args.js';
export const help = `Usage: recallgate ingest <path…> [--url URL] [--key KEY] [--concurrency N]

Upload files to a running gateway's knowledge base (POST /api/v1/files), recursing into folders.
Supported: .txt .md .markdown .html .htm .json .csv .pdf. Other files are skipped, and so are hidden
entries (.git, .env) inside folders. Each upload carries metadata {"path": "<folder>/<relative path>"}.

Options:
  --url URL          gateway base URL (env RECALLGATE_URL; default http://127.0.0.1:8080)
  --key KEY          service key (env RECALLGATE_KEY; prefer the variable, flags show up in ps)
  --concurrency N    uploads in flight, 1-32 (default 4)
  -h, --help         show this help

Exit status: 0 all files uploaded; 1 a file failed, or nothing to upload; 2 usage error.
`;
export const MIME_TYPES = {
    '.txt': 'text/plain',
    '.md': 'text/markdown',
    '.markdown': 'text/markdown',
    '.html': 'text/html',
    '.htm': 'text/html',
    '.json': 'application/json',
    '.csv': 'text/csv',
    '.pdf': 'application/pdf',
};
const MAX_RETRIES = 5;
const MAX_RETRY_WAIT = 60_000;
/** Responses are small JSON records; anything longer is cut, not buffered. */
const MAX_RESPONSE_BYTES = 64 * 1024;
/** Large PDFs are extracted, chunked and embedded before the gateway answers. */
const UPLOAD_HEADERS_TIMEOUT = 10 * 60_000;
/** Network errors after which no other upload can succeed either. */
const FATAL_NETWORK_CODES = new Set(['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'EHOSTUNREACH', 'UND_ERR_CONNECT_TIMEOUT']);
export async function run(argv, io) {
    let url, key, concurrency, paths;
    try {
        const args = parseArgs(argv, { url: { type: 'string' }, key: { type: 'string' }, concurrency: { type: 'string' } });
        if (args.help) {
            io.stdout.write(help);
            return 0;
        }
        if (args.positionals.length === 0)
            throw new UsageError('give at least one file or folder to upload');
        url = gatewayUrl(args.flags.url, io.env);
        key = serviceKey(args.flags.key, io.env);
        concurrency = intFlag('concurrency', args.flags.concurrency, { min: 1, max: 32, fallback: 4 });
        paths = args.positionals;
    }
    catch (err) {
        if (err instanceof UsageError)
            return reportUsage(io, err, help);
        throw err;
    }
    const now = io.now ?? (() => performance.now());
    const started = now();
    const found = await collect(paths);
    const progress = createProgress(io.stdout, found.files.length);
    for (const s of found.skipped)
        progress.note(`skip  ${s}  unsupported extension`);
    for (const f of found.unreadable)
        progress.note(`FAIL  ${f.file.display}  ${f.reason}`);
    if (found.files.length === 0 && found.unreadable.length === 0) {
        io.stderr.write(`No supported files found in ${paths.join(', ')} (${Object.keys(MIME_TYPES).join(' ')}).\n`);
        return 1;
    }
    const endpoint = `${url}/api/v1/files`;
    const agent = new Agent({ connections: concurrency, headersTimeout: UPLOAD_HEADERS_TIMEOUT });
    const sleep = io.sleep ?? ((ms) => new Promise((resolve) => setTimeout(resolve, ms)));
    const outcomes = [];
    let next = 0;
    let stopped;
    const worker = async () => {
        while (stopped === undefined && next < found.files.length) {
            const file = found.files[next++];
            const onWait = (s) => progress.note(`wait  ${file.display}  rate limited, retrying in ${s} s`);
            const outcome = await upload(file, { endpoint, key, agent, sleep, onWait });
            outcomes.push(outcome);
            if (!outcome.ok && outcome.fatal === true && stopped === undefined)
                stopped = outcome.reason;
            progress.done(outcome);
        }
    };
    try {
        await Promise.all(Array.from({ length: Math.min(concurrency, found.files.length) }, worker));
    }
    finally {
        await agent.close();
    }
    progress.finish();
    const ok = outcomes.filter((o) => o.ok);
    const failed = [...found.unreadable, ...outcomes.filter((o) => !o.ok)];
    const notAttempted = found.files.length - outcomes.length;
    const bytes = ok.reduce((n, o) => n + o.bytes, 0);
    const chunks = ok.reduce((n, o) => n + o.chunks, 0);
    const seconds = ((now() - started) / 1000).toFixed(1);
    const totals = `${formatBytes(bytes)}, ${chunks} ${plural(chunks, 'chunk')}`;
    let summary = `Uploaded ${ok.length} ${plural(ok.length, 'file')} (${totals}) in ${seconds} s`;
    summary += `; ${failed.length} failed; ${found.skipped.length} skipped.\n`;
    if (stopped !== undefined)
        summary += `Stopped early: ${stopped}; ${notAttempted} ${plural(notAttempted, 'file')} not attempted.\n`;
    if (failed.length > 0)
        summary += `Failed:\n${failed.map((f) => `  ${f.file.display}: ${f.reason}\n`).join('')}`;
    if (found.skipped.length > 0) {
        const shown = found.skipped.slice(0, 20);
        const more = found.skipped.length - shown.length;
        summary += `Skipped (unsupported extension):\n${shown.map((s) => `  ${s}\n`).join('')}`;
        if (more > 0)
            summary += `  … and ${more} more\n`;
    }
    io.stdout.write(summary);
    return failed.length > 0 || notAttempted > 0 ? 1 : 0;
}
async function upload(file, o) {
    const type = MIME_TYPES[extname(file.path).toLowerCase()] ?? 'application/octet-stream';
    for (let attempt = 0;; attempt++) {
        const form = new FormData();
        // metadata first: a gateway that streams the upload sees it before the file part.
        form.append('metadata', JSON.stringify({ path: file.display }));
        try {
            form.append('file', await openAsBlob(file.path, { type }), basename(file.path));
        }
        catch (err) {
            // Deleted or made unreadable since the folder was listed: this file fails, the run goes on.
            return { ok: false, file, reason: err.code ?? err.message };
        }
        let res;
        try {
            res = await fetch(o.endpoint, { method: 'POST', headers: { serviceKey: o.key }, body: form, dispatcher: o.agent });
        }
        catch (err) {
            const { code, text } = networkError(err);
            if (code !== undefined && FATAL_NETWORK_CODES.has(code))
                return { ok: false, file, reason: `gateway unreachable at ${new URL(o.endpoint).origin} (${code})`, fatal: true };
            return { ok: false, file, reason: `upload interrupted: ${text}` };
        }
        const text = await readBounded(res);
        if (res.status === 429 && attempt < MAX_RETRIES) {
            const wait = retryAfter(res.headers.get('retry-after'));
            o.onWait(Math.ceil(wait / 1000));
            await o.sleep(wait);
            continue;
        }
        if (res.ok) {
            const body = parseJson(text);
            return {
                ok: true,
                file,
                bytes: typeof body?.bytes === 'number' ? body.bytes : file.size,
                chunks: typeof body?.chunks === 'number' ? body.chunks : 0,
            };
        }
        // A rejected key fails every file the same way: stop rather than repeat it for each.
        return { ok: false, file, reason: errorReason(res.status, text), fatal: res.status === 401 };
    }
}
/** The files to upload, in a stable order (arguments as given, folders sorted by name). */
async function collect(paths) {
    const files = [];
    const skipped = [];
    const unreadable = [];
    const visited = new Set();
    const consider = (path, display, size) => {
        if (extname(path).toLowerCase() in MIME_TYPES)
            files.push({ path, display, size });
        else
            skipped.push(display);
    };
    const walk = async (dir, display) => {
        // A symlink back up the tree would otherwise recurse forever.
        let entries;
        try {
            const real = await realpath(dir);
            if (visited.has(real))
                return;
            visited.add(real);
            entries = await readdir(dir, { withFileTypes: true });
            entries.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
        }
        catch (err) {
            // One unreadable folder (EACCES) fails that folder, not the files already found elsewhere.
            unreadable.push({ ok: false, file: { display }, reason: err.code ?? String(err) });
            return;
        }
        for (const e of entries) {
            if (e.name.startsWith('.'))
                continue;
            const path = join(dir, e.name);
            const shown = `${display}/${e.name}`;
            const s = e.isSymbolicLink() ? await stat(path).catch(() => undefined) : undefined;
            if (e.isDirectory() || s?.isDirectory() === true)
                await walk(path, shown);
            else if (e.isFile() || s?.isFile() === true)
                consider(path, shown, s?.size ?? (await stat(path)).size);
            // Sockets, devices and dangling links are not documents: leave them out without comment.
        }
    };
    for (const p of paths) {
        try {
            const s = await stat(p);
            const display = basename(p.replace(/[/\\]+$/, '')) || p;
            if (s.isDirectory())
                await walk(p, display);
            else
                consider(p, display, s.size);
        }
        catch (err) {
            unreadable.push({ ok: false, file: { display: p }, reason: err.code ?? String(err) });
        }
    }
    return { files, skipped, unreadable };
}
/** The most specific thing known about a failed fetch: the socket error's code, else its cause's message. */
export function networkError(err) {
    // undici's fetch throws TypeError('fetch failed') with the real error (ECONNREFUSED, 'bad port', …) as its cause.
    const cause = err?.cause;
    const code = cause?.code;
    if (typeof code === 'string')
        return { code, text: code };
    if (cause instanceof Error)
        return { code: undefined, text: cause.message };
    return { code: undefined, text: err instanceof Error ? err.message : String(err) };
}
export async function readBounded(res) {
    if (res.body === null)
        return '';
    const parts = [];
    let size = 0;
    for await (const chunk of res.body) {
        parts.push(Buffer.from(chunk));
        size += chunk.byteLength;
        if (size >= MAX_RESPONSE_BYTES) {
            await res.body.cancel();
            break;
        }
    }
    return Buffer.concat(parts).subarray(0, MAX_RESPONSE_BYTES).toString('utf8');
}
function parseJson(text) {
    try {
        return JSON.parse(text);
    }
    catch {
        return undefined; // not JSON: the caller falls back to the status line
    }
}
export function errorReason(status, text) {
    const err = parseJson(text)?.error;
    if (typeof err?.message === 'string')
        return `${status}${typeof err.code === 'string' ? ` ${err.code}` : ''}: ${err.message}`;
    const snippet = text.trim().slice(0, 200);
    return snippet === '' ? `HTTP ${status}` : `HTTP ${status}: ${snippet}`;
}
/** Retry-After in seconds or as an HTTP date; a missing or odd value waits one second. Capped at a minute. */
export function retryAfter(header, nowMs = Date.now()) {
    if (header === null)
        return 1000;
    const wait = /^\d+$/.test(header.trim()) ? Number(header) * 1000 : Date.parse(header) - nowMs;
    return Number.isFinite(wait) ? Math.min(MAX_RETRY_WAIT, Math.max(1000, wait)) : 1000;
}
const plural = (n, word) => (n === 1 ? word : `${word}s`);
export function formatBytes(n) {
    if (n < 1024)
        return `${n} B`;
    if (n < 1024 * 1024)
        return `${(n / 1024).toFixed(1)} KiB`;
    if (n < 1024 ** 3)
        return `${(n / 1024 ** 2).toFixed(1)} MiB`;
    return `${(n / 1024 ** 3).toFixed(2)} GiB`;
}
/** A redrawn bar when stdout is a terminal; otherwise one plain line per file, for logs and pipes. */
function createProgress(out, total) {
    const tty = out;
    let count = 0;
    let bytes = 0;
    const line = (o) => o.ok
        ? `ok    ${o.file.display}  (${formatBytes(o.bytes)}, ${o.chunks} ${plural(o.chunks, 'chunk')})`
        : `FAIL  ${o.file.display}  ${o.reason}`;
    if (tty.isTTY !== true) {
        return { note: (l) => out.write(`${l}\n`), done: (o) => out.write(`${line(o)}\n`), finish: () => { } };
    }
    const CLEAR = '\r\x1b[2K';
    let last = '';
    const draw = () => {
        const columns = Math.max(40, tty.columns ?? 80);
        const width = Math.min(30, columns - 30);
        const filled = total === 0 ? width : Math.round((count / total) * width);
        const head = `[${'█'.repeat(filled)}${'░'.repeat(width - filled)}] ${count}/${total}  ${formatBytes(bytes)}  `;
        out.write(`${CLEAR}${head}${last.slice(-(columns - head.length - 1))}`);
    };
    draw();
    return {
        note(l) {
            out.write(`${CLEAR}${l}\n`);
            draw();
        },
        done(o) {
            count++;
            if (o.ok)
                bytes += o.bytes;
            else
                out.write(`${CLEAR}${line(o)}\n`);
            last = o.file.display;
            draw();
        },
        finish: () => out.write(CLEAR),
    };
}
//# sourceMappingURL=ingest.js.map