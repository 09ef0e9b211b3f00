/**
 * The role of the per-request messages the gateway adds (retrieved file excerpts, recalled older turns): `user`.
 *
 * They change on every request, so they go after the history, where they cannot break the prefix a provider caches
 * (context/packer.ts). A `system` message there would not stay there: OpenRouter, like most adapters, hoists every
 * system message into Anthropic's top-level `system` parameter and Google's `systemInstruction`, which come before
 * the whole conversation, so the cached prefix would change on every turn (and Anthropic refuses system messages
 * inside `messages` for most models). A user message stays where it is put for every provider family. Its text says
 * it is quoted data, not instructions, and consecutive user messages are merged by providers that need alternation.
 */
import type { Role } from '../types.js'

export const BLOCK_ROLE: Role = 'user'
