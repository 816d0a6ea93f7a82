#!/usr/bin/env bash
# One-command set-up for a fresh Debian/Ubuntu machine (run as root): system packages, a virtual
# environment in .venv, and the project with its Python dependencies. Idempotent and fast when
# nothing changed: apt runs only for missing packages, pip only when pyproject.toml changed.
set -euo pipefail
cd "$(dirname "$0")/.."

APT_PACKAGES=(
  zookeeper default-jre-headless   # metadata store of the own broker; Java for Apache Kafka
  default-jdk-headless             # javac: the Java client program (--client java) is compiled here
  maven                            # Apache Kafka releases from Maven Central (clusters/maven.py)
  iproute2 iptables nftables       # network namespaces, partitions, packet loss
  kcat                             # a fourth Kafka client for broker compatibility
  openssh-server                   # ssh backend, tested against sshd in namespaces
  python3-venv sudo                # ssh hosts: the broker's venv, `sudo = true` (tests use this machine as the hosts)
  docker.io debootstrap            # docker backend and its registry-free base image
  chromium                         # headless checks of the HTML report
  fuse3 libfuse2                   # lose-unsynced-writes disk fault
  procps psmisc util-linux         # pgrep, fuser, nsenter
)

missing=()
for pkg in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" != 0 ]; then
    echo "setup: missing system packages (${missing[*]}); run as root" >&2
    exit 2
  fi
  echo "setup: installing system packages: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  echo "setup: creating .venv"
  "$PY" -m venv .venv
fi
# The conversion's native part (native/, Rust: the strict reader of history lines, the pairing) is built by pip through setuptools-rust with
# cargo (rustup's, when it is not on PATH); the stamp covers its sources, so a change rebuilds it.
if ! command -v cargo >/dev/null && [ -x "$HOME/.cargo/bin/cargo" ]; then
  export PATH="$HOME/.cargo/bin:$PATH"
fi
stamp=".venv/.setup-stamp"
want=$(cat pyproject.toml native/Cargo.toml native/Cargo.lock native/src/*.rs | sha256sum | cut -d' ' -f1)
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  # pip's output (and setuptools' deprecation warnings) go to a log; one line when it fails.
  log=".venv/setup.log"
  echo "setup: installing Python packages into .venv (log: $log)"
  if ! { .venv/bin/pip install -q --upgrade pip && .venv/bin/pip install -q -e '.[dev]'; } >"$log" 2>&1; then
    echo "setup: pip install failed (see $log): $(grep -v '^\s*$' "$log" | tail -n 3 | tr '\n' ' ')" >&2
    exit 1
  fi
  echo "$want" > "$stamp"
  if ! .venv/bin/python -c "import checkers._native" 2>/dev/null; then
    echo "setup: the conversion's native part was not built (no cargo?); conversions read and pair with Arrow, about twice the CPU" >&2
  fi
fi
# Shell completion (argcomplete): a script to source, and system-wide for bash when possible.
completion=".venv/strandline-completion.bash"
if [ ! -s "$completion" ]; then
  .venv/bin/register-python-argcomplete strandline > "$completion"
fi
if [ -d /etc/bash_completion.d ] && [ -w /etc/bash_completion.d ] && ! cmp -s "$completion" /etc/bash_completion.d/strandline; then
  cp "$completion" /etc/bash_completion.d/strandline
fi
echo "setup: ready (shell completion: source $completion)"
