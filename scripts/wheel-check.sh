#!/usr/bin/env bash
# The README's no-clone install, checked from a built wheel: install it into a fresh virtualenv (no
# checkout on sys.path), `toolbridge init` an empty directory, then check and list it from `/`.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
.venv/bin/pip wheel --quiet --disable-pip-version-check --no-deps --no-build-isolation -w "$work/dist" . \
  2> >(grep -v -e '^warning' -e 'SetuptoolsDeprecationWarning' >&2 || true)
"${PYTHON:-python3}" -m venv "$work/venv"
"$work/venv/bin/pip" install --quiet --disable-pip-version-check "$work"/dist/toolbridge-*.whl
# The example upstream's server: uvx when present, else the one scripts/setup.sh installed.
export PATH="$work/venv/bin:$PATH:$repo/.venv/bin"
cd /
toolbridge init "$work/config" >/dev/null
toolbridge check --config-dir "$work/config"
toolbridge catalog --config-dir "$work/config" --wait 120 --log-level warning | grep -q '^## time__get_current_time$'
echo "wheel check: init, check and catalog work from an installed wheel" >&2
