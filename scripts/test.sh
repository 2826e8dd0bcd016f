#!/usr/bin/env bash
# The test command: dependencies, format check, clippy with warnings denied, all tests,
# then a bounded fuzz run of the input readers.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install.sh --deps
export PATH="$HOME/.cargo/bin:$PATH"
cargo fmt --all -- --check
cargo clippy --workspace --all-targets --locked -- -D warnings
cargo test --workspace --locked
# Fuzz step: the three input readers (scenario, fio, results) mutated from
# fuzz/corpus/ for 20 s each (about a minute in all); see tests/fuzz_inputs.rs.
WBSIM_FUZZ_SECS=20 cargo test -p wbsim --locked --test fuzz_inputs -- --test-threads 3
