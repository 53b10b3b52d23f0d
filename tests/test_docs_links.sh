#!/bin/sh
# Every relative link in the Markdown documentation (README.md, docs/, the module READMEs)
# names a file or folder of the repository, and nothing points at a sibling folder outside it.
# Usage: test_docs_links.sh REPO_ROOT
root=${1:-.}
cd "$root" || exit 2
status=0
for md in README.md docs/*.md */README.md */*/README.md; do
  [ -f "$md" ] || continue
  dir=$(dirname "$md")
  # ](target) and ](target#anchor); skip URLs and pure anchors
  for target in $(grep -o '](\([^)]*\))' "$md" | sed 's/^](\(.*\))$/\1/'); do
    case $target in
      http://* | https://* | mailto:* | '#'*) continue ;;
    esac
    path=${target%%#*}
    if [ ! -e "$dir/$path" ]; then
      echo "$md: broken link: $target" >&2
      status=1
    fi
  done
done
if grep -rn --exclude-dir='build*' --exclude-dir=.git \
     '\.\./shared' . >&2; then
  echo "references to a folder outside the repository above" >&2
  status=1
fi
[ $status -eq 0 ] && echo "documentation links: all resolve"
exit $status
