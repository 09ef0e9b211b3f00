# syntax=docker/dockerfile:1
# recallgate: build with `docker build -t recallgate .`; run as in docs/operations.md ("Running as a sidecar").

# ---- build: compile native addons (hnswlib-node has no prebuilt binary) and the TypeScript ----------------------
FROM node:20-bookworm-slim AS build
RUN apt-get update \
 && apt-get install -y --no-install-recommends python3 make g++ \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /app

# Dependencies first, in their own layer, so a source change does not reinstall them. --ignore-scripts because the
# root package's `prepare` script builds the sources, which are not copied yet; `npm rebuild` then runs the
# dependencies' own install scripts (node-gyp for hnswlib-node, prebuilt-binary lookup for lmdb/msgpackr-extract)
# and never the root's `prepare`.
COPY package.json package-lock.json ./
RUN --mount=type=cache,target=/root/.npm \
    npm ci --ignore-scripts --no-audit --no-fund \
 && npm rebuild

COPY tsconfig.json tsconfig.build.json ./
COPY src ./src
COPY bench ./bench
RUN npm run build \
 && npm prune --omit=dev --ignore-scripts --no-audit --no-fund

# ---- runtime: the compiled output and production dependencies only, as the unprivileged `node` user -------------
FROM node:20-bookworm-slim
ENV NODE_ENV=production \
    HOST=0.0.0.0 \
    PORT=8080 \
    DATA_DIR=/data
WORKDIR /app

# package.json is needed at runtime: its "type": "module" makes node load dist/**/*.js as ES modules.
COPY --from=build /app/package.json ./
COPY --from=build /app/node_modules ./node_modules
COPY --from=build /app/dist ./dist
# The volume's mount point must belong to `node` before VOLUME, or a fresh named volume is created root-owned.
RUN mkdir -p /data && chown node:node /data

USER node
VOLUME /data
EXPOSE 8080

# The slim image has no curl or wget; node's built-in fetch does the probe. It follows PORT if that is overridden.
HEALTHCHECK --interval=30s --timeout=5s --start-period=15s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:'+(process.env.PORT||8080)+'/healthz',{signal:AbortSignal.timeout(4000)}).then(r=>process.exit(r.ok?0:1),()=>process.exit(1))"]

# Exec form: node is PID 1 and receives SIGTERM directly, which starts the graceful shutdown (drain, flush, exit 0).
CMD ["node", "dist/src/cli.js", "serve"]
