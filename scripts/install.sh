#!/usr/bin/env bash
# Installs what wbsim needs on a fresh Debian machine, then (unless --deps) builds
# and installs the `wbsim` binary into ~/.cargo/bin.
#   scripts/install.sh          dependencies + wbsim
#   scripts/install.sh --deps   dependencies only (used by scripts/test.sh)
# Idempotent: a second run only checks.
set -euo pipefail
cd "$(dirname "$0")/.."

deps_only=0
[ "${1:-}" = "--deps" ] && deps_only=1

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi

# Debian packages: a C toolchain for crates with build scripts; python3-venv for the
# peers benchmark (SimPy); xfsprogs, btrfs-progs, e2fsprogs, util-linux (losetup,
# mount) and psmisc for the live-kernel probe; chromium for the report's browser test;
# fio and python3-six (its fio_jsonplus_clat2csv imports six) for the fio-output tests
# and live comparisons.
APT_PKGS="build-essential pkg-config ca-certificates curl git python3 python3-venv python3-pip \
xfsprogs btrfs-progs e2fsprogs util-linux mount psmisc procps chromium fio python3-six"
missing=""
for p in $APT_PKGS; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
if [ -n "$missing" ]; then
  echo "install.sh: installing Debian packages:$missing"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -q
  # shellcheck disable=SC2086
  $SUDO apt-get install -y -q --no-install-recommends $missing
fi

# Rust: use rustup's toolchain when present; otherwise Debian's cargo.
export PATH="$HOME/.cargo/bin:$PATH"
if ! command -v cargo >/dev/null 2>&1; then
  echo "install.sh: no cargo found; installing Debian's rustc and cargo"
  $SUDO apt-get install -y -q --no-install-recommends rustc cargo
fi
if command -v rustup >/dev/null 2>&1; then
  rustup component list --installed 2>/dev/null | grep -q '^rustfmt' || rustup component add rustfmt
  rustup component list --installed 2>/dev/null | grep -q '^clippy' || rustup component add clippy
fi
cargo --version

if [ "$deps_only" -eq 0 ]; then
  cargo install --locked --path crates/wbsim --root "$HOME/.cargo" --force
  echo "install.sh: wbsim installed in $HOME/.cargo/bin (add it to PATH if needed)"
fi
