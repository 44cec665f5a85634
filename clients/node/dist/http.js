/**
 * Keep-alive HTTP/1.1 to one server over node:http / node:https, with an
 * Agent per client (Node.js 18's fetch cannot be given one without a
 * dependency).
 *
 * @module
 */
import * as http from 'node:http';
import * as https from 'node:https';
import { readFileSync } from 'node:fs';
import { CanceledError, ProtocolError, TimeoutError, UnreachableError } from './errors.js';
const USER_AGENT = 'fencelock-node/0.1.0';
export class Transport {
    base;
    timeoutMs;
    https;
    host;
    port;
    agent;
    headers;
    constructor(url, o = {}) {
        if (typeof url !== 'string')
            throw new TypeError('url must be a string');
        let u;
        try {
            u = new URL(url);
        }
        catch {
            throw new TypeError(`url must be http://HOST[:PORT] or https://HOST[:PORT], not ${JSON.stringify(url)}`);
        }
        if ((u.protocol !== 'http:' && u.protocol !== 'https:') || !u.hostname) {
            throw new TypeError(`url must be http://HOST[:PORT] or https://HOST[:PORT], not ${JSON.stringify(url)}`);
        }
        if ((u.pathname !== '/' && u.pathname !== '') || u.search || u.hash) {
            throw new TypeError(`url takes no path, query or fragment: ${JSON.stringify(url)}`);
        }
        if (o.token !== undefined && (typeof o.token !== 'string' || o.token === '' || /\s/.test(o.token))) {
            throw new TypeError('token must be a non-empty string without whitespace');
        }
        const timeoutMs = o.timeoutMs ?? 10000;
        if (typeof timeoutMs !== 'number' || !(timeoutMs > 0))
            throw new RangeError('timeoutMs must be a positive number');
        const maxSockets = o.maxSockets ?? 64;
        if (!Number.isInteger(maxSockets) || maxSockets < 1)
            throw new RangeError('maxSockets must be a positive integer');
        this.https = u.protocol === 'https:';
        if (o.ca !== undefined && !this.https)
            throw new TypeError('ca is for an https:// url');
        this.host = u.hostname.replace(/^\[|\]$/g, '');
        this.port = u.port ? Number(u.port) : this.https ? 443 : 80;
        this.base = `${u.protocol}//${u.host}`;
        this.timeoutMs = timeoutMs;
        // fencelockd and storage-guard close a connection idle for 30 s.
        const agentOptions = { keepAlive: true, maxSockets, maxFreeSockets: maxSockets, timeout: 25000 };
        this.agent = this.https
            ? new https.Agent({ ...agentOptions, ...(o.ca !== undefined ? { ca: readFileSync(o.ca) } : {}) })
            : new http.Agent(agentOptions);
        this.headers = { 'User-Agent': USER_AGENT };
        if (o.token)
            this.headers.Authorization = `Bearer ${o.token}`;
    }
    /** Close the pooled connections. */
    close() {
        this.agent.destroy();
    }
    /**
     * One request. Resolves with the status and the parsed JSON (any status);
     * rejects with UnreachableError, TimeoutError, CanceledError or ProtocolError.
     */
    request(method, path, body, headers, opts = {}) {
        const what = opts.what ?? `${method} ${path}`;
        const data = body === undefined ? undefined : Buffer.from(JSON.stringify(body));
        const h = { ...this.headers, ...headers };
        if (data !== undefined) {
            h['Content-Type'] = 'application/json';
            h['Content-Length'] = data.length;
        }
        const timeoutMs = Math.max(1, opts.timeoutMs ?? this.timeoutMs);
        return this.attempt(method, path, data, h, timeoutMs, opts.signal, what, true);
    }
    attempt(method, path, data, h, timeoutMs, signal, what, mayRetry) {
        return new Promise((resolve, reject) => {
            if (signal?.aborted) {
                reject(new CanceledError(`${what}: canceled`, 0, 'canceled', null, { cause: signal.reason }));
                return;
            }
            const mod = this.https ? https : http;
            let settled = false;
            let reused = false;
            const done = (f) => {
                if (settled)
                    return;
                settled = true;
                clearTimeout(timer);
                signal?.removeEventListener('abort', onAbort);
                f();
            };
            const req = mod.request({ host: this.host, port: this.port, method, path, headers: h, agent: this.agent });
            const timer = setTimeout(() => {
                done(() => reject(new TimeoutError(`${what}: no answer from ${this.base} within ${timeoutMs} ms`, 0, 'timeout')));
                req.destroy();
            }, timeoutMs);
            const onAbort = () => {
                done(() => reject(new CanceledError(`${what}: canceled`, 0, 'canceled', null, { cause: signal?.reason })));
                // Closing the connection is what tells the server: it withdraws a waiting acquisition.
                req.destroy();
            };
            signal?.addEventListener('abort', onAbort, { once: true });
            req.on('socket', (s) => {
                reused = s._fencelockUsed === true;
                s._fencelockUsed = true;
            });
            req.on('error', (e) => {
                if (settled)
                    return;
                // A pooled connection the server closed while idle: once more, on a new one.
                if (reused && mayRetry && (e.code === 'ECONNRESET' || e.code === 'EPIPE')) {
                    settled = true;
                    clearTimeout(timer);
                    signal?.removeEventListener('abort', onAbort);
                    this.attempt(method, path, data, h, timeoutMs, signal, what, false).then(resolve, reject);
                    return;
                }
                done(() => reject(new UnreachableError(`${what}: ${this.base}: ${e.message}`, 0, 'unreachable', null, { cause: e })));
            });
            req.on('response', (res) => {
                const chunks = [];
                res.on('data', (c) => chunks.push(c));
                res.on('error', (e) => done(() => reject(new UnreachableError(`${what}: ${e.message}`, 0, 'unreachable'))));
                res.on('end', () => {
                    const raw = Buffer.concat(chunks);
                    const status = res.statusCode ?? 0;
                    let parsed = null;
                    if (raw.length > 0) {
                        const ctype = String(res.headers['content-type'] ?? '');
                        if (ctype.includes('json')) {
                            try {
                                parsed = JSON.parse(raw.toString('utf8'));
                            }
                            catch {
                                done(() => reject(new ProtocolError(`${what}: the answer is not valid JSON`, status, 'protocol')));
                                return;
                            }
                        }
                        else if (status < 400) {
                            done(() => reject(new ProtocolError(`${what}: the answer is ${ctype || 'untyped'}, not JSON`, status, 'protocol')));
                            return;
                        }
                    }
                    done(() => resolve({ status, body: parsed, headers: res.headers }));
                });
            });
            req.end(data);
        });
    }
}
