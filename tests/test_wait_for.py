"""``testing.wait_for``: what it retries, what it raises at once, what its timeout says."""

from __future__ import annotations

import pytest
from dyn_gitops_operator.errors import TransientError
from dyn_gitops_operator.testing import wait_for


def test_a_lookup_miss_is_retried_until_it_succeeds() -> None:
    seen: list[int] = []

    def cond() -> int:
        seen.append(1)
        if len(seen) < 3:
            return {}["missing"]  # type: ignore[no-any-return]
        return len(seen)

    assert wait_for(cond, 5, interval=0) == 3


def test_the_timeout_names_the_last_retried_error_its_type_and_where() -> None:
    def lookup() -> object:
        return {"status": {}}["status"]["state"]

    with pytest.raises(AssertionError) as exc:
        wait_for(lookup, 0.2, "the state", interval=0.01)
    msg = str(exc.value)
    assert msg.startswith("timed out after 0.2 s waiting for the state (last error: KeyError: ")
    assert "'state', raised at test_wait_for.py:" in msg and "in lookup" in msg


def test_an_api_error_is_retried_and_reported_where_it_was_raised() -> None:
    def raises() -> None:
        raise TransientError(503, "ServiceUnavailable", "etcd down")

    def cond() -> bool:
        raises()
        return True

    with pytest.raises(AssertionError, match=r"last error: TransientError: .*etcd down") as exc:
        wait_for(cond, 0.2, interval=0.01)
    assert "in raises (from test_wait_for.py:" in str(exc.value)
    assert "in cond)" in str(exc.value)


@pytest.mark.parametrize("bug", [TypeError("unsupported operand"), ValueError("bad"), OSError()])
def test_any_other_exception_is_raised_at_once(bug: Exception) -> None:
    calls: list[int] = []

    def cond() -> bool:
        calls.append(1)
        raise bug

    with pytest.raises(type(bug)):
        wait_for(cond, 60, interval=0)
    assert calls == [1]  # not retried until the timeout
