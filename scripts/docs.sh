#!/usr/bin/env bash
# Builds the DocC documentation of Ferry's public Swift modules: FerryTriggerKit
# (what a trigger handler imports) and FerryClient (what a Swift producer
# imports), as static sites under .build/docs/<module>/ (serve the directory
# with any web server; index.html is at <module>/documentation/<module-lowercased>/).
# Any DocC warning (a symbol link that resolves to nothing, an article not
# found) fails the build, so the catalogs cannot drift from the code.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
mkdir -p .build/docs  # the plugin moves each archive into it, and fails when it is missing
for target in FerryTriggerKit FerryClient; do
    swift package --allow-writing-to-directory .build/docs generate-documentation \
        --target "$target" --output-path ".build/docs/$target" \
        --warnings-as-errors --transform-for-static-hosting --hosting-base-path "$target"
    echo "docs: .build/docs/$target"
done
