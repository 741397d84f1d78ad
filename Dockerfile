# toolbridge over Streamable HTTP, with the bundled default fleet (upstreams/).
#
#   docker build -t toolbridge .
#   docker run --rm -p 8765:8765 -e TOOLBRIDGE_AUTH_TOKEN="$(openssl rand -hex 32)" toolbridge
#
# It listens on 0.0.0.0 inside the container, so it refuses to start without a bearer token. Clients
# reach it as http://localhost:8765/mcp; to use another host name, allow it (DNS-rebinding check):
#   docker run ... toolbridge serve --transport http --host 0.0.0.0 --allowed-host mcp.example.com
# To serve your own fleet, mount a config dir (toolsets.yaml + upstreams/) and point at it:
#   docker run ... -v "$PWD/myconf:/config:ro" -e TOOLBRIDGE_HOME=/config toolbridge
FROM python:3.11.11-slim-bookworm

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    NPM_CONFIG_UPDATE_NOTIFIER=false \
    NPM_CONFIG_FUND=false

# nodejs/npm run the npm MCP servers of the fleet; git backs mcp-server-git; tini reaps the
# stdio servers' processes and forwards signals to toolbridge, which shuts down on SIGTERM.
RUN apt-get update \
    && apt-get install -y --no-install-recommends nodejs npm git ca-certificates tini \
    && rm -rf /var/lib/apt/lists/*

RUN useradd --create-home --uid 10001 --user-group --shell /usr/sbin/nologin toolbridge
WORKDIR /app
RUN chown toolbridge:toolbridge /app
USER 10001

# Copy only what the image needs: a host .venv/.fleet/node_modules would hold host paths.
# The README*/toolsets.yaml* globs copy those files when present and do not fail when absent.
COPY --chown=toolbridge:toolbridge pyproject.toml README* package.json package-lock.json ./
COPY --chown=toolbridge:toolbridge scripts/ scripts/
COPY --chown=toolbridge:toolbridge proxy/ proxy/
COPY --chown=toolbridge:toolbridge upstreams/ upstreams/
COPY --chown=toolbridge:toolbridge toolsets.yaml* ./

RUN scripts/setup.sh \
    && npm cache clean --force \
    && rm -rf /home/toolbridge/.cache

ENV TOOLBRIDGE_HOME=/app
EXPOSE 8765

HEALTHCHECK --interval=30s --timeout=5s --start-period=20s --retries=3 \
    CMD [".venv/bin/python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8765/healthz', timeout=4)"]

ENTRYPOINT ["/usr/bin/tini", "--", "/app/.venv/bin/toolbridge"]
CMD ["serve", "--transport", "http", "--host", "0.0.0.0"]
