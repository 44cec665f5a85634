/**
 * Keep-alive HTTP/1.1 to one server over node:http / node:https, with an
 * Agent per client (Node.js 18's fetch cannot be given one without a
 * dependency).
 *
 * @module
 */
import * as http from 'node:http';
/** Options shared by the lock client and the storage-guard client. */
export interface TransportOptions {
    /** The bearer token (--auth-file). */
    token?: string;
    /** PEM file of the certificate authority an https:// server is checked against (default: Node's). */
    ca?: string;
    /** Milliseconds to wait for an answer, on top of an acquisition's own wait (default 10000). */
    timeoutMs?: number;
    /** Connections kept open (default 64). */
    maxSockets?: number;
}
export interface Answer {
    status: number;
    body: unknown;
    headers: http.IncomingHttpHeaders;
}
export declare class Transport {
    readonly base: string;
    readonly timeoutMs: number;
    private readonly https;
    private readonly host;
    private readonly port;
    private readonly agent;
    private readonly headers;
    constructor(url: string, o?: TransportOptions);
    /** Close the pooled connections. */
    close(): void;
    /**
     * One request. Resolves with the status and the parsed JSON (any status);
     * rejects with UnreachableError, TimeoutError, CanceledError or ProtocolError.
     */
    request(method: string, path: string, body?: unknown, headers?: Record<string, string>, opts?: {
        timeoutMs?: number;
        signal?: AbortSignal;
        what?: string;
    }): Promise<Answer>;
    private attempt;
}
