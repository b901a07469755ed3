#!/usr/bin/env bash
# Installs the commit-msg hook that holds a commit to CONTRIBUTING.md's
# convention before it is made (the test command checks the history too).
set -euo pipefail
cd "$(dirname "$0")/.."
hooks=$(git rev-parse --git-path hooks)
mkdir -p "$hooks"
cat > "$hooks/commit-msg" <<'HOOK'
#!/usr/bin/env bash
exec "$(git rev-parse --show-toplevel)/scripts/commit-subjects.sh" --message "$1"
HOOK
chmod +x "$hooks/commit-msg"
echo "installed $hooks/commit-msg"
