export const DEFAULT_RRF_K = 60;
/** Fuse best-first rankings into one, best first, with fused scores. Ties keep first-seen order. */
export function reciprocalRankFusion(rankings, opts = {}) {
    const k = opts.k ?? DEFAULT_RRF_K;
    if (!(k >= 0))
        throw new RangeError('reciprocalRankFusion: k must be ≥ 0');
    const fused = new Map();
    rankings.forEach((ranking, r) => {
        const w = opts.weights?.[r] ?? 1;
        ranking.forEach((hit, i) => {
            fused.set(hit.label, (fused.get(hit.label) ?? 0) + w / (k + i + 1));
        });
    });
    const out = [];
    for (const [label, score] of fused)
        out.push({ label, score });
    // Array.prototype.sort is stable, so equal scores stay in first-seen order.
    return out.sort((a, b) => b.score - a.score);
}
//# sourceMappingURL=fusion.js.map