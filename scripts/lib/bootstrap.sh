# Sourced by the scripts in scripts/: makes sure .venv exists and holds this
# project (editable) with the extras asked for, reinstalling only when
# pyproject.toml changed. Needs nothing but Python >= 3.11 with venv and pip.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
VENV="$ROOT/.venv"

find_python() {
    local candidate
    for candidate in "${PYTHON:-}" python3.13 python3.12 python3.11 python3; do
        [ -n "$candidate" ] || continue
        if command -v "$candidate" >/dev/null 2>&1 &&
            "$candidate" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
            echo "$candidate"
            return 0
        fi
    done
    echo "pixie: error: Python 3.11 or newer is needed (set PYTHON=/path/to/python3)" >&2
    return 1
}

ensure_venv() {
    local extras="${1:-}" spec stamp want have
    if [ ! -x "$VENV/bin/python" ]; then
        local py
        py=$(find_python)
        echo "creating $VENV with $py" >&2
        "$py" -m venv "$VENV"
    fi
    spec="$ROOT"
    [ -n "$extras" ] && spec="$ROOT[$extras]"
    # The stamp records what pyproject.toml looked like at the last install and
    # which extras came with it; a test install also satisfies the demo.
    stamp="$VENV/.pixie-installed"
    want=$("$VENV/bin/python" -c 'import hashlib,sys; print(hashlib.sha256(open(sys.argv[1],"rb").read()).hexdigest())' "$ROOT/pyproject.toml")
    have=$(cat "$stamp" 2>/dev/null || true)
    if [ "$have" != "$want $extras" ] && { [ -n "$extras" ] || [ "${have%% *}" != "$want" ]; }; then
        echo "installing pixie ${extras:+with [$extras] }into $VENV ..." >&2
        "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check -e "$spec" >&2
        echo "$want $extras" >"$stamp"
    fi
    export PATH="$VENV/bin:$PATH"
    case ",$extras," in
    *,test,*) ensure_chromium ;;
    esac
}

# The browser tests drive Debian's chromium (Playwright's own browser download
# is not used). Installed with the test extra when apt-get can run (as root,
# or through sudo without a password); silent when it is already there, and
# when it cannot be installed the browser tests skip and say why.
ensure_chromium() {
    [ -x /usr/bin/chromium ] && return 0
    local sudo=()
    if ! command -v apt-get >/dev/null 2>&1; then
        echo "pixie: note: no apt-get here to install chromium; the browser tests will skip" >&2
        return 0
    fi
    if [ "$(id -u)" -ne 0 ]; then
        if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
            sudo=(sudo -n)
        else
            echo "pixie: note: chromium is missing and apt-get needs root; the browser tests will skip" >&2
            return 0
        fi
    fi
    echo "installing Debian's chromium for the browser tests ..." >&2
    if ! { ${sudo[@]+"${sudo[@]}"} apt-get update -qq &&
        ${sudo[@]+"${sudo[@]}"} env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; } >/dev/null 2>&1; then
        echo "pixie: note: apt-get could not install chromium; the browser tests will skip" >&2
    fi
    return 0
}
