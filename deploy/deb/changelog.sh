#!/bin/sh
# Prints the package's changelog (Debian format) for VERSION: one entry
# naming the commit, dated by SOURCE_DATE_EPOCH. The history is git log.
set -eu
cd "$(dirname "$0")/../.."
date=$(date -u -R -d "@${SOURCE_DATE_EPOCH:?}")
cat <<END
gpu-telemetry ($1) unstable; urgency=medium

  * Built from commit $(git rev-parse --short=12 HEAD); the project's
    history is its git log.

 -- gpu-telemetry maintainers <maintainers@gpu-telemetry.invalid>  $date
END
