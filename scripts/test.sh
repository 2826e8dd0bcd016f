#!/usr/bin/env bash
# The test command: dependencies, format check, clippy with warnings denied, all tests.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install.sh --deps
export PATH="$HOME/.cargo/bin:$PATH"
cargo fmt --all -- --check
cargo clippy --workspace --all-targets --locked -- -D warnings
cargo test --workspace --locked
