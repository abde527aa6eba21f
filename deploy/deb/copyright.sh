#!/bin/sh
# Prints the package's copyright file for BINARY: the project's notice, then
# every Go module linked into the binary (go version -m) with the license
# text shipped in that module.
set -eu
bin=$1
cd "$(dirname "$0")/../.."
cat <<'END'
gpu-telemetry

Copyright: the gpu-telemetry authors.
License: none published yet for the project's own code (ask its
 maintainers).

The binary /usr/bin/gpu-telemetry links these Go modules, each under its own
license, reproduced below.
END
printf '\n%s\n' "------------------------------------------------------------------------"
printf 'The Go standard library and runtime, %s\n\n' "$(go version -m "$bin" | head -1 | cut -d' ' -f2)"
sed -e 's/[[:space:]]*$//' "$(go env GOROOT)/LICENSE"
mods=$(go version -m "$bin" | awk '$1 == "dep" { print $2 }' | sort)
# One go list for every module: the directory of the version the build used.
# shellcheck disable=SC2086
go list -m -f '{{.Path}} {{.Version}} {{.Dir}}' $mods | while read -r mod ver dir; do
	lic=""
	for f in LICENSE LICENSE.txt LICENSE.md LICENCE COPYING; do
		if [ -n "$dir" ] && [ -f "$dir/$f" ]; then lic="$dir/$f"; break; fi
	done
	printf '\n%s\n' "------------------------------------------------------------------------"
	printf '%s %s\n\n' "$mod" "$ver"
	if [ -n "$lic" ] && grep -q 'Apache License' "$lic" && grep -q 'Version 2.0' "$lic" && grep -q 'TERMS AND CONDITIONS' "$lic"; then
		# The full text is in every Debian system's common licenses.
		echo "License: Apache-2.0"
		echo " The full text is in /usr/share/common-licenses/Apache-2.0."
	elif [ -n "$lic" ]; then
		sed -e 's/[[:space:]]*$//' "$lic"
	else
		echo "(no license file found in the module)"
	fi
done
