#!/usr/bin/env bash
# The GPU tests (`-m "gpu or multigpu"`) in PARTS slices of the test files, so each slice fits
# one device call (at most 10 minutes): slice PART (1..PARTS) takes every PARTS-th file of the
# sorted list (LC_ALL=C, the same on every machine).
#
#   bash benchmarks/gpu_suite.sh 1 3        # the first of three slices
#
# On the device machine, first install the staged wheels (../shared/tools/device-prep) and put
# the shared graphs in place if they travelled as .graphs/ (see benchmarks/README.md).
# LIMIT (seconds, default 560) bounds the slice; TEST_TIMEOUT (default 200) each test.
set -euo pipefail
part=${1:?usage: gpu_suite.sh PART PARTS}
parts=${2:?usage: gpu_suite.sh PART PARTS}
cd "$(dirname "$0")/.."
files=$(LC_ALL=C ls tests/test_*.py tests/graph/test_*.py | LC_ALL=C sort \
        | awk -v p="$part" -v n="$parts" '(NR - 1) % n == p - 1')
echo "slice $part of $parts: $(echo "$files" | wc -l) files"
timeout "${LIMIT:-560}" python3 -m pytest -m "gpu or multigpu" -q -rfs -p no:cacheprovider \
    --timeout "${TEST_TIMEOUT:-200}" $files
