#!/bin/sh
# Prints the Debian version of the checked-out commit, from git: a tag
# vX.Y.Z gives X.Y.Z, N commits after it X.Y.Z+gitN.<hash>; with no tag,
# 0~git<commit date>.<hash>. Local changes add +dirty. The same commit
# always gives the same version.
set -eu
cd "$(dirname "$0")/../.."
hash=$(git rev-parse --short=12 HEAD)
if desc=$(git describe --tags --long --match 'v[0-9]*' 2>/dev/null); then
	n=${desc%-g*}; n=${n##*-}; tag=${desc%-*-g*}; tag=${tag#v}
	v=$tag
	[ "$n" = 0 ] || v="$tag+git$n.$hash"
else
	v="0~git$(TZ=UTC git log -1 --date=format-local:%Y%m%d%H%M%S --format=%cd).$hash"
fi
[ -z "$(git status --porcelain --untracked-files=no)" ] || v="$v+dirty"
echo "$v"
