#!/usr/bin/env bash
# Runs every test of ringlog on a fresh Debian 12 machine: installs what the tests need
# (Debian packages), then builds and runs the whole workspace's tests,
# which include the fuzz regression corpora and the deterministic simulator's seeds.
set -euo pipefail
cd "$(dirname "$0")/.."

need_apt=()
# command:package pairs the tests run (tests/clients.rs drives kcat; tests/tshark.rs decodes a
# captured quorum run with tshark; tests/netns_partitions.rs puts nodes in network namespaces
# with iproute2's ip).
for tool in kcat:kcat tshark:tshark ip:iproute2; do
  command -v "${tool%%:*}" >/dev/null 2>&1 || need_apt+=("${tool##*:}")
done
# tests/disk_errors.rs builds a FUSE filesystem (tests/disk_errors/eiofs.c) with gcc against
# libfuse3 (its headers, pkg-config to find them; fuse3 its mount helper fusermount3).
for tool in gcc:gcc pkg-config:pkg-config fusermount3:fuse3; do
  command -v "${tool%%:*}" >/dev/null 2>&1 || need_apt+=("${tool##*:}")
done
[ -f /usr/include/fuse3/fuse.h ] || need_apt+=(libfuse3-dev)
# pip for the Python clients below (Debian's python3 comes without it).
python3 -m pip --version >/dev/null 2>&1 || need_apt+=(python3-pip)
if [ ${#need_apt[@]} -gt 0 ]; then
  export DEBIAN_FRONTEND=noninteractive
  echo "test-all: installing ${need_apt[*]}"
  apt-get update -qq
  # tshark asks whether non-root users may capture; answer no without a prompt.
  echo "wireshark-common wireshark-common/install-setuid boolean false" | debconf-set-selections
  apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi

# The Python Kafka clients of tests/clients/ (pinned; --user, so a second run only checks), and
# lz4 for kafka-python's lz4 compression (tests/clients/compressed_produce.py).
PYTHON_CLIENTS=(confluent-kafka==2.16.1 kafka-python==3.0.12 lz4==4.4.5)
if ! python3 -c 'import confluent_kafka, kafka, lz4, sys
sys.exit(0 if (confluent_kafka.__version__, kafka.__version__, lz4.__version__) == ("2.16.1", "3.0.12", "4.4.5") else 1)' 2>/dev/null; then
  echo "test-all: installing ${PYTHON_CLIENTS[*]}"
  # Debian 12's own python3 refuses --user installs (PEP 668, "externally managed"): the
  # pinned clients go to the user's site-packages all the same, which nothing of Debian's uses.
  python3 -m pip install --quiet --user "${PYTHON_CLIENTS[@]}" 2>/dev/null \
    || python3 -m pip install --quiet --user --break-system-packages "${PYTHON_CLIENTS[@]}"
fi

# Run as root: tests/disk_full.rs mounts a 64 MiB tmpfs for a node's data folder (mount(8)),
# tests/disk_errors.rs mounts a FUSE filesystem (/dev/fuse) over one, and
# tests/netns_partitions.rs creates network namespaces.
# Optimised code with every assertion on: the simulator runs thousands of seeds.
cargo test --workspace --profile ci --no-fail-fast "$@"
