#!/usr/bin/env bash
# Checks commit messages against CONTRIBUTING.md's convention: a subject of
# at most 72 characters, then a blank line before any body.
#   scripts/commit-subjects.sh            every commit from the one that added this script to HEAD
#   scripts/commit-subjects.sh --message F  one message in file F (the commit-msg hook)
# Commits before this script existed are history and are not judged.
set -euo pipefail
# Lengths in characters, not bytes, whatever the caller's locale.
export LC_ALL=C.UTF-8
if [ "${1:-}" = "--message" ]; then message=$(realpath "$2"); fi
cd "$(dirname "$0")/.."
limit=72

# Prints the problem with the message on stdin, if any.
problem() {
    # Git drops comment lines of an edited message; so does this.
    local text subject second
    text=$(grep -v '^#' || true)
    subject=$(printf '%s\n' "$text" | sed -n 1p)
    second=$(printf '%s\n' "$text" | sed -n 2p)
    if [ -z "$subject" ]; then echo "the subject is empty"; return; fi
    if [ "${#subject}" -gt "$limit" ]; then echo "the subject is ${#subject} characters; at most $limit: $subject"; return; fi
    if [ -n "$second" ]; then echo "the subject must be followed by a blank line before the body"; fi
}

if [ "${1:-}" = "--message" ]; then
    why=$(problem < "$message")
    if [ -n "$why" ]; then
        echo "commit message refused: $why (see CONTRIBUTING.md)" >&2
        exit 1
    fi
    exit 0
fi

if ! git rev-parse --git-dir >/dev/null 2>&1; then
    echo "commit subjects: not a git checkout, nothing to check"
    exit 0
fi
anchor=$(git log --diff-filter=A --format=%H -- scripts/commit-subjects.sh | tail -n 1)
if [ -z "$anchor" ]; then
    echo "commit subjects: this script is not committed yet, nothing to check"
    exit 0
fi
range="$anchor^..HEAD"
git rev-parse --verify -q "$anchor^" >/dev/null || range="HEAD"   # the anchor is the first commit (or history is cut)
bad=0
checked=0
for commit in $(git rev-list "$range"); do
    checked=$((checked + 1))
    why=$(git log -1 --format=%B "$commit" | problem)
    if [ -n "$why" ]; then
        echo "commit $(git log -1 --format=%h "$commit"): $why"
        bad=$((bad + 1))
    fi
done
if [ "$bad" -gt 0 ]; then
    echo "commit subjects: $bad of $checked commit(s) since $(git log -1 --format=%h "$anchor") break CONTRIBUTING.md's convention" >&2
    exit 1
fi
echo "commit subjects: $checked commit(s) since $(git log -1 --format=%h "$anchor") follow the convention"
