#!/usr/bin/env bash
# Clean-build time that 20 #[gpu_actor] actors add to a user crate: builds a fixture crate
# (in target/) once with 20 generated actors and once with the same structs and methods but
# no macro, after its dependencies are compiled, and prints both times and the difference.
# Usage: bash benches/macro_build_time.sh   (from the repository root)
set -euo pipefail
root=$(pwd)
dir="$root/target/macro-build-fixture"
rm -rf "$dir" && mkdir -p "$dir/src"
cat > "$dir/Cargo.toml" <<TOML
[package]
name = "macro-build-fixture"
version = "0.0.0"
edition = "2021"
publish = false
[dependencies]
atomr-accel-cuda = { path = "$root" }
[workspace]
TOML
gen() { # $1 = with|without
  echo "#![allow(dead_code, unused)]"
  echo "use atomr_accel_cuda::prelude::*;"
  echo "use atomr_accel_cuda::gpu_actor;"
  for i in $(seq 1 20); do
    echo "pub struct Actor$i { n: u64 }"
    [ "$1" = with ] && echo "#[gpu_actor]"
    cat <<RS
impl Actor$i {
    $( [ "$1" = with ] && echo "#[handler]" ) async fn get(&self) -> u64 { self.n }
    $( [ "$1" = with ] && echo "#[handler(tell)]" ) fn add(&mut self, by: u64) { self.n += by; }
    $( [ "$1" = with ] && echo "#[handler(dtypes(f32, f64, f16, bf16))]" ) fn fill<T: DType>(&mut self, len: usize) -> Result<Vec<T>, GpuError> { Ok(vec![T::from_f64(self.n as f64); len]) }
}
RS
  done
}
build() {
  gen "$1" > "$dir/src/lib.rs"
  touch "$dir/src/lib.rs"
  local t0=$(date +%s.%N)
  cargo build --quiet --manifest-path "$dir/Cargo.toml" --target-dir "$dir/target"
  echo "$(date +%s.%N) - $t0" | bc
}
build without >/dev/null  # compiles the dependencies once
without=$(build without)
with=$(build with)
printf 'RESULT | 20 #[gpu_actor] actors (3 handlers each, one over 4 dtypes) | build %.2f s with the macro, %.2f s without: +%.2f s\n' "$with" "$without" "$(echo "$with - $without" | bc)"
