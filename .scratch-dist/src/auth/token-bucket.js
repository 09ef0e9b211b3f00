export class TokenBucket {
    capacity;
    #perMs;
    #tokens;
    #updated;
    constructor(opts) {
        this.capacity = opts.capacity;
        this.#perMs = opts.perMinute / 60_000;
        this.#tokens = opts.capacity;
        this.#updated = opts.now;
    }
    take(now) {
        // A clock that steps backwards (NTP) must not drain or overfill the bucket.
        const elapsed = Math.max(0, now - this.#updated);
        this.#tokens = Math.min(this.capacity, this.#tokens + elapsed * this.#perMs);
        this.#updated = Math.max(this.#updated, now);
        const allowed = this.#tokens >= 1;
        if (allowed)
            this.#tokens -= 1;
        return {
            allowed,
            remaining: Math.floor(this.#tokens),
            resetMs: (this.capacity - this.#tokens) / this.#perMs,
            retryAfterMs: allowed ? 0 : (1 - this.#tokens) / this.#perMs,
        };
    }
}
//# sourceMappingURL=token-bucket.js.map