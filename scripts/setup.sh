#!/usr/bin/env bash
# Installs every Debian package tinyrw needs. Idempotent and non-interactive: packages that are
# already present are skipped, and apt is only called when something is missing.
set -euo pipefail

packages=(
  build-essential cmake ninja-build ccache pkg-config git bsdutils
  clang-format clang-16 libclang-rt-16-dev
  libfmt-dev nlohmann-json3-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  antlr4 libantlr4-runtime-dev
  llvm-15-dev lld-15 rocm-device-libs libamdhip64-dev libz3-dev zlib1g-dev
  libopenmpi-dev openmpi-bin
  dataset-fashion-mnist texlive-latex-base
  python3
  nodejs chromium
)
# npm: Debian ships it apart from nodejs; a nodejs that bundles npm conflicts with that package.
if ! command -v npm > /dev/null 2>&1; then packages+=(npm); fi

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#packages[@]} packages present"
  exit 0
fi

echo "setup: installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
