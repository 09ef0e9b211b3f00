/**
 * Shared vocabulary. Types carry units so a `Ms` is never passed where `Tokens` are meant (STYLE: types say units).
 * These are plain number/string aliases: cheap at runtime, documentation at compile time.
 */

/** Milliseconds. */
export type Ms = number
/** A count of model tokens. */
export type Tokens = number
/** A count of bytes. */
export type Bytes = number

/** Monotonic-enough clock in milliseconds; injected everywhere time matters so tests advance time instead of sleeping. */
export type Clock = () => Ms

export const systemClock: Clock = () => performance.timeOrigin + performance.now()

export type Role = 'system' | 'user' | 'assistant'

export interface ChatMessage {
  role: Role
  content: string
}

export const PLANS = ['free', 'pro', 'premium', 'enterprise', 'unlimited'] as const
export type Plan = (typeof PLANS)[number]

/** A caller as identified by its service key. `id` is derived from the key's hash and scopes all of its data. */
export interface Tenant {
  id: string
  plan: Plan
}
