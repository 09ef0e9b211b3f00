/**
 * Shared vocabulary. Types carry units so a `Ms` is never passed where `Tokens` are meant (STYLE: types say units).
 * These are plain number/string aliases: cheap at runtime, documentation at compile time.
 */
export const systemClock = () => performance.timeOrigin + performance.now();
export const PLANS = ['free', 'pro', 'premium', 'enterprise', 'unlimited'];
//# sourceMappingURL=types.js.map