#!/usr/bin/env bash
# Debian's headless Chromium and its driver, for the console's browser test
# (tests/web/test_browser.py). Installed when missing (root and apt-get only).
#
#   source .ci/browser.sh      # in a bash script: make sure they are there
#
# A failed browser test leaves a screenshot and the page's HTML under
# $BROWSER_ARTIFACTS (default .artifacts/browser).

browser_ci_log() { echo "browser.sh: $*" >&2; }

if command -v chromium >/dev/null && command -v chromedriver >/dev/null; then
    browser_ci_log "found $(chromium --version 2>/dev/null | head -1)"
elif [[ $(id -u) == 0 ]] && command -v apt-get >/dev/null; then
    browser_ci_log "installing chromium and chromium-driver (Debian packages)"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -q >/dev/null || browser_ci_log "apt-get update failed; trying the install anyway"
    apt-get install -y -q --no-install-recommends chromium chromium-driver >/dev/null
    browser_ci_log "installed $(chromium --version 2>/dev/null | head -1)"
else
    browser_ci_log "no chromium here and cannot install it (needs root and apt-get)"
fi
export BROWSER_ARTIFACTS="${BROWSER_ARTIFACTS:-$PWD/.artifacts/browser}"
