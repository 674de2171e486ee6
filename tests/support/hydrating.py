"""hydrate in tests: the runner's cache key, as a CI secret would hold it."""

from __future__ import annotations

#: DYN_GITOPS_HYDRATE_KEY of the tests' runner (without it hydrate reuses nothing)
RUNNER_KEY = "test-runner-key-0123456789abcdef0123456789"
RUNNER_KEY_ENV = {"DYN_GITOPS_HYDRATE_KEY": RUNNER_KEY}
