# syntax=docker/dockerfile:1
# The `sieve` image: every role of the cluster (`sieve distributor`, `ingester`,
# `bloom-gateway`, `querier`) and the single process (`sieve all`, the default), on the
# current Node LTS. Built from the repository's root: `docker build -t sieve .`
#
# Two stages: `build` installs the whole workspace (re2 is compiled there for this image's
# Node), compiles TypeScript and deploys @sieve/sieve with its production dependencies only
# (`pnpm deploy --prod`) into /out; the runtime stage is the same base with /out and nothing
# else, run as the unprivileged `node` user.
#
# The base is pinned by version and digest. Its version is also scripts/node-lts.sh's,
# which runs the unit tests on that Node in `npm test`; apps/sieve/src/docker.test.ts
# checks that the two agree, so change them together.
ARG NODE_IMAGE=node:26.10.0-bookworm-slim@sha256:662933cf47f013bc8e4beb31a6116448427a82057ba7c42c97e4c5ba766504c2

FROM ${NODE_IMAGE} AS build
# node-gyp's toolchain: re2 is built from source when its prebuilt binary cannot be fetched.
RUN apt-get update \
  && apt-get install -y --no-install-recommends python3 make g++ \
  && rm -rf /var/lib/apt/lists/*
# The pnpm of package.json's packageManager (Node 25 and later ship no corepack).
ARG PNPM_VERSION=10.34.8
RUN npm install --global "pnpm@${PNPM_VERSION}"
WORKDIR /src
# Every dependency into pnpm's store from the lockfile alone: this layer is rebuilt only when
# the lockfile changes, not on every source change.
COPY pnpm-lock.yaml pnpm-workspace.yaml ./
RUN pnpm fetch
COPY . .
# `deploy --legacy`: pnpm 10 deploys only workspaces that inject their workspace packages
# (copies instead of links, which would change every developer's install); the legacy
# deploy copies @sieve/sieve and the @sieve packages it uses, with their dist/, and
# installs their production dependencies (re2 among them, built above for this Node).
RUN pnpm install --frozen-lockfile --offline \
  && pnpm run build \
  && pnpm --filter @sieve/sieve deploy --legacy --prod /out \
  && chmod 0755 /out/dist/main.js

FROM ${NODE_IMAGE}
ENV NODE_ENV=production
COPY --from=build /out /opt/sieve
# `sieve` on PATH: the command the compose file and the README run.
RUN ln -s /opt/sieve/dist/main.js /usr/local/bin/sieve \
  && mkdir -p /var/lib/sieve \
  && chown node:node /var/lib/sieve
# Local data (`dataDir` defaults to ./data: the write-ahead log and the filesystem store of
# `sieve all`) under the working directory, which the unprivileged user owns.
WORKDIR /var/lib/sieve
USER node
EXPOSE 3100
# /ready answers 200 once every component of the role is up (503 and why before). The port
# is the server's, from the same variables `sieve` reads (3100 unless one is set).
HEALTHCHECK --interval=10s --timeout=3s --start-period=30s --retries=3 \
  CMD ["node", "-e", "const port = process.env.SIEVE_SERVER_PORT || process.env.SIEVE_PORT || 3100; fetch(`http://127.0.0.1:${port}/ready`).then((r) => process.exit(r.ok ? 0 : 1), () => process.exit(1))"]
ENTRYPOINT ["sieve"]
CMD ["all"]
