#!/usr/bin/env bash
# Runs every test of ringlog on a fresh Debian 12 machine: installs what the tests need
# (Debian packages), then builds and runs the whole workspace's tests,
# which include the fuzz regression corpora and the deterministic simulator's seeds.
set -euo pipefail
cd "$(dirname "$0")/.."

need_apt=()
# command:package pairs the tests run. None of the current tests needs an outside tool; the
# Kafka-client tests (kcat, tshark, confluent-kafka, kafka-python) add theirs here when they land.
for tool in; do
  command -v "${tool%%:*}" >/dev/null 2>&1 || need_apt+=("${tool##*:}")
done
if [ ${#need_apt[@]} -gt 0 ]; then
  export DEBIAN_FRONTEND=noninteractive
  echo "test-all: installing ${need_apt[*]}"
  apt-get update -qq
  # tshark asks whether non-root users may capture; answer no without a prompt.
  echo "wireshark-common wireshark-common/install-setuid boolean false" | debconf-set-selections
  apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi

# Optimised code with every assertion on: the simulator runs thousands of seeds.
cargo test --workspace --profile ci --no-fail-fast "$@"
